//! The nesting limit both parsers enforce: a file whose tables and arrays
//! nest deeper than [`MAX_NESTING`] levels is refused with
//! `nesting-too-deep` (exit 2), before anything recursive walks the tree: a
//! 20 KB file of nested block sequences would otherwise overflow the stack of
//! every walk after it (tree building, validation, dropping the tree). No
//! real plan comes near the limit.

use crate::diag::{Diagnostic, Span};

/// How many levels tables and arrays may nest in a plan or policy file (the
/// document itself is level 0). Deeper files get `nesting-too-deep`. The
/// `toml` crate's own guard (80 levels of inline arrays and tables) sits
/// above this, and its refusal is reported under the same code.
pub const MAX_NESTING: usize = 64;

/// The `nesting-too-deep` finding, at the value that opens one level too many.
pub(crate) fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::error("nesting-too-deep", format!("tables and arrays nest deeper than {MAX_NESTING} levels"))
        .with_span(span)
        .with_label("one level too many")
        .with_help("planrun files are shallow data; flatten the structure")
}
