//! The arguments of an `mcp` step against its tool's input schema, checked
//! before the call. A subset of JSON Schema: `type` (one or a list; an
//! `integer` is a number without a fraction), `enum`, `const`,
//! `properties`, `required`, `additionalProperties` (`false` or a schema),
//! `items` (one schema), `minItems`/`maxItems`, `minLength`/`maxLength`
//! (in characters), `minimum`/`maximum`/`exclusiveMinimum`/
//! `exclusiveMaximum` (numbers), and the schemas `true` and `false`. Other
//! keywords (`$ref`, `oneOf`, `pattern`, `format` …) are not checked here:
//! the server checks them itself, and the schema they are in is pinned.

use serde_json::Value;

/// At most this many problems are reported.
const MAX_PROBLEMS: usize = 10;
/// Schemas nested deeper than this are not followed.
const MAX_DEPTH: usize = 32;

/// The problems of `value` against `schema`, each naming where
/// (`arguments.query`); empty when it fits.
pub fn problems(schema: &Value, value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    check(schema, value, "arguments", 0, &mut found);
    found.truncate(MAX_PROBLEMS);
    found
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_i64() || number.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "integer" => value.as_f64().is_some_and(|number| number.fract() == 0.0),
        "number" => value.is_number(),
        other => type_name(value) == other,
    }
}

fn check(schema: &Value, value: &Value, at: &str, depth: usize, found: &mut Vec<String>) {
    if found.len() >= MAX_PROBLEMS || depth > MAX_DEPTH {
        return;
    }
    let schema = match schema {
        Value::Bool(true) => return,
        Value::Bool(false) => return found.push(format!("`{at}` is not allowed")),
        Value::Object(schema) => schema,
        _ => return,
    };
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|name| has_type(value, name)) {
        return found.push(format!("`{at}` must be {}, found {}", types.join(" or "), type_name(value)));
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let shown: Vec<String> = allowed.iter().map(Value::to_string).collect();
        found.push(format!("`{at}` must be one of {}, found {value}", shown.join(", ")));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        found.push(format!("`{at}` must be {expected}, found {value}"));
    }
    bounds(schema, value, at, found);
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !object.contains_key(name) {
                        found.push(format!("`{at}.{name}` is required"));
                    }
                }
            }
            for (name, item) in object {
                let here = format!("{at}.{name}");
                match properties.and_then(|properties| properties.get(name)) {
                    Some(property) => check(property, item, &here, depth + 1, found),
                    None => match schema.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            let known: Vec<String> = properties
                                .map(|properties| properties.keys().map(|key| format!("`{key}`")).collect())
                                .unwrap_or_default();
                            let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
                            found.push(format!("`{here}` is not a property of the tool (known: {known})"));
                        }
                        Some(additional) => check(additional, item, &here, depth + 1, found),
                        None => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{at}[{index}]"), depth + 1, found);
                }
            }
        }
        _ => {}
    }
}

/// A numeric bound: its keyword, whether a value passes it, its words.
type BoundTest = (&'static str, fn(f64, f64) -> bool, &'static str);

/// `minimum` … `exclusiveMaximum`, `minLength`/`maxLength`, `minItems`/`maxItems`.
fn bounds(schema: &serde_json::Map<String, Value>, value: &Value, at: &str, found: &mut Vec<String>) {
    let limit = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(number) = value.as_f64() {
        let tests: [BoundTest; 4] = [
            ("minimum", |value, bound| value >= bound, "at least"),
            ("maximum", |value, bound| value <= bound, "at most"),
            ("exclusiveMinimum", |value, bound| value > bound, "more than"),
            ("exclusiveMaximum", |value, bound| value < bound, "less than"),
        ];
        for (key, holds, words) in tests {
            if let Some(bound) = limit(key)
                && !holds(number, bound)
            {
                found.push(format!("`{at}` must be {words} {bound}, found {number}"));
            }
        }
    }
    let length = match value {
        Value::String(text) => Some((text.chars().count() as f64, "minLength", "maxLength", "characters")),
        Value::Array(items) => Some((items.len() as f64, "minItems", "maxItems", "items")),
        _ => None,
    };
    if let Some((length, min_key, max_key, unit)) = length {
        if let Some(min) = limit(min_key).filter(|min| length < *min) {
            found.push(format!("`{at}` must have at least {min} {unit}, has {length}"));
        }
        if let Some(max) = limit(max_key).filter(|max| length > *max) {
            found.push(format!("`{at}` must have at most {max} {unit}, has {length}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::problems;
    use serde_json::json;

    #[test]
    fn each_keyword_refuses_what_it_should_and_accepts_the_rest() {
        let schema = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 5},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"enum": ["fast", "exact"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "kind": {"const": "doc"},
            },
            "required": ["query"],
            "additionalProperties": false,
        });
        assert_eq!(
            problems(&schema, &json!({"query": "abc", "limit": 3, "mode": "fast", "tags": ["a"]})),
            Vec::<String>::new()
        );
        let cases = [
            (json!({}), "`arguments.query` is required"),
            (json!({"query": 1}), "`arguments.query` must be string, found integer"),
            (json!({"query": ""}), "`arguments.query` must have at least 1 characters, has 0"),
            (json!({"query": "abcdef"}), "`arguments.query` must have at most 5 characters, has 6"),
            (json!({"query": "a", "limit": 2.5}), "`arguments.limit` must be integer, found number"),
            (json!({"query": "a", "limit": 11}), "`arguments.limit` must be at most 10, found 11"),
            (
                json!({"query": "a", "mode": "slow"}),
                "`arguments.mode` must be one of \"fast\", \"exact\", found \"slow\"",
            ),
            (json!({"query": "a", "tags": [1]}), "`arguments.tags[0]` must be string, found integer"),
            (json!({"query": "a", "tags": ["a", "b", "c"]}), "`arguments.tags` must have at most 2 items, has 3"),
            (json!({"query": "a", "kind": "x"}), "`arguments.kind` must be \"doc\", found \"x\""),
            (json!({"query": "a", "extra": 1}), "`arguments.extra` is not a property of the tool"),
            (json!([]), "`arguments` must be object, found array"),
        ];
        for (value, expected) in cases {
            let found = problems(&schema, &value);
            assert!(found.iter().any(|problem| problem.starts_with(expected)), "{value}: {found:?}");
        }
    }

    #[test]
    fn an_additional_properties_schema_and_boolean_schemas_apply() {
        let schema = json!({"type": "object", "additionalProperties": {"type": "number"}, "properties": {"no": false}});
        assert!(problems(&schema, &json!({"a": 1, "b": 2.5})).is_empty());
        assert_eq!(problems(&schema, &json!({"a": "x"})), ["`arguments.a` must be number, found string"]);
        assert_eq!(problems(&schema, &json!({"no": 1})), ["`arguments.no` is not allowed"]);
    }
}
