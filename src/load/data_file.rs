//! Data files: `--inputs FILE` (JSON, YAML or TOML) read into a JSON value,
//! with the loader's findings when the file cannot be read or parsed.

use std::path::Path;

use serde_json::{Map, Value};

use crate::diag::Diagnostic;
use crate::load::checked::FileKind;
use crate::load::loader::Loader;
use crate::load::node::{Node, NodeValue};

impl Loader {
    /// Reads a data file into a JSON value: `.json` strictly (no duplicate
    /// keys, no NaN, nothing after the document), `.yaml`/`.yml` and
    /// `.toml` through the plan parsers. `None` with a finding when the
    /// file cannot be read or parsed.
    pub fn load_data_file(&mut self, path: &Path) -> Option<Value> {
        if path.extension().and_then(|extension| extension.to_str()) == Some("json") {
            let shown = path.display().to_string();
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(error) => {
                    self.diagnostics.push(Diagnostic::error("io-error", format!("cannot read `{shown}`: {error}")));
                    return None;
                }
            };
            return match crate::strict_json::parse(&text) {
                Ok(value) => Some(value),
                Err(error) => {
                    self.diagnostics
                        .push(Diagnostic::error("json-syntax", format!("`{shown}` is not valid JSON: {error}")));
                    None
                }
            };
        }
        let (_, root) = self.read(path, FileKind::Unreadable)?;
        Some(node_value(&root))
    }
}

/// A parsed tree as the JSON value it spells.
pub(crate) fn node_value(node: &Node) -> Value {
    match &node.value {
        NodeValue::Null => Value::Null,
        NodeValue::Bool(flag) => Value::Bool(*flag),
        NodeValue::Integer(number) => Value::from(*number),
        NodeValue::Float(number) => serde_json::Number::from_f64(*number).map_or(Value::Null, Value::Number),
        NodeValue::String(text) | NodeValue::Datetime(text) => Value::String(text.clone()),
        NodeValue::Array(items) => Value::Array(items.iter().map(node_value).collect()),
        NodeValue::Table(entries) => Value::Object(
            entries.iter().map(|(key, value)| (key.name.clone(), node_value(value))).collect::<Map<_, _>>(),
        ),
    }
}
