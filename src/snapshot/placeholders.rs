//! Values derived from other bytes, as they read in a snapshot: every
//! SHA-256 digest (a hash-chain link, a seal, `audit_hash`,
//! `history_hash`, `plan_hash`, the digest of a plan or policy file, an
//! approval fingerprint) is 64 lowercase hex digits, and becomes a
//! placeholder: `[hash-1]`, `[hash-2]` … for the digests that appear more
//! than once, numbered in order of first appearance within one snapshot.
//! The same digest keeps the same
//! number, so a snapshot still shows which values are equal (a
//! fingerprint approved and the one frozen, a `prev_hash` and the seal it
//! links), but never the bytes: a comment in a policy file changes its
//! digest and no snapshot. A digest that appears only once in the snapshot
//! (most links of a hash chain) reads `[hash]`: it equals no other value
//! shown, and an event added before it renumbers nothing. `planrun test`
//! proves the digests instead, by verifying every scenario's records
//! (`planrun verify`).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

/// A SHA-256 digest in hex, not part of a longer word.
static DIGEST: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b[0-9a-f]{64}\b").expect("a valid regex"));

/// `text` with every SHA-256 hex digest replaced by its placeholder (see
/// the module).
pub fn hash_placeholders(text: &str) -> String {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for found in DIGEST.find_iter(text) {
        *seen.entry(found.as_str()).or_default() += 1;
    }
    let mut numbers: HashMap<String, usize> = HashMap::new();
    DIGEST
        .replace_all(text, |found: &regex::Captures<'_>| {
            let digest = &found[0];
            if seen.get(digest).copied().unwrap_or_default() < 2 {
                return "[hash]".to_string();
            }
            let next = numbers.len() + 1;
            let number = *numbers.entry(digest.to_string()).or_insert(next);
            format!("[hash-{number}]")
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_digests_share_a_number_in_order_of_first_appearance() {
        let a = "a".repeat(64);
        let b = "0123456789abcdef".repeat(4);
        let c = "c".repeat(64);
        let text = format!("once {c}\nprev {a}\nseal {b}\nagain {a}\n{b}\n");
        assert_eq!(hash_placeholders(&text), "once [hash]\nprev [hash-1]\nseal [hash-2]\nagain [hash-1]\n[hash-2]\n");
    }

    #[test]
    fn only_whole_lowercase_digests_are_replaced() {
        let longer = "a".repeat(65);
        let upper = "A".repeat(64);
        let short = "a".repeat(63);
        for text in [longer, upper, short, format!("x{}", "a".repeat(64))] {
            assert_eq!(hash_placeholders(&text), text);
        }
    }
}
