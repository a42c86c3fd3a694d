//! A tool's definition as `tools/list` gives it, and its digest.
//!
//! The digest covers what decides how a tool is used: its `name`, its
//! `description` and its `inputSchema`. Its canonical form is the JSON
//! object `{"description": …, "inputSchema": …, "name": …}` (`description`
//! is `null` when the server gives none) with the keys of every object,
//! at every depth, sorted by their UTF-8 bytes, no white space, strings
//! escaped and numbers written as `serde_json` writes them (the records'
//! canonical form, floats allowed). The digest is
//! `sha256:` and the lowercase hex SHA-256 of those bytes. Any other field
//! (`title`, `annotations`, `outputSchema`, `_meta`) is not covered.

use serde_json::{Map, Value};

use crate::digest::sha256_hex;
use crate::store::canonical::canonical_json_with_floats;
use crate::tools::mcp::McpError;

/// One tool of a server.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
}

impl ToolDefinition {
    /// The definition in one entry of `tools/list`.
    pub fn from_listed(entry: &Value) -> Result<ToolDefinition, McpError> {
        let name = entry.get("name").and_then(Value::as_str).filter(|name| !name.is_empty());
        let Some(name) = name else {
            return Err(McpError::Garbage("`tools/list` holds a tool without a name".to_string()));
        };
        let description = match entry.get("description") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(_) => return Err(McpError::Garbage(format!("the description of tool `{name}` is not a string"))),
        };
        let input_schema = match entry.get("inputSchema") {
            Some(schema @ Value::Object(_)) => schema.clone(),
            _ => return Err(McpError::Garbage(format!("tool `{name}` has no `inputSchema` object"))),
        };
        Ok(ToolDefinition { name: name.to_string(), description, input_schema })
    }

    /// The canonical form the digest is taken of (see the module notes).
    pub fn canonical(&self) -> String {
        let mut object = Map::new();
        object.insert("description".to_string(), self.description.clone().map_or(Value::Null, Value::String));
        object.insert("inputSchema".to_string(), self.input_schema.clone());
        object.insert("name".to_string(), Value::String(self.name.clone()));
        canonical_json_with_floats(&Value::Object(object))
    }

    /// `sha256:<hex>` of [`Self::canonical`].
    pub fn digest(&self) -> String {
        format!("sha256:{}", sha256_hex(self.canonical().as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_canonical_form_sorts_keys_at_every_depth_and_ignores_other_fields() {
        let listed = json!({
            "name": "search",
            "title": "not covered",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}, "a": {"type": "integer"}}},
        });
        let tool = ToolDefinition::from_listed(&listed).expect("a definition");
        assert_eq!(
            tool.canonical(),
            r#"{"description":null,"inputSchema":{"properties":{"a":{"type":"integer"},"q":{"type":"string"}},"type":"object"},"name":"search"}"#
        );
        assert_eq!(tool.digest(), format!("sha256:{}", sha256_hex(tool.canonical().as_bytes())));
        let mut changed = tool.clone();
        changed.description = Some("now with a description".to_string());
        assert_ne!(changed.digest(), tool.digest());
    }

    #[test]
    fn a_definition_without_a_name_or_schema_is_garbage() {
        for listed in [
            json!({"inputSchema": {}}),
            json!({"name": "x"}),
            json!({"name": "x", "inputSchema": {}, "description": 1}),
        ] {
            assert!(matches!(ToolDefinition::from_listed(&listed), Err(McpError::Garbage(_))), "{listed}");
        }
    }
}
