//! Renders diagnostics as text (cargo/rustc layout) or JSON.
//!
//! ```text
//! error[unknown-key]: unknown key `comand` in step `step-1`
//!  --> plans/x.toml:9:1
//!   |
//! 9 | comand = ["pwd"]
//!   | ^^^^^^ did you mean `command`?
//!   |
//!   = help: allowed keys: `id`, `kind`, `command`, `timeout_secs`, `retry`
//! ```

use std::fmt::Write as _;

use serde_json::json;

use crate::diag::{Diagnostic, SourceMap};

/// Renders one diagnostic. Plain text; colour is added by the caller's stream.
pub fn render(sources: &SourceMap, diagnostic: &Diagnostic) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}[{}]: {}", diagnostic.severity.as_str(), diagnostic.code, diagnostic.message);
    let located = diagnostic.span.and_then(|span| sources.get(span.source).map(|file| (span, file)));
    if let Some((span, file)) = located {
        let (line, column) = file.line_col(span.start);
        let number = line.to_string();
        let pad = " ".repeat(number.len());
        let text = file.line_text(line);
        let _ = writeln!(out, "{pad}--> {}:{line}:{column}", file.name);
        let _ = writeln!(out, "{pad} |");
        let _ = writeln!(out, "{number} | {text}");
        // Mark the span on its first line only; a span that crosses lines is
        // marked to the end of that line.
        let (end_line, end_column) = file.line_col(span.end);
        let line_chars = text.chars().count();
        let marks = if end_line == line { end_column.saturating_sub(column) } else { line_chars + 1 - column };
        let marks = marks.max(1);
        let indent: String =
            text.chars().take(column - 1).map(|character| if character == '\t' { '\t' } else { ' ' }).collect();
        let label = diagnostic.label.as_deref().map(|label| format!(" {label}")).unwrap_or_default();
        let _ = writeln!(out, "{pad} | {indent}{}{label}", "^".repeat(marks));
        if let Some(help) = &diagnostic.help {
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{pad} = help: {help}");
        }
    } else {
        if let Some(label) = &diagnostic.label {
            let _ = writeln!(out, "  = note: {label}");
        }
        if let Some(help) = &diagnostic.help {
            let _ = writeln!(out, "  = help: {help}");
        }
    }
    out
}

/// Renders many diagnostics separated by blank lines.
pub fn render_all(sources: &SourceMap, diagnostics: &[Diagnostic]) -> String {
    diagnostics.iter().map(|diagnostic| render(sources, diagnostic)).collect::<Vec<_>>().join("\n")
}

/// The machine-readable form used by `--format json`.
pub fn to_json(sources: &SourceMap, diagnostic: &Diagnostic) -> serde_json::Value {
    let location = diagnostic.span.and_then(|span| {
        sources.get(span.source).map(|file| {
            let (line, column) = file.line_col(span.start);
            let (end_line, end_column) = file.line_col(span.end);
            json!({
                "file": file.name,
                "line": line,
                "column": column,
                "end_line": end_line,
                "end_column": end_column,
            })
        })
    });
    json!({
        "severity": diagnostic.severity.as_str(),
        "code": diagnostic.code,
        "message": diagnostic.message,
        "location": location,
        "label": diagnostic.label,
        "help": diagnostic.help,
    })
}
