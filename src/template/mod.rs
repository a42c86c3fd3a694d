//! Templates: `{{ last.output_text }}`, `{{ steps.<id>.output_text }}`,
//! `{{ steps.<id>.stderr_text }}`, `{{ steps.<id>.output_json.<field> }}`,
//! `{{ run.id }}`.
//!
//! Templates are parsed once, by the loader, into [`Template`]s held by the
//! model; the interpreter renders them just before a step runs. Rendering is a
//! single pass over parsed segments, so substituted text is never re-expanded:
//! output that contains `{{ … }}` stays literal.

mod json;
mod parse;
mod render;

pub use json::JsonTemplate;
pub use parse::{Field, Filter, RefTarget, Reference, Segment, Template, TemplateSyntaxError};
pub use render::{RenderContext, StepOutput, StepState, TemplateError};
