//! Diagnostics: findings about plan and policy files, with spans that render
//! as `file:line:column` and a marked source line; and [`display_path`], how
//! every path is shown to users; and [`error_chain`], how a library's error
//! and its causes are shown in one line.
//!
//! Adding a diagnostic: pick a stable kebab-case code (it is part of the
//! contract: users filter and search by it), build a [`Diagnostic`] with a
//! primary span, and add a hint that tells the author what to write instead.

mod diagnostic;
mod error_chain;
mod path;
mod render;
mod span;

pub use diagnostic::{Diagnostic, Severity};
pub use error_chain::error_chain;
pub use path::display_path;
pub use render::{render, render_all, to_json};
pub use span::{SourceFile, SourceId, SourceMap, Span};
