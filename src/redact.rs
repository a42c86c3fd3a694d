//! [`Redactor`]: replaces a run's secret values by `[secret:NAME]` in
//! everything planrun keeps, prints or answers.
//!
//! Built once per run from the values the run was given. Each value is
//! searched in the forms a program is likely to print it in:
//!
//! - raw;
//! - JSON-escaped (the text between the quotes of `serde_json`'s string);
//! - URL-encoded: every byte outside `A-Z a-z 0-9 - . _ ~` as `%XX`, with
//!   upper- and lowercase hex digits, and the form encoding (`+` for a
//!   space);
//! - base64, standard (`+/`) and URL-safe (`-_`) alphabets: the whole
//!   value's encoding, padded and unpadded, and — for a value encoded
//!   inside a longer text, where its first byte may fall on any of the
//!   three positions of a 3-byte group — for each of the three alignments
//!   the characters that only the value's own bytes decide. Those cover
//!   every complete group of the value; the one to three characters at
//!   either end that mix with the neighbouring bytes are left. A value
//!   shorter than 5 bytes has no complete group at every alignment, so its
//!   embedded base64 is covered only where it starts a group (secrets are
//!   refused below [`MIN_SECRET_BYTES`] anyway).
//!
//! All patterns go into one Aho-Corasick automaton (leftmost-longest), so a
//! text is scanned once, in time linear in its length, whatever the number
//! of secrets.

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

/// The shortest secret value a run accepts: a shorter one would be
/// replaced wherever its few characters happen to appear.
pub const MIN_SECRET_BYTES: usize = 4;

/// Replaces secret values (and their encodings) by `[secret:NAME]`.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// `None` when the run has no secrets: redaction is then free.
    automaton: Option<AhoCorasick>,
    /// The replacement of each pattern, parallel to the automaton's.
    replacements: Vec<String>,
}

impl Redactor {
    /// A redactor for `secrets` (name, value). Empty values are skipped.
    pub fn new<'a>(secrets: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut patterns: Vec<String> = Vec::new();
        let mut replacements = Vec::new();
        for (name, value) in secrets {
            if value.is_empty() {
                continue;
            }
            let replacement = format!("[secret:{name}]");
            for form in forms(value) {
                if !form.is_empty() && !patterns.contains(&form) {
                    patterns.push(form);
                    replacements.push(replacement.clone());
                }
            }
        }
        if patterns.is_empty() {
            return Redactor::default();
        }
        let automaton = AhoCorasick::builder().match_kind(MatchKind::LeftmostLongest).build(&patterns).ok();
        Redactor { automaton, replacements }
    }

    /// Whether the run has any secret to redact.
    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// `text` with every secret form replaced.
    pub fn text(&self, text: &str) -> String {
        match &self.automaton {
            Some(automaton) if automaton.is_match(text) => automaton.replace_all(text, &self.replacements),
            _ => text.to_string(),
        }
    }

    /// Replaces in place (no copy when nothing matches).
    pub fn in_place(&self, text: &mut String) {
        if let Some(automaton) = &self.automaton
            && automaton.is_match(text.as_str())
        {
            *text = automaton.replace_all(text, &self.replacements);
        }
    }

    /// Replaces in every string (and object key) of a JSON value.
    pub fn value(&self, value: &mut Value) {
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => self.in_place(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.value(&mut item);
                    map.insert(self.text(&key), item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

/// Every form of `value` that is searched.
fn forms(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    let json = serde_json::to_string(value).unwrap_or_default();
    forms.push(json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_string());
    for (lower, form) in [(false, false), (true, false), (false, true), (true, true)] {
        forms.push(percent(value, lower, form));
    }
    let bytes = value.as_bytes();
    for alphabet in [STANDARD, URL_SAFE] {
        let whole = base64(bytes, alphabet, true);
        forms.push(whole.trim_end_matches('=').to_string());
        forms.push(whole);
        // Embedded: the complete groups from each alignment on.
        for skip in 0..3 {
            let rest = bytes.get(skip..).unwrap_or_default();
            let complete = rest.len() / 3 * 3;
            if complete >= 3 {
                forms.push(base64(&rest[..complete], alphabet, false));
            }
        }
    }
    forms
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `bytes` in base64 with `alphabet`, `=`-padded when `pad`.
fn base64(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let bits = u32::from(group[0]) << 16 | u32::from(group[1]) << 8 | u32::from(group[2]);
        for index in 0..=chunk.len() {
            out.push(char::from(alphabet[(bits >> (18 - 6 * index) & 0x3f) as usize]));
        }
        if pad {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}

/// `text` percent-encoded (every byte but the unreserved ones), with
/// lowercase hex digits when `lower`, a space as `+` when `form`.
fn percent(text: &str, lower: bool, form: bool) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(char::from(byte)),
            b' ' if form => out.push('+'),
            _ if lower => out.push_str(&format!("%{byte:02x}")),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUE: &str = "s3cr3t \"value\"/+&é";

    fn redactor() -> Redactor {
        Redactor::new([("TOKEN", VALUE), ("OTHER", "another-secret")])
    }

    #[test]
    fn base64_matches_the_standard_encodings() {
        assert_eq!(base64(b"", STANDARD, true), "");
        assert_eq!(base64(b"f", STANDARD, true), "Zg==");
        assert_eq!(base64(b"fo", STANDARD, true), "Zm8=");
        assert_eq!(base64(b"foo", STANDARD, true), "Zm9v");
        assert_eq!(base64(b"foobar", STANDARD, false), "Zm9vYmFy");
        assert_eq!(base64(&[0xfb, 0xff], URL_SAFE, false), "-_8");
    }

    #[test]
    fn every_form_is_replaced() {
        let redactor = redactor();
        let json = serde_json::to_string(VALUE).expect("json");
        let texts = [
            format!("a {VALUE} b"),
            format!("a {json} b"),
            format!("a {} b", percent(VALUE, false, false)),
            format!("a {} b", percent(VALUE, true, true)),
            format!("a {} b", base64(VALUE.as_bytes(), STANDARD, true)),
            format!("a {} b", base64(VALUE.as_bytes(), URL_SAFE, false)),
        ];
        for text in texts {
            let out = redactor.text(&text);
            assert!(out.contains("[secret:TOKEN]"), "{text} -> {out}");
            assert!(!out.contains("s3cr3t"), "{out}");
        }
    }

    #[test]
    fn base64_at_any_offset_loses_every_complete_group() {
        let redactor = redactor();
        for prefix in ["", "x", "xy", "xyz", "Authorization: Basic "] {
            for suffix in ["", "!", "!!"] {
                let embedded = format!("{prefix}{VALUE}{suffix}");
                for alphabet in [STANDARD, URL_SAFE] {
                    let encoded = base64(embedded.as_bytes(), alphabet, true);
                    let out = redactor.text(&encoded);
                    assert!(out.contains("[secret:TOKEN]"), "{embedded:?}: {encoded} -> {out}");
                    // What is left of the value is at most two partial groups.
                    let left = out.replace("[secret:TOKEN]", "");
                    assert!(left.len() <= base64(prefix.as_bytes(), alphabet, true).len() + 12, "{out}");
                }
            }
        }
    }

    #[test]
    fn json_values_and_keys_are_redacted() {
        let redactor = redactor();
        let mut value = serde_json::json!({ VALUE: [VALUE, 1, { "k": "another-secret" }] });
        redactor.value(&mut value);
        assert_eq!(value, serde_json::json!({ "[secret:TOKEN]": ["[secret:TOKEN]", 1, { "k": "[secret:OTHER]" }] }));
    }

    #[test]
    fn no_secrets_changes_nothing() {
        let redactor = Redactor::new([]);
        assert!(redactor.is_empty());
        assert_eq!(redactor.text("anything"), "anything");
    }
}
