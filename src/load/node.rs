//! A spanned document tree shared by the TOML and YAML front ends.
//!
//! Both parsers produce a [`Node`]; validation reads only nodes, so a new
//! format needs only a new front end beside `parse_toml.rs` and
//! `parse_yaml.rs` (and its arm in `parse.rs`). Tables keep their keys
//! in file order, with the span of each key, so findings can point at keys
//! as well as values.

use crate::diag::Span;

/// One value of a plan or policy file, with the byte span it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub span: Span,
    pub value: NodeValue,
}

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Integer(i64),
    Float(f64),
    String(String),
    /// A TOML date or time, kept as written. No planrun key takes one, so it
    /// only ever shows up in a `wrong-type` finding.
    Datetime(String),
    Array(Vec<Node>),
    /// Keys in file order; a key appears at most once (the parsers reject
    /// duplicates).
    Table(Vec<(Key, Node)>),
}

/// A table key and the span of the key as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub name: String,
    pub span: Span,
}

impl Node {
    pub fn new(span: Span, value: NodeValue) -> Self {
        Node { span, value }
    }

    /// The kind of value, with its article, for messages (`a string`).
    pub fn type_name(&self) -> &'static str {
        self.value.type_name()
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::String(text) => Some(text),
            _ => None,
        }
    }

    pub fn as_table(&self) -> Option<&[(Key, Node)]> {
        match &self.value {
            NodeValue::Table(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.value {
            NodeValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The value of `key` when this node is a table that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_table()?.iter().find(|(name, _)| name.name == key).map(|(_, value)| value)
    }
}

impl NodeValue {
    /// The kind of value, with its article, for messages (`an integer`).
    pub fn type_name(&self) -> &'static str {
        match self {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Integer(_) => "an integer",
            NodeValue::Float(_) => "a float",
            NodeValue::String(_) => "a string",
            NodeValue::Datetime(_) => "a datetime",
            NodeValue::Array(_) => "an array",
            NodeValue::Table(_) => "a table",
        }
    }
}
