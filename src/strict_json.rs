//! The one reader of JSON that this process did not just write itself:
//! HTTP request bodies, record lines and files, receipts, `tickets.json`,
//! records read from a database, decision-backend answers.
//!
//! serde_json accepts what strict JSON does not and says too little about
//! it: it keeps the last of two equal keys silently (so `{"goal": "a",
//! "goal": "b"}` would run `b`, and a record line could say two things at
//! once), and it calls `NaN` or `Infinity` only "expected value". This
//! reader refuses, each with its own [`JsonError`]:
//!
//! - an object with the same key twice (at any depth);
//! - `NaN`, `Infinity`, `-Infinity` (not JSON numbers);
//! - anything but white space after the value (trailing data);
//! - anything else serde_json refuses (syntax, nesting deeper than 128).
//!
//! Floats are JSON and are read; checkpoints, which hold none, refuse them
//! on top of this reader ([`crate::store::canonical::parse_strict`]).

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Why a text is not strict JSON, or not of the expected shape. Lines and
/// columns are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    #[error("line {line} column {column}: duplicate key `{key}` (strict JSON names each key of an object once)")]
    DuplicateKey { key: String, line: usize, column: usize },
    #[error("line {line} column {column}: `{token}` is not a JSON number (JSON has no NaN or Infinity)")]
    NotANumber { token: &'static str, line: usize, column: usize },
    #[error("line {line} column {column}: trailing data after the JSON value")]
    TrailingData { line: usize, column: usize },
    #[error("line {line}: the text ends inside the JSON value (truncated)")]
    Truncated { line: usize },
    #[error("line {line}: {message}")]
    Syntax { line: usize, message: String },
    /// Strict JSON, but not what the reader expects (a missing or unknown
    /// field, a wrong type).
    #[error("{0}")]
    Shape(String),
}

impl JsonError {
    /// Whether the text is not strict JSON at all (rather than JSON of the
    /// wrong shape).
    pub fn is_syntax(&self) -> bool {
        !matches!(self, JsonError::Shape(_))
    }

    /// The 1-based line the error is on (1 for a value of the wrong shape).
    pub fn line(&self) -> usize {
        match self {
            JsonError::DuplicateKey { line, .. }
            | JsonError::NotANumber { line, .. }
            | JsonError::TrailingData { line, .. }
            | JsonError::Truncated { line }
            | JsonError::Syntax { line, .. } => *line,
            JsonError::Shape(_) => 1,
        }
    }
}

/// Parses `text` as strict JSON.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    parse_slice(text.as_bytes())
}

/// Parses `bytes` (UTF-8) as strict JSON.
pub fn parse_slice(bytes: &[u8]) -> Result<Value, JsonError> {
    DUPLICATE.with_borrow_mut(Option::take);
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let StrictValue(value) =
        StrictValue::deserialize(&mut deserializer).map_err(|error| match DUPLICATE.with_borrow_mut(Option::take) {
            Some(key) => JsonError::DuplicateKey { key, line: error.line(), column: error.column() },
            None => syntax(bytes, &error),
        })?;
    deserializer.end().map_err(|error| JsonError::TrailingData { line: error.line(), column: error.column() })?;
    Ok(value)
}

/// Parses `text` as strict JSON into a `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, JsonError> {
    from_value(parse(text)?)
}

/// Parses `bytes` as strict JSON into a `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, JsonError> {
    from_value(parse_slice(bytes)?)
}

/// A `T` from a value this reader returned.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, JsonError> {
    serde_json::from_value(value).map_err(|error| JsonError::Shape(error.to_string()))
}

/// A syntax error, naming the non-number token serde_json only calls
/// "expected value".
fn syntax(bytes: &[u8], error: &serde_json::Error) -> JsonError {
    let (line, column) = (error.line(), error.column());
    let text = String::from_utf8_lossy(bytes);
    match non_number_at(&text, line, column) {
        Some(token) => JsonError::NotANumber { token, line, column },
        None if error.is_eof() => JsonError::Truncated { line },
        None => JsonError::Syntax { line, message: error.to_string() },
    }
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

thread_local! {
    /// The key a [`StrictValue`] found twice, for [`parse_slice`] to name
    /// (serde_json adds its position): a parse runs on one thread, and
    /// nothing parses inside a parse.
    static DUPLICATE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// One value, read refusing duplicate keys.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StrictValue, D::Error> {
        deserializer.deserialize_any(Strict).map(StrictValue)
    }
}

/// The visitor behind [`StrictValue`].
struct Strict;

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("JSON without duplicate keys")
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
        // serde_json never yields a non-finite float; `Null` would be the
        // only stand-in, so refuse rather than change the value.
        serde_json::Number::from_f64(value)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("`{value}` is not a JSON number")))
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
            if map.contains_key(&key) {
                let message = format!("duplicate key `{key}`");
                DUPLICATE.set(Some(key));
                return Err(de::Error::custom(message));
            }
            let StrictValue(value) = access.next_value()?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_json_refuses_duplicates_non_numbers_and_trailing_data_by_name() {
        for (text, expected) in [
            (r#"{"a": 1, "a": 2}"#, "line 1 column 12: duplicate key `a`"),
            (r#"{"x": [{"b": {"c": 1, "c": 1}}]}"#, "duplicate key `c`"),
            (r#"{"a": NaN}"#, "`NaN` is not a JSON number"),
            (r#"{"a": Infinity}"#, "`Infinity` is not a JSON number"),
            ("{\n  \"a\": -Infinity\n}", "line 2 column"),
            (r#"{"a": 1} {"b": 2}"#, "line 1 column 10: trailing data"),
            (r#"{"a": 1}x"#, "trailing data"),
            (r#"{"a": nope}"#, "line 1: expected"),
            ("{\"a\": [1,", "line 1: the text ends inside the JSON value"),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.to_string().contains(expected), "{text}: {error}");
            assert!(error.is_syntax(), "{text}");
        }
    }

    #[test]
    fn strict_json_reads_floats_keeps_key_order_and_allows_white_space_after() {
        let value = parse("{\"b\": 1.5, \"a\": [1, -2, \"x\", null, true]}\n  ").expect("strict");
        assert_eq!(serde_json::to_string(&value).expect("text"), r#"{"b":1.5,"a":[1,-2,"x",null,true]}"#);
        // The same key in two objects is not a duplicate.
        assert!(parse(r#"[{"a": 1}, {"a": 2}]"#).is_ok());
    }

    #[test]
    fn typed_reads_refuse_duplicates_a_struct_would_have_overwritten() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Body {
            goal: String,
            extra: Value,
        }
        let error = from_str::<Body>(r#"{"goal": "a", "extra": {"k": 1, "k": 2}}"#).expect_err("duplicate");
        assert!(matches!(&error, JsonError::DuplicateKey { key, .. } if key == "k"), "{error}");
        let error = from_str::<Body>(r#"{"goal": "a"}"#).expect_err("missing");
        assert!(matches!(&error, JsonError::Shape(message) if message.contains("missing field `extra`")), "{error}");
        assert!(!error.is_syntax());
    }
}
