//! The one check of a workspace-relative path a scenario file names (a
//! fixture, a snapshotted file, a git fixture's folder).

use std::path::{Component, Path};

use crate::diag::Diagnostic;
use crate::load::node::Node;
use crate::load::table::expect_string;

/// A workspace-relative path with no `..`, not absolute and not in `runs/`.
pub(crate) fn workspace_path(node: &Node, what: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    let text = expect_string(node, what, diagnostics)?;
    let path = Path::new(text);
    let inside = !text.is_empty() && path.components().all(|component| matches!(component, Component::Normal(_)));
    let records = path.components().next().is_some_and(|first| first.as_os_str() == "runs");
    if inside && !records {
        return Some(text.to_string());
    }
    diagnostics.push(
        Diagnostic::error("invalid-path", format!("{what} `{text}` is not a workspace file"))
            .with_span(node.span)
            .with_label("expected a relative path inside the workspace")
            .with_help("write a path such as `tickets.json`, without `..`, `/` at the start, or `runs/`"),
    );
    None
}
