//! A JSON document whose string leaves are templates: a step's `json` key.
//! Each leaf renders on its own with [`Template::render_value`] (a leaf
//! that is exactly one unfiltered reference keeps a structured value's
//! shape), and the document is then serialised by `serde_json`, so text
//! with newlines, quotes or any Unicode stays valid JSON with no escaping
//! by hand.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::template::{RenderContext, Template, TemplateError};

/// A structured value with template leaves.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonTemplate {
    /// `null`, a boolean or a number: kept as written.
    Scalar(Value),
    /// A string: a template.
    Text(Template),
    Array(Vec<JsonTemplate>),
    /// Keys in file order.
    Object(Vec<(String, JsonTemplate)>),
}

impl JsonTemplate {
    /// Every template leaf, in document order.
    pub fn templates(&self) -> Vec<&Template> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a Template>) {
        match self {
            JsonTemplate::Scalar(_) => {}
            JsonTemplate::Text(template) => out.push(template),
            JsonTemplate::Array(items) => items.iter().for_each(|item| item.collect(out)),
            JsonTemplate::Object(entries) => entries.iter().for_each(|(_, value)| value.collect(out)),
        }
    }

    /// The document with every leaf rendered.
    pub fn render_value(&self, context: &dyn RenderContext) -> Result<Value, TemplateError> {
        Ok(match self {
            JsonTemplate::Scalar(value) => value.clone(),
            JsonTemplate::Text(template) => template.render_value(context)?,
            JsonTemplate::Array(items) => {
                Value::Array(items.iter().map(|item| item.render_value(context)).collect::<Result<_, _>>()?)
            }
            JsonTemplate::Object(entries) => {
                let mut object = Map::new();
                for (key, value) in entries {
                    object.insert(key.clone(), value.render_value(context)?);
                }
                Value::Object(object)
            }
        })
    }

    /// The rendered document as the text a file gets: pretty JSON and a
    /// final newline.
    pub fn render_text(&self, context: &dyn RenderContext) -> Result<String, TemplateError> {
        let value = self.render_value(context)?;
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        Ok(text)
    }

    /// The document as written, leaves as their template text.
    fn source(&self) -> Value {
        match self {
            JsonTemplate::Scalar(value) => value.clone(),
            JsonTemplate::Text(template) => Value::String(template.source().to_string()),
            JsonTemplate::Array(items) => Value::Array(items.iter().map(JsonTemplate::source).collect()),
            JsonTemplate::Object(entries) => {
                Value::Object(entries.iter().map(|(key, value)| (key.clone(), value.source())).collect())
            }
        }
    }
}

impl Serialize for JsonTemplate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.source().serialize(serializer)
    }
}
