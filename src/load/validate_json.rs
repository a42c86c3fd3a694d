//! A `write_file` step's `json` key: a table or an array whose string
//! leaves are templates ([`JsonTemplate`]), and whether the step gave it or
//! `content` (exactly one).

use crate::diag::Diagnostic;
use crate::load::node::{Node, NodeValue};
use crate::load::table::wrong_type;
use crate::load::validate_step::ActionBuilder;
use crate::template::{JsonTemplate, Template};

impl ActionBuilder<'_, '_, '_> {
    /// `content` or `json`, exactly one; `None` after a diagnostic.
    pub(super) fn file_content(&mut self) -> Option<(Option<Template>, Option<JsonTemplate>)> {
        let content = self.reader.string("content", self.diagnostics).map(|(_, node)| node);
        let content_given = self.reader.has("content");
        let json = self.reader.get("json");
        match (content_given, json) {
            (true, Some(json)) => {
                self.diagnostics.push(
                    Diagnostic::error("conflicting-keys", "`content` and `json` are both given")
                        .with_span(self.reader.key_span("json").unwrap_or(json.span))
                        .with_label("one of the two")
                        .with_help("`json` writes a document built from templates; `content` writes text: keep one"),
                );
                None
            }
            (false, None) => {
                self.reader.required("content", self.diagnostics);
                None
            }
            (true, None) => Some((Some(self.template(content?, "`content`")?), None)),
            (false, Some(json)) => {
                if json.as_table().is_none() && json.as_array().is_none() {
                    self.diagnostics.push(wrong_type(json, "`json`", "a table or an array"));
                    return None;
                }
                Some((None, Some(self.json_template(json)?)))
            }
        }
    }

    /// A structured value whose string leaves are templates. Every leaf is
    /// parsed (and remembered for the template lints) even after an error.
    pub(super) fn json_template(&mut self, node: &Node) -> Option<JsonTemplate> {
        Some(match &node.value {
            NodeValue::Null => JsonTemplate::Scalar(serde_json::Value::Null),
            NodeValue::Bool(value) => JsonTemplate::Scalar((*value).into()),
            NodeValue::Integer(value) => JsonTemplate::Scalar((*value).into()),
            NodeValue::Float(value) => match serde_json::Number::from_f64(*value) {
                Some(number) => JsonTemplate::Scalar(serde_json::Value::Number(number)),
                None => {
                    self.diagnostics.push(wrong_type(node, "a value in `json`", "a finite number"));
                    return None;
                }
            },
            NodeValue::String(_) => JsonTemplate::Text(self.template(node, "`json`")?),
            NodeValue::Datetime(_) => {
                self.diagnostics.push(wrong_type(
                    node,
                    "a value in `json`",
                    "a string, number, boolean, table or array",
                ));
                return None;
            }
            NodeValue::Array(items) => {
                let items: Vec<_> = items.iter().map(|item| self.json_template(item)).collect();
                JsonTemplate::Array(items.into_iter().collect::<Option<_>>()?)
            }
            NodeValue::Table(entries) => {
                let entries: Vec<_> =
                    entries.iter().map(|(key, value)| Some((key.name.clone(), self.json_template(value)?))).collect();
                JsonTemplate::Object(entries.into_iter().collect::<Option<_>>()?)
            }
        })
    }
}
