//! A plan's `[inputs.NAME]` tables → [`InputSpec`]s.
//!
//! Each declaration is checked on its own: a known `type`, constraints that
//! fit the type (`pattern` and `max_length` for text, `min`/`max` for
//! numbers), `min` ≤ `max`, a `one_of` and a `default` whose values have the
//! type and pass the constraints, and never both `required` and `default`.

use serde_json::Value;

use crate::diag::Diagnostic;
use crate::load::keys::INPUT;
use crate::load::node::{Node, NodeValue};
use crate::load::table::{TableReader, compile_regex, name_or_error, wrong_type};
use crate::model::{GivenValue, InputSpec, InputType};

/// The plan's declared inputs, in file order; `None` after a reported error.
pub(crate) fn inputs(node: Option<&Node>, diagnostics: &mut Vec<Diagnostic>) -> Option<Vec<InputSpec>> {
    let Some(node) = node else {
        return Some(Vec::new());
    };
    let Some(entries) = node.as_table() else {
        diagnostics.push(wrong_type(node, "`inputs`", "a table of input tables (`[inputs.NAME]`)"));
        return None;
    };
    let mut specs = Vec::new();
    let mut failed = false;
    for (key, table) in entries {
        let name = name_or_error(&key.name, &Node::new(key.span, NodeValue::Null), "input name", 64, diagnostics);
        match (name, input(&key.name, table, diagnostics)) {
            (Some(_), Some(spec)) => specs.push(spec),
            _ => failed = true,
        }
    }
    (!failed).then_some(specs)
}

fn input(name: &str, node: &Node, diagnostics: &mut Vec<Diagnostic>) -> Option<InputSpec> {
    let what = format!("`inputs.{name}`");
    let mut reader = TableReader::new(node, &what, format!(" in `[inputs.{name}]`"), INPUT.keys, diagnostics)?;
    let choices: Vec<(&str, InputType)> =
        [InputType::String, InputType::Integer, InputType::Number, InputType::Boolean, InputType::Path]
            .into_iter()
            .map(|ty| (ty.as_str(), ty))
            .collect();
    let type_node = reader.required("type", diagnostics).is_some();
    let ty = if type_node { reader.choice("type", "input type", &choices, diagnostics).flatten() } else { None };
    let description = reader.string("description", diagnostics).map_or_else(String::new, |(text, _)| text.to_string());
    let required = reader.bool("required", diagnostics).unwrap_or(false);
    let pattern =
        reader.string("pattern", diagnostics).map(|(text, node)| (compile_regex(text, true, node, diagnostics), node));
    let min = number(&mut reader, "min", diagnostics);
    let max = number(&mut reader, "max", diagnostics);
    let max_length = reader.integer("max_length", 1, diagnostics).map(|(value, node)| (value as usize, node));
    let one_of = reader.array("one_of", diagnostics).map(|items| (items, reader.key_span("one_of")));
    let default = reader.get("default");
    reader.finish(diagnostics);
    let ty = ty?;

    let mut spec = InputSpec {
        name: name.to_string(),
        ty,
        description,
        required,
        default: None,
        one_of: Vec::new(),
        pattern: None,
        min: min.map(|(value, _)| value),
        max: max.map(|(value, _)| value),
        max_length: max_length.map(|(value, _)| value),
        span: node.span,
    };
    let mut ok = true;
    let text_type = matches!(ty, InputType::String | InputType::Path);
    let number_type = matches!(ty, InputType::Integer | InputType::Number);
    let mut misplaced = |key: &str, node: &Node, fits: &str| {
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("`{key}` does not apply to a {} input", ty.as_str()))
                .with_span(node.span)
                .with_label(format!("only for {fits} inputs"))
                .with_help("remove it, or change the input's `type`"),
        );
    };
    if let Some((compiled, node)) = pattern {
        if !text_type {
            misplaced("pattern", node, "`string` and `path`");
            ok = false;
        }
        match compiled {
            Some(regex) => spec.pattern = Some(regex),
            None => ok = false,
        }
    }
    if let Some((_, node)) = max_length
        && !text_type
    {
        misplaced("max_length", node, "`string` and `path`");
        ok = false;
    }
    for bound in [("min", min), ("max", max)] {
        if let (key, Some((_, node))) = bound
            && !number_type
        {
            misplaced(key, node, "`integer` and `number`");
            ok = false;
        }
    }
    if let (Some((low, _)), Some((high, node))) = (min, max)
        && low > high
    {
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("`min` ({low}) is above `max` ({high})"))
                .with_span(node.span)
                .with_label("no value could pass"),
        );
        ok = false;
    }
    if !ok {
        return None;
    }
    if let Some((items, _)) = one_of {
        // Each value is checked against the type and the other constraints
        // (`spec.one_of` is still empty here); the set then binds `default`.
        let mut values = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match checked_value(&spec, item, &format!("`one_of[{index}]`"), diagnostics) {
                Some(value) => values.push(value),
                None => ok = false,
            }
        }
        spec.one_of = values;
    }
    if let Some(node) = default {
        if required {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("input `{name}` is `required` and has a `default`"))
                    .with_span(node.span)
                    .with_label("a default is never used when the input is required")
                    .with_help("keep one: `required = true`, or the `default`"),
            );
            ok = false;
        } else {
            spec.default = checked_value(&spec, node, "`default`", diagnostics);
            ok &= spec.default.is_some();
        }
    }
    ok.then_some(spec)
}

fn number<'n>(reader: &mut TableReader<'n>, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<(f64, &'n Node)> {
    let node = reader.get(key)?;
    match node.value {
        NodeValue::Integer(value) => Some((value as f64, node)),
        NodeValue::Float(value) if value.is_finite() => Some((value, node)),
        _ => {
            diagnostics.push(wrong_type(node, &format!("`{key}`"), "a number"));
            None
        }
    }
}

/// `node` as a value of the input (its type and constraints), or a finding.
fn checked_value(spec: &InputSpec, node: &Node, what: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<Value> {
    let value = match &node.value {
        NodeValue::String(text) => Value::String(text.clone()),
        NodeValue::Integer(number) => Value::from(*number),
        NodeValue::Float(number) => serde_json::Number::from_f64(*number).map_or(Value::Null, Value::Number),
        NodeValue::Bool(flag) => Value::Bool(*flag),
        _ => Value::Null,
    };
    let checked = if value.is_null() {
        Err(format!("expected {}, found {}", spec.ty.with_article(), node.type_name()))
    } else {
        // `one_of` is checked as the values are read; a `default` must be
        // one of them.
        spec.accept(&GivenValue::Json(value))
    };
    match checked {
        Ok(value) => Some(value),
        Err(reason) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("{what} of input `{}` does not fit it", spec.name))
                    .with_span(node.span)
                    .with_label(reason),
            );
            None
        }
    }
}
