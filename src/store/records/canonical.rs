//! Canonical JSON and strict JSON parsing for checkpoints.
//!
//! Canonical form (what digests are taken over): object keys sorted by their
//! UTF-8 bytes, no insignificant whitespace, strings escaped as serde_json
//! escapes them, integers only. Strict parsing refuses what serde_json would
//! silently accept: duplicate object keys (it keeps the last) and floats
//! (checkpoints hold none, so a float is a sign of tampering or corruption).

use serde_json::Value;

use crate::strict_json;

/// Why a value has no canonical form or a text is not strict JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CanonicalError(pub String);

/// Writes the canonical form of `value`.
pub fn canonical_json(value: &Value) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_canonical(value, false, &mut out)?;
    Ok(out)
}

/// The canonical form of `value` where a float is written as serde_json
/// writes it (an MCP tool definition's schema may hold one).
pub fn canonical_json_with_floats(value: &Value) -> String {
    let mut out = String::new();
    // With floats allowed nothing is refused.
    let _ = write_canonical(value, true, &mut out);
    out
}

fn write_canonical(value: &Value, floats: bool, out: &mut String) -> Result<(), CanonicalError> {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&value.to_string()),
        Value::Number(number) => {
            if number.is_f64() && !floats {
                return Err(CanonicalError(format!("float `{number}` has no canonical form")));
            }
            out.push_str(&number.to_string());
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, floats, out)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], floats, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

pub use crate::digest::sha256_hex;

/// SHA-256 (hex) of the canonical JSON of `value`: fingerprints, intent
/// digests. A value without a canonical form (a float) yields an empty
/// digest, which never matches anything: it fails closed.
pub fn canonical_digest(value: &Value) -> String {
    canonical_json(value).map(|text| sha256_hex(text.as_bytes())).unwrap_or_default()
}

/// Parses JSON strictly ([`crate::strict_json`]: no duplicate keys, NaN,
/// Infinity or trailing data), refusing floats too: a checkpoint holds
/// none, so a float is a sign of tampering or corruption.
pub fn parse_strict(text: &str) -> Result<Value, CanonicalError> {
    let value = strict_json::parse(text).map_err(|error| CanonicalError(error.to_string()))?;
    match first_float(&value) {
        Some(number) => Err(CanonicalError(format!("float `{number}` is not allowed in a checkpoint"))),
        None => Ok(value),
    }
}

/// The first float in `value`, depth first.
fn first_float(value: &Value) -> Option<&serde_json::Number> {
    match value {
        Value::Number(number) => number.is_f64().then_some(number),
        Value::Array(items) => items.iter().find_map(first_float),
        Value::Object(map) => map.values().find_map(first_float),
        Value::Null | Value::Bool(_) | Value::String(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_sorts_keys_and_drops_whitespace() {
        let value = parse_strict(r#"{ "b": [1, {"d": null, "c": "x"}], "a": true }"#).expect("strict JSON");
        assert_eq!(canonical_json(&value).expect("canonical"), r#"{"a":true,"b":[1,{"c":"x","d":null}]}"#);
    }

    #[test]
    fn strict_parsing_refuses_duplicates_floats_and_non_json_numbers() {
        for (text, expected) in [
            (r#"{"a": 1, "a": 2}"#, "duplicate key `a`"),
            (r#"{"a": 1.5}"#, "float"),
            (r#"{"a": NaN}"#, "`NaN` is not a JSON number"),
            (r#"{"a": Infinity}"#, "`Infinity` is not a JSON number"),
            ("{\n  \"a\": -Infinity\n}", "line 2 column"),
            (r#"{"a": nope}"#, "line 1: expected"),
        ] {
            let error = parse_strict(text).expect_err(text);
            assert!(error.0.contains(expected), "{text}: {error}");
        }
        assert!(canonical_json(&serde_json::json!({"x": 0.5})).is_err());
    }
}
