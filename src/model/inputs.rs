//! A plan's declared inputs (`[inputs.NAME]`) and the values a run is given.
//!
//! Values come as text (`--input NAME=VALUE`) or as JSON (`--inputs FILE`,
//! `POST /runs`, a scenario file); [`InputSpec::accept`] turns either into
//! a typed JSON value or says precisely why not, and [`resolve_inputs`]
//! checks a whole set against the plan before anything runs. Input values
//! are data: templates insert them, nothing executes or routes on them.

use std::collections::BTreeMap;

use regex::Regex;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::diag::Span;

/// The values a run was given, defaults applied, by input name.
pub type InputValues = BTreeMap<String, Value>;

/// The type of an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputType {
    String,
    Integer,
    Number,
    Boolean,
    /// A workspace-relative path: no absolute path, no `..`; the only input
    /// type that may fill a step's `path`, where it is confined like any path.
    Path,
}

impl InputType {
    pub const NAMES: &'static [&'static str] = &["string", "integer", "number", "boolean", "path"];

    pub fn as_str(self) -> &'static str {
        match self {
            InputType::String => "string",
            InputType::Integer => "integer",
            InputType::Number => "number",
            InputType::Boolean => "boolean",
            InputType::Path => "path",
        }
    }

    /// `a string`, `an integer`, for messages.
    pub fn with_article(self) -> &'static str {
        match self {
            InputType::String => "a string",
            InputType::Integer => "an integer",
            InputType::Number => "a number",
            InputType::Boolean => "a boolean (`true` or `false`)",
            InputType::Path => "a workspace-relative path",
        }
    }
}

/// One `[inputs.NAME]` table after validation.
#[derive(Debug, Clone, Serialize)]
pub struct InputSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: InputType,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Whether a run must give it (never with a `default`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// A closed set of accepted values (of the input's type).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub one_of: Vec<Value>,
    /// Strings and paths: the whole value matches (anchored at both ends).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "optional_regex")]
    pub pattern: Option<Regex>,
    /// Numbers: inclusive bounds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Strings and paths: at most this many characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    #[serde(skip)]
    pub span: Span,
}

fn optional_regex<S: Serializer>(regex: &Option<Regex>, serializer: S) -> Result<S::Ok, S::Error> {
    match regex {
        Some(regex) => serializer.serialize_str(unanchored(regex.as_str())),
        None => serializer.serialize_none(),
    }
}

impl InputSpec {
    /// The `pattern` as the plan wrote it (the loader anchors it as
    /// `^(?:…)$`).
    pub fn pattern_text(&self) -> Option<&str> {
        self.pattern.as_ref().map(|regex| unanchored(regex.as_str()))
    }
}

fn unanchored(pattern: &str) -> &str {
    pattern.strip_prefix("^(?:").and_then(|rest| rest.strip_suffix(")$")).unwrap_or(pattern)
}

/// Where a value came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSource {
    /// `--input NAME=VALUE`.
    Flag,
    /// `--inputs FILE`, a scenario file.
    File(String),
    /// The `inputs` of an HTTP request body.
    Request,
    /// The plan's `default`.
    Default,
}

impl std::fmt::Display for InputSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InputSource::Flag => f.write_str("--input"),
            InputSource::File(path) => write!(f, "{path}"),
            InputSource::Request => f.write_str("the request's `inputs`"),
            InputSource::Default => f.write_str("the plan's default"),
        }
    }
}

/// A value as given, before it is checked against its input's type.
#[derive(Debug, Clone, PartialEq)]
pub enum GivenValue {
    /// Text from the command line: parsed by the input's type.
    Text(String),
    /// A JSON value: must already have the input's type.
    Json(Value),
}

/// One given input.
#[derive(Debug, Clone, PartialEq)]
pub struct GivenInput {
    pub name: String,
    pub value: GivenValue,
    pub source: InputSource,
}

/// Why a set of given inputs was refused. Nothing ran.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("plan `{plan}` has no input `{name}` (from {from}){}", known_inputs(.known))]
    Unknown { plan: String, name: String, from: InputSource, known: Vec<String> },
    #[error("input `{name}` is required: give it with `--input {name}=VALUE`{}", describe(.description))]
    Missing { name: String, description: String },
    #[error("input `{name}` (from {from}): {reason}")]
    Invalid { name: String, from: InputSource, reason: String },
}

fn known_inputs(known: &[String]) -> String {
    if known.is_empty() {
        "; it declares no inputs".to_string()
    } else {
        format!("; its inputs: {}", known.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", "))
    }
}

fn describe(description: &str) -> String {
    if description.is_empty() { String::new() } else { format!(" ({description})") }
}

impl InputError {
    /// The input the error is about.
    pub fn input(&self) -> &str {
        match self {
            InputError::Unknown { name, .. } | InputError::Missing { name, .. } | InputError::Invalid { name, .. } => {
                name
            }
        }
    }
}

impl InputSpec {
    /// `value` as this input's typed value, or the reason it is refused.
    pub fn accept(&self, value: &GivenValue) -> Result<Value, String> {
        let typed = match value {
            GivenValue::Text(text) => self.parse_text(text)?,
            GivenValue::Json(json) => self.check_type(json)?,
        };
        self.check_constraints(&typed)?;
        Ok(typed)
    }

    fn parse_text(&self, text: &str) -> Result<Value, String> {
        let wrong = || format!("expected {}, found `{text}`", self.ty.with_article());
        match self.ty {
            InputType::String | InputType::Path => Ok(Value::String(text.to_string())),
            InputType::Integer => text.trim().parse::<i64>().map(Value::from).map_err(|_| wrong()),
            InputType::Number => match text.trim().parse::<f64>() {
                Ok(number) if number.is_finite() => Ok(number_value(number)),
                _ => Err(wrong()),
            },
            InputType::Boolean => match text.trim() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(wrong()),
            },
        }
    }

    fn check_type(&self, value: &Value) -> Result<Value, String> {
        let fits = match (self.ty, value) {
            (InputType::String | InputType::Path, Value::String(_)) | (InputType::Boolean, Value::Bool(_)) => true,
            (InputType::Integer, Value::Number(number)) => number.is_i64(),
            (InputType::Number, Value::Number(_)) => true,
            _ => false,
        };
        if fits {
            Ok(value.clone())
        } else {
            Err(format!("expected {}, found {}", self.ty.with_article(), json_type(value)))
        }
    }

    fn check_constraints(&self, value: &Value) -> Result<(), String> {
        if let Value::String(text) = value {
            if let Some(max) = self.max_length
                && text.chars().count() > max
            {
                return Err(format!("at most {max} characters, found {}", text.chars().count()));
            }
            if let Some(pattern) = &self.pattern
                && !pattern.is_match(text)
            {
                return Err(format!(
                    "`{text}` does not match the pattern `{}`",
                    self.pattern_text().unwrap_or_default()
                ));
            }
            if self.ty == InputType::Path {
                check_relative_path(text)?;
            }
        }
        if let Some(number) = value.as_f64() {
            if let Some(min) = self.min
                && number < min
            {
                return Err(format!("at least {min}, found {number}"));
            }
            if let Some(max) = self.max
                && number > max
            {
                return Err(format!("at most {max}, found {number}"));
            }
        }
        if !self.one_of.is_empty() && !self.one_of.iter().any(|allowed| same_value(allowed, value)) {
            let allowed = self.one_of.iter().map(|value| format!("`{}`", shown(value))).collect::<Vec<_>>();
            return Err(format!("`{}` is not one of {}", shown(value), allowed.join(", ")));
        }
        Ok(())
    }
}

/// A path input's lexical confinement: relative, no `..`, no empty or NUL
/// component. Where it is used, the file tools check it again against the
/// workspace and the policy (protected folders, `files.deny`, symlinks).
pub fn check_relative_path(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("a path may not be empty".to_string());
    }
    if text.contains('\0') {
        return Err("a path may not hold a NUL byte".to_string());
    }
    if text.starts_with('/') || text.starts_with('\\') {
        return Err(format!("`{text}` is absolute: give a path inside the workspace"));
    }
    if text.split(['/', '\\']).any(|part| part == "..") {
        return Err(format!("`{text}` leaves the workspace (`..`)"));
    }
    Ok(())
}

fn same_value(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn number_value(number: f64) -> Value {
    serde_json::Number::from_f64(number).map_or(Value::Null, Value::Number)
}

/// `a string`, `an integer`, … for a JSON value, in messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks `given` against the plan's declared `specs` and fills defaults:
/// an unknown name, a missing required input or a value that does not fit
/// is refused. A name given twice takes its last value (a flag after a
/// file overrides it).
pub fn resolve_inputs(plan_id: &str, specs: &[InputSpec], given: &[GivenInput]) -> Result<InputValues, InputError> {
    // The last value of each name is the one checked and kept.
    let last_of_each: BTreeMap<&str, &GivenInput> = given.iter().map(|input| (input.name.as_str(), input)).collect();
    let mut values = InputValues::new();
    for input in last_of_each.into_values() {
        let Some(spec) = specs.iter().find(|spec| spec.name == input.name) else {
            return Err(InputError::Unknown {
                plan: plan_id.to_string(),
                name: input.name.clone(),
                from: input.source.clone(),
                known: specs.iter().map(|spec| spec.name.clone()).collect(),
            });
        };
        let value = spec.accept(&input.value).map_err(|reason| InputError::Invalid {
            name: input.name.clone(),
            from: input.source.clone(),
            reason,
        })?;
        values.insert(input.name.clone(), value);
    }
    for spec in specs {
        if values.contains_key(&spec.name) {
            continue;
        }
        match &spec.default {
            Some(default) => {
                values.insert(spec.name.clone(), default.clone());
            }
            None if spec.required => {
                return Err(InputError::Missing { name: spec.name.clone(), description: spec.description.clone() });
            }
            None => {}
        }
    }
    Ok(values)
}

/// Parses `NAME=VALUE` (the text after the first `=` is the value).
pub fn parse_input_flag(text: &str) -> Result<GivenInput, String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!("`{text}`: write `--input NAME=VALUE`"));
    };
    if name.is_empty() {
        return Err(format!("`{text}`: the input's name is empty; write `--input NAME=VALUE`"));
    }
    Ok(GivenInput { name: name.to_string(), value: GivenValue::Text(value.to_string()), source: InputSource::Flag })
}

/// The inputs of a JSON object (`--inputs FILE`, `POST /runs`, a scenario),
/// or what is wrong with it.
pub fn inputs_from_object(value: &Value, source: InputSource) -> Result<Vec<GivenInput>, String> {
    let Value::Object(map) = value else {
        return Err(format!("{source}: inputs are an object of names and values, found {}", json_type(value)));
    };
    Ok(map
        .iter()
        .map(|(name, value)| GivenInput {
            name: name.clone(),
            value: GivenValue::Json(value.clone()),
            source: source.clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, ty: InputType) -> InputSpec {
        InputSpec {
            name: name.to_string(),
            ty,
            description: String::new(),
            required: false,
            default: None,
            one_of: Vec::new(),
            pattern: None,
            min: None,
            max: None,
            max_length: None,
            span: Span::default(),
        }
    }

    fn flag(text: &str) -> GivenInput {
        parse_input_flag(text).expect("flag")
    }

    #[test]
    fn text_is_parsed_by_type_and_checked_against_constraints() {
        let mut limit = spec("limit_kb", InputType::Integer);
        limit.min = Some(1.0);
        limit.max = Some(1000.0);
        let mut mode = spec("mode", InputType::String);
        mode.one_of = vec![Value::from("fast"), Value::from("full")];
        let mut folder = spec("folder", InputType::Path);
        folder.required = true;
        let specs = [limit, mode, folder];
        let values =
            resolve_inputs("p", &specs, &[flag("limit_kb=42"), flag("folder=src"), flag("mode=full")]).expect("valid");
        assert_eq!(values["limit_kb"], Value::from(42));
        assert_eq!(values["folder"], Value::from("src"));
        for (given, expected) in [
            ("limit_kb=4x", "expected an integer, found `4x`"),
            ("limit_kb=0", "at least 1"),
            ("mode=slow", "`slow` is not one of `fast`, `full`"),
            ("folder=../up", "leaves the workspace"),
            ("folder=/etc", "is absolute"),
            ("nope=1", "has no input `nope`"),
        ] {
            let error = resolve_inputs("p", &specs, &[flag("folder=src"), flag(given)]).expect_err(given);
            assert!(error.to_string().contains(expected), "{given}: {error}");
        }
        let missing = resolve_inputs("p", &specs, &[]).expect_err("folder is required");
        assert_eq!(missing.input(), "folder");
    }

    #[test]
    fn json_values_must_already_have_the_type_and_defaults_fill_the_rest() {
        let mut flag_spec = spec("verbose", InputType::Boolean);
        flag_spec.default = Some(Value::Bool(false));
        let count = spec("count", InputType::Integer);
        let specs = [flag_spec, count];
        let given = inputs_from_object(&serde_json::json!({"count": 3}), InputSource::Request).expect("object");
        let values = resolve_inputs("p", &specs, &given).expect("valid");
        assert_eq!(values["verbose"], Value::Bool(false));
        let given = inputs_from_object(&serde_json::json!({"count": "3"}), InputSource::Request).expect("object");
        let error = resolve_inputs("p", &specs, &given).expect_err("a string is not an integer");
        assert!(error.to_string().contains("expected an integer, found a string"), "{error}");
        assert!(inputs_from_object(&serde_json::json!([1]), InputSource::Request).is_err());
        assert!(parse_input_flag("novalue").is_err());
        assert_eq!(flag("a=b=c").value, GivenValue::Text("b=c".to_string()));
    }
}
