//! Canonical JSON and strict JSON parsing for checkpoints.
//!
//! Canonical form (what digests are taken over): object keys sorted by their
//! UTF-8 bytes, no insignificant whitespace, strings escaped as serde_json
//! escapes them, integers only. Strict parsing refuses what serde_json would
//! silently accept: duplicate object keys (it keeps the last) and floats
//! (checkpoints hold none, so a float is a sign of tampering or corruption).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why a value has no canonical form or a text is not strict JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CanonicalError(pub String);

/// Writes the canonical form of `value`.
pub fn canonical_json(value: &Value) -> Result<String, CanonicalError> {
    let mut out = String::new();
    write_canonical(value, &mut out)?;
    Ok(out)
}

fn write_canonical(value: &Value, out: &mut String) -> Result<(), CanonicalError> {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => out.push_str(&value.to_string()),
        Value::Number(number) => {
            if number.is_f64() {
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
                write_canonical(item, out)?;
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
                write_canonical(&map[key], out)?;
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

/// Parses JSON refusing duplicate keys and floats (NaN and Infinity are not
/// JSON at all and fail in the parser).
pub fn parse_strict(text: &str) -> Result<Value, CanonicalError> {
    let strict: StrictValue = serde_json::from_str(text).map_err(|error| {
        // The parser only says "expected value"; name the token when it is
        // one of the non-numbers other writers emit for floats.
        match non_number_at(text, error.line(), error.column()) {
            Some(token) => CanonicalError(format!(
                "line {} column {}: `{token}` is not a JSON number (a checkpoint holds no NaN, Infinity or floats)",
                error.line(),
                error.column()
            )),
            None => CanonicalError(format!("line {}: {error}", error.line())),
        }
    })?;
    Ok(strict.0)
}

/// `NaN`, `Infinity` or `-Infinity` starting near 1-based `line`/`column`
/// of `text` (the parser reports the column of the token or just past its
/// first character).
fn non_number_at(text: &str, line: usize, column: usize) -> Option<&'static str> {
    let row = text.lines().nth(line.checked_sub(1)?)?;
    let from = column.saturating_sub(2);
    (from..=column)
        .filter_map(|start| row.get(start..))
        .find_map(|rest| ["NaN", "-Infinity", "Infinity"].into_iter().find(|token| rest.starts_with(token)))
}

struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("JSON without duplicate keys or floats")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Err(E::custom(format!("float `{value}` is not allowed in a checkpoint")))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let StrictValue(value) = access.next_value()?;
            if map.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            map.insert(key, value);
        }
        Ok(Value::Object(map))
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
