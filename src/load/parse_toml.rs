//! TOML text → [`Node`] tree, with the `toml` crate's spanned parser
//! ([`toml::de::DeTable`]). The only file that knows that crate.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diagnostic, SourceId, Span};
use crate::load::nesting::{MAX_NESTING, too_deep};
use crate::load::node::{Key, Node, NodeValue};

pub(crate) fn parse_toml(text: &str, id: SourceId, diagnostics: &mut Vec<Diagnostic>) -> Option<Node> {
    match DeTable::parse(text) {
        Ok(table) => {
            if let Some(range) = table.get_ref().values().find_map(|value| too_deep_in_toml(value, 1)) {
                diagnostics.push(too_deep(Span::new(id, range)));
                return None;
            }
            let span = Span::new(id, table.span());
            Some(toml_table(table.get_ref(), span, id, diagnostics))
        }
        Err(error) => {
            let range = error.span().unwrap_or(0..0);
            let message = toml_message(error.message());
            // The crate's recursion guard (inline arrays and tables, dotted
            // keys) is our nesting limit too; the unit tests pin its wording.
            let diagnostic = if message.contains("recursion") || message.contains("recurse") {
                too_deep(Span::new(id, range))
            } else {
                Diagnostic::error("syntax-error", message).with_span(Span::new(id, range)).with_label("invalid TOML")
            };
            diagnostics.push(diagnostic);
            None
        }
    }
}

/// The parser's message, in our style: one line, lowercase, no period.
fn toml_message(message: &str) -> String {
    let line = message.lines().next().unwrap_or("invalid TOML").trim();
    let line = line.trim_end_matches('.');
    let mut chars = line.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "invalid TOML".to_string(),
    }
}

/// The span of the first array or table of `value` (at `level`, the
/// document's own keys being level 1) that nests deeper than
/// [`MAX_NESTING`]. Its recursion is bounded by the crate's own guard.
fn too_deep_in_toml(value: &Spanned<DeValue<'_>>, level: usize) -> Option<Range<usize>> {
    let children: Vec<&Spanned<DeValue<'_>>> = match value.get_ref() {
        DeValue::Array(items) => items.iter().collect(),
        DeValue::Table(table) => table.values().collect(),
        _ => return None,
    };
    if level > MAX_NESTING {
        return Some(value.span());
    }
    children.into_iter().find_map(|child| too_deep_in_toml(child, level + 1))
}

fn toml_table(table: &DeTable<'_>, span: Span, id: SourceId, diagnostics: &mut Vec<Diagnostic>) -> Node {
    let mut entries: Vec<(Key, Node)> = table
        .iter()
        .map(|(key, value)| {
            (
                Key { name: key.get_ref().to_string(), span: Span::new(id, key.span()) },
                toml_value(value, id, diagnostics),
            )
        })
        .collect();
    // The map is sorted by key; the spans give the file order back.
    entries.sort_by_key(|(key, _)| key.span.start);
    let span = if span.start == span.end {
        cover(span, entries.iter().flat_map(|(key, value)| [key.span, value.span]))
    } else {
        span
    };
    Node::new(span, NodeValue::Table(entries))
}

/// The smallest span covering `spans` (or `fallback` when there are none).
fn cover(fallback: Span, spans: impl Iterator<Item = Span>) -> Span {
    spans
        .reduce(|all, next| Span { source: all.source, start: all.start.min(next.start), end: all.end.max(next.end) })
        .unwrap_or(fallback)
}

fn toml_value(value: &Spanned<DeValue<'_>>, id: SourceId, diagnostics: &mut Vec<Diagnostic>) -> Node {
    let span = Span::new(id, value.span());
    let node_value = match value.get_ref() {
        DeValue::String(text) => NodeValue::String(text.to_string()),
        DeValue::Integer(integer) => match i64::from_str_radix(integer.as_str(), integer.radix()) {
            Ok(number) => NodeValue::Integer(number),
            Err(_) => {
                diagnostics.push(
                    Diagnostic::error("invalid-value", "integer out of range")
                        .with_span(span)
                        .with_label("does not fit in 64 bits"),
                );
                NodeValue::Integer(i64::MAX)
            }
        },
        DeValue::Float(float) => NodeValue::Float(float.as_str().parse().unwrap_or(f64::NAN)),
        DeValue::Boolean(flag) => NodeValue::Bool(*flag),
        DeValue::Datetime(datetime) => NodeValue::Datetime(datetime.to_string()),
        DeValue::Array(items) => NodeValue::Array(items.iter().map(|item| toml_value(item, id, diagnostics)).collect()),
        DeValue::Table(table) => return toml_table(table, span, id, diagnostics),
    };
    Node::new(span, node_value)
}
