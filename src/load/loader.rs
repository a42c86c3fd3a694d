//! Reading plan and policy files into [`Node`] trees.
//!
//! The format follows the extension: `.toml` is read with the `toml` crate's
//! spanned parser ([`toml::de::DeTable`]), `.yaml`/`.yml` with
//! `saphyr-parser` events, from which the tree is built here so that spans,
//! duplicate keys and the YAML 1.2 core schema stay under our control. This
//! is the only file that knows about either parser: swapping one changes
//! nothing else.

use std::path::Path;

use crate::digest::sha256_hex;
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, StrInput};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diagnostic, SourceFile, SourceId, SourceMap, Span, display_path};
use crate::load::node::{Key, Node, NodeValue};
use crate::model::SourceRef;

/// The file formats planrun reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Toml,
    Yaml,
}

impl Format {
    /// The format for a file name, by extension.
    pub(crate) fn of(path: &Path) -> Option<Format> {
        match path.extension().and_then(|extension| extension.to_str()) {
            Some("toml") => Some(Format::Toml),
            Some("yaml" | "yml") => Some(Format::Yaml),
            _ => None,
        }
    }
}

/// A file read into the source map.
#[derive(Debug, Clone)]
pub(crate) struct ReadFile {
    pub id: SourceId,
    pub source: SourceRef,
    pub format: Format,
}

/// Reads `path` into `sources`. Reports `unsupported-extension` and
/// `io-error` (both without a span) and returns `None` on either.
pub(crate) fn read(sources: &mut SourceMap, diagnostics: &mut Vec<Diagnostic>, path: &Path) -> Option<ReadFile> {
    let name = display_path(path);
    let Some(format) = Format::of(path) else {
        diagnostics.push(
            Diagnostic::error("unsupported-extension", format!("cannot read `{name}`: unsupported file extension"))
                .with_help("plan and policy files end in `.toml`, `.yaml` or `.yml`"),
        );
        return None;
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            diagnostics.push(Diagnostic::error("io-error", format!("cannot read `{name}`: {error}")));
            return None;
        }
    };
    let sha256 = sha256_hex(&bytes);
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) => {
            diagnostics.push(Diagnostic::error(
                "io-error",
                format!("cannot read `{name}`: the file is not valid UTF-8 ({error})"),
            ));
            return None;
        }
    };
    let id = sources.add(SourceFile::new(name.clone(), text));
    Some(ReadFile { id, source: SourceRef { path: name, sha256 }, format })
}

/// Parses a file already in the source map. Returns `None` when the text is
/// not well-formed; the reasons are in `diagnostics`. Findings that do not
/// stop the tree from being built (a YAML anchor, say) are reported too, and
/// the tree is still returned so that validation can report the rest.
pub(crate) fn parse(
    file: &SourceFile,
    id: SourceId,
    format: Format,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Node> {
    match format {
        Format::Toml => parse_toml(&file.text, id, diagnostics),
        Format::Yaml => YamlBuilder::new(file, id, diagnostics).document(),
    }
}

// ---------------------------------------------------------------------------
// TOML

fn parse_toml(text: &str, id: SourceId, diagnostics: &mut Vec<Diagnostic>) -> Option<Node> {
    match DeTable::parse(text) {
        Ok(table) => {
            let span = Span::new(id, table.span());
            Some(toml_table(table.get_ref(), span, id, diagnostics))
        }
        Err(error) => {
            let range = error.span().unwrap_or(0..0);
            diagnostics.push(
                Diagnostic::error("syntax-error", toml_message(error.message()))
                    .with_span(Span::new(id, range))
                    .with_label("invalid TOML"),
            );
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

// ---------------------------------------------------------------------------
// YAML

/// Builds a [`Node`] from `saphyr-parser` events.
///
/// saphyr reports positions in characters; `byte_of` maps them to byte
/// offsets. Anchors, aliases and tags other than `!!str` are refused:
/// planrun files are plain data.
struct YamlBuilder<'a, 'd> {
    parser: Parser<'a, StrInput<'a>>,
    id: SourceId,
    file: &'a SourceFile,
    byte_of: Vec<usize>,
    diagnostics: &'d mut Vec<Diagnostic>,
}

type YamlEvent<'a> = (Event<'a>, saphyr_parser::Span);

/// A finding that stops the tree from being built.
struct Fatal;

impl<'a, 'd> YamlBuilder<'a, 'd> {
    fn new(file: &'a SourceFile, id: SourceId, diagnostics: &'d mut Vec<Diagnostic>) -> Self {
        let mut byte_of: Vec<usize> = file.text.char_indices().map(|(index, _)| index).collect();
        byte_of.push(file.text.len());
        YamlBuilder { parser: Parser::new_from_str(&file.text), id, file, byte_of, diagnostics }
    }

    fn byte(&self, marker: saphyr_parser::Marker) -> usize {
        self.byte_of.get(marker.index()).copied().unwrap_or(self.file.text.len())
    }

    fn span(&self, span: saphyr_parser::Span) -> Span {
        Span::new(self.id, self.byte(span.start)..self.byte(span.end))
    }

    fn next(&mut self) -> Result<YamlEvent<'a>, Fatal> {
        match self.parser.next_event() {
            Some(Ok(event)) => Ok(event),
            Some(Err(error)) => Err(self.scan_error(&error)),
            None => Err(self.fatal(
                Diagnostic::error("syntax-error", "unexpected end of YAML stream")
                    .with_span(Span::new(self.id, self.file.text.len()..self.file.text.len())),
            )),
        }
    }

    fn scan_error(&mut self, error: &ScanError) -> Fatal {
        let offset = self.byte(*error.marker());
        let end = self.file.text[offset..].chars().next().map_or(offset, |character| offset + character.len_utf8());
        let message = error.info().trim_end_matches('.').to_string();
        self.fatal(
            Diagnostic::error("syntax-error", message)
                .with_span(Span::new(self.id, offset..end))
                .with_label("invalid YAML"),
        )
    }

    fn fatal(&mut self, diagnostic: Diagnostic) -> Fatal {
        self.diagnostics.push(diagnostic);
        Fatal
    }

    fn document(mut self) -> Option<Node> {
        self.try_document().ok()
    }

    fn try_document(&mut self) -> Result<Node, Fatal> {
        let mut root = None;
        loop {
            let (event, span) = self.next()?;
            match event {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::StreamEnd => break,
                Event::DocumentStart(_) => {
                    if root.is_some() {
                        return Err(self.fatal(
                            Diagnostic::error("yaml-multiple-documents", "more than one YAML document in one file")
                                .with_span(self.span(span))
                                .with_label("a second document starts here")
                                .with_help("put each plan or policy in its own file"),
                        ));
                    }
                    let (event, span) = self.next()?;
                    let node = match event {
                        Event::DocumentEnd => {
                            let at = self.span(span);
                            Node::new(Span::new(self.id, at.start..at.start), NodeValue::Null)
                        }
                        event => {
                            let node = self.node(event, span)?;
                            let (end, _) = self.next()?;
                            if !matches!(end, Event::DocumentEnd) {
                                return Err(self.fatal(
                                    Diagnostic::error("syntax-error", "expected end of document").with_span(node.span),
                                ));
                            }
                            node
                        }
                    };
                    root = Some(node);
                }
                _ => {
                    return Err(self
                        .fatal(Diagnostic::error("syntax-error", "unexpected YAML event").with_span(self.span(span))));
                }
            }
        }
        Ok(root.unwrap_or_else(|| Node::new(Span::new(self.id, 0..0), NodeValue::Null)))
    }

    fn refuse_anchor(&mut self, anchor: usize, span: Span) {
        if anchor != 0 {
            self.diagnostics.push(
                Diagnostic::error("yaml-alias-unsupported", "YAML anchors are not supported")
                    .with_span(span)
                    .with_label("anchor defined here")
                    .with_help("write the value out in full; planrun files are plain data"),
            );
        }
    }

    fn refuse_tag(&mut self, tag: Option<&saphyr_parser::Tag>, span: Span, allow_str: bool) -> bool {
        let Some(tag) = tag else {
            return false;
        };
        if allow_str && tag.is_yaml_core_schema() && tag.suffix == "str" {
            return true;
        }
        self.diagnostics.push(
            Diagnostic::error(
                "yaml-tag-unsupported",
                format!("YAML tag `{}{}` is not supported", tag.handle, tag.suffix),
            )
            .with_span(span)
            .with_help("remove the tag; quote a value to make it a string"),
        );
        false
    }

    fn node(&mut self, event: Event<'a>, span: saphyr_parser::Span) -> Result<Node, Fatal> {
        let at = self.span(span);
        match event {
            Event::Alias(_) => {
                self.diagnostics.push(
                    Diagnostic::error("yaml-alias-unsupported", "YAML aliases are not supported")
                        .with_span(at)
                        .with_label("alias used here")
                        .with_help("write the value out in full; planrun files are plain data"),
                );
                Ok(Node::new(at, NodeValue::Null))
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value = self.scalar(&text, style, anchor, tag.as_deref(), at);
                Ok(Node::new(at, value))
            }
            Event::SequenceStart(anchor, tag) => {
                self.refuse_anchor(anchor, at);
                self.refuse_tag(tag.as_deref(), at, false);
                let mut items = Vec::new();
                loop {
                    let (event, span) = self.next()?;
                    if let Event::SequenceEnd = event {
                        let end = self.span(span);
                        let last = items.last().map_or(end.end, |item: &Node| item.span.end);
                        let span = Span::new(self.id, at.start..last.max(at.end));
                        return Ok(Node::new(span, NodeValue::Array(items)));
                    }
                    items.push(self.node(event, span)?);
                }
            }
            Event::MappingStart(anchor, tag) => {
                self.refuse_anchor(anchor, at);
                self.refuse_tag(tag.as_deref(), at, false);
                self.mapping(at)
            }
            _ => Err(self.fatal(Diagnostic::error("syntax-error", "unexpected YAML event").with_span(at))),
        }
    }

    /// A scalar's value (a key's or a value's): anchors and tags refused,
    /// a plain scalar resolved by the core schema, a quoted one a string.
    fn scalar(
        &mut self,
        text: &str,
        style: ScalarStyle,
        anchor: usize,
        tag: Option<&saphyr_parser::Tag>,
        at: Span,
    ) -> NodeValue {
        self.refuse_anchor(anchor, at);
        let forced_string = self.refuse_tag(tag, at, true);
        if style == ScalarStyle::Plain && !forced_string {
            self.resolve_plain(text, at)
        } else {
            NodeValue::String(text.to_string())
        }
    }

    fn mapping(&mut self, at: Span) -> Result<Node, Fatal> {
        let mut entries: Vec<(Key, Node)> = Vec::new();
        loop {
            let (event, span) = self.next()?;
            let key_span = self.span(span);
            let key = match event {
                Event::MappingEnd => {
                    let last = entries.last().map_or(key_span.end, |(_, value)| value.span.end);
                    let span = Span::new(self.id, at.start..last.max(at.end));
                    return Ok(Node::new(span, NodeValue::Table(entries)));
                }
                Event::Scalar(text, style, anchor, tag) => {
                    let resolved = self.scalar(&text, style, anchor, tag.as_deref(), key_span);
                    if !matches!(resolved, NodeValue::String(_)) {
                        self.diagnostics.push(
                            Diagnostic::error(
                                "non-string-key",
                                format!("key `{text}` is {}, not a string", resolved.type_name()),
                            )
                            .with_span(key_span)
                            .with_help(format!("quote the key: `\"{text}\"`")),
                        );
                    }
                    text.into_owned()
                }
                other => {
                    let node = self.node(other, span)?;
                    self.diagnostics.push(
                        Diagnostic::error(
                            "non-string-key",
                            format!("a key must be a string, found {}", node.type_name()),
                        )
                        .with_span(node.span),
                    );
                    String::new()
                }
            };
            let (event, span) = self.next()?;
            let value = self.node(event, span)?;
            if let Some((first, _)) = entries.iter().find(|(existing, _)| existing.name == key) {
                let (line, _) = self.file.line_col(first.span.start);
                self.diagnostics.push(
                    Diagnostic::error("duplicate-key", format!("duplicate key `{key}`, first defined on line {line}"))
                        .with_span(key_span)
                        .with_label("defined again here")
                        .with_help("remove one of the two definitions"),
                );
                continue;
            }
            entries.push((Key { name: key, span: key_span }, value));
        }
    }

    /// Resolves a plain scalar by the YAML 1.2 core schema.
    fn resolve_plain(&mut self, text: &str, span: Span) -> NodeValue {
        match text {
            "" | "~" | "null" | "Null" | "NULL" => return NodeValue::Null,
            "true" | "True" | "TRUE" => return NodeValue::Bool(true),
            "false" | "False" | "FALSE" => return NodeValue::Bool(false),
            ".nan" | ".NaN" | ".NAN" => return NodeValue::Float(f64::NAN),
            _ => {}
        }
        let (sign, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (-1.0, &text[1..]),
            Some(b'+') => (1.0, &text[1..]),
            _ => (1.0, text),
        };
        if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
            return NodeValue::Float(sign * f64::INFINITY);
        }
        let integer = if let Some(hex) = text.strip_prefix("0x") {
            is_digits(hex, 16).then(|| i64::from_str_radix(hex, 16))
        } else if let Some(octal) = text.strip_prefix("0o") {
            is_digits(octal, 8).then(|| i64::from_str_radix(octal, 8))
        } else {
            is_digits(unsigned, 10).then(|| text.parse::<i64>())
        };
        match integer {
            Some(Ok(number)) => return NodeValue::Integer(number),
            Some(Err(_)) => {
                self.diagnostics.push(
                    Diagnostic::error("invalid-value", "integer out of range")
                        .with_span(span)
                        .with_label("does not fit in 64 bits"),
                );
                return NodeValue::Integer(i64::MAX);
            }
            None => {}
        }
        if is_core_float(unsigned)
            && let Ok(number) = text.parse::<f64>()
        {
            return NodeValue::Float(number);
        }
        NodeValue::String(text.to_string())
    }
}

fn is_digits(text: &str, radix: u32) -> bool {
    !text.is_empty() && text.chars().all(|character| character.is_digit(radix))
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (the sign already removed).
fn is_core_float(text: &str) -> bool {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((whole, fraction)) => {
            (whole.is_empty() && is_digits(fraction, 10))
                || (is_digits(whole, 10) && fraction.chars().all(|character| character.is_ascii_digit()))
        }
        None => is_digits(mantissa, 10),
    };
    let exponent_ok = exponent.is_none_or(|exponent| {
        let digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
        is_digits(digits, 10)
    });
    mantissa_ok && exponent_ok
}
