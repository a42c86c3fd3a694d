//! Reading plan and policy files into [`Node`] trees.
//!
//! The format follows the extension: `.toml` is read with the `toml` crate's
//! spanned parser ([`toml::de::DeTable`]), `.yaml`/`.yml` with
//! `saphyr-parser` events, from which the tree is built here so that spans,
//! duplicate keys and the YAML 1.2 core schema stay under our control. This
//! is the only file that knows about either parser: swapping one changes
//! nothing else.
//!
//! Both front ends refuse a file whose tables and arrays nest deeper than
//! [`MAX_NESTING`] levels with `nesting-too-deep` (exit 2), before anything
//! recursive walks the tree: a 20 KB file of nested block sequences would
//! otherwise overflow the stack of every walk after it (tree building,
//! validation, dropping the tree). No real plan comes near the limit.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::digest::sha256_hex;
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, StrInput};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diagnostic, SourceFile, SourceId, SourceMap, Span, display_path};
use crate::load::node::{Key, Node, NodeValue};
use crate::model::SourceRef;

/// How many levels tables and arrays may nest in a plan or policy file (the
/// document itself is level 0). Deeper files get `nesting-too-deep`. The
/// `toml` crate's own guard (80 levels of inline arrays and tables) sits
/// above this, and its refusal is reported under the same code.
pub const MAX_NESTING: usize = 64;

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

/// Files given as text instead of read from disk, by the path they were
/// read from (a queued run's copies: see [`crate::load::Loader::from_copies`]).
pub type Copies = BTreeMap<PathBuf, String>;

/// Reads `path` into `sources` (from `copies` when given: then only from
/// them, named exactly as given). Reports `unsupported-extension` and
/// `io-error` (both without a span) and returns `None` on either.
pub(crate) fn read(
    sources: &mut SourceMap,
    diagnostics: &mut Vec<Diagnostic>,
    path: &Path,
    copies: Option<&Copies>,
) -> Option<ReadFile> {
    let name = if copies.is_some() { path.display().to_string() } else { display_path(path) };
    let Some(format) = Format::of(path) else {
        // A missing file is named missing, whatever its name ends in (a
        // readable file's open says so below: no second look on that path).
        if let (None, Err(error)) = (copies, std::fs::metadata(path)) {
            diagnostics.push(Diagnostic::error("io-error", format!("cannot read `{name}`: {error}")));
            return None;
        }
        diagnostics.push(
            Diagnostic::error("unsupported-extension", format!("cannot read `{name}`: unsupported file extension"))
                .with_help("plan and policy files end in `.toml`, `.yaml` or `.yml`"),
        );
        return None;
    };
    let bytes = match copies {
        Some(copies) => match copies.get(path) {
            Some(text) => text.clone().into_bytes(),
            None => {
                diagnostics.push(Diagnostic::error(
                    "io-error",
                    format!("cannot read `{name}`: it is not among the files the run was submitted with"),
                ));
                return None;
            }
        },
        None => match read_limited(path) {
            Ok(bytes) => bytes,
            Err(reason) => {
                diagnostics.push(Diagnostic::error("io-error", format!("cannot read `{name}`: {reason}")));
                return None;
            }
        },
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

/// The largest plan, policy or scenario file read (4 MiB): a file is read
/// whole into memory, so a bigger one (or an endless one behind a link) is
/// refused before it is.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The bytes of regular file `path`, at most [`MAX_FILE_BYTES`]. Opened
/// without blocking and checked on the open file, so a FIFO or a device
/// (`/dev/zero` behind a link) is refused at once instead of hanging or
/// filling memory.
fn read_limited(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let nonblocking = rustix::fs::OFlags::NONBLOCK.bits() as i32;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open(path)
        .map_err(|error| error.to_string())?;
    let metadata = file.metadata().map_err(|error| error.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".to_string());
    }
    let too_big = || format!("larger than {} MiB, the most a plan or policy file may be", MAX_FILE_BYTES >> 20);
    if metadata.len() > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    // Bounded again while reading: the file may grow after the check.
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|error| error.to_string())?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
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

/// The `nesting-too-deep` finding, at the value that opens one level too many.
fn too_deep(span: Span) -> Diagnostic {
    Diagnostic::error("nesting-too-deep", format!("tables and arrays nest deeper than {MAX_NESTING} levels"))
        .with_span(span)
        .with_label("one level too many")
        .with_help("planrun files are shallow data; flatten the structure")
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
    /// How many sequences and mappings enclose the current event.
    depth: usize,
}

type YamlEvent<'a> = (Event<'a>, saphyr_parser::Span);

/// A finding that stops the tree from being built.
struct Fatal;

impl<'a, 'd> YamlBuilder<'a, 'd> {
    fn new(file: &'a SourceFile, id: SourceId, diagnostics: &'d mut Vec<Diagnostic>) -> Self {
        let mut byte_of: Vec<usize> = file.text.char_indices().map(|(index, _)| index).collect();
        byte_of.push(file.text.len());
        YamlBuilder { parser: Parser::new_from_str(&file.text), id, file, byte_of, diagnostics, depth: 0 }
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
        let span = Span::new(self.id, offset..end);
        // The scanner reads flow collections (`[[[…`) ahead of the events and
        // has its own guard (255 levels); that refusal is our limit too.
        if message.contains("recursion limit") {
            return self.fatal(too_deep(span));
        }
        self.fatal(Diagnostic::error("syntax-error", message).with_span(span).with_label("invalid YAML"))
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
                self.nested(at, Self::sequence)
            }
            Event::MappingStart(anchor, tag) => {
                self.refuse_anchor(anchor, at);
                self.refuse_tag(tag.as_deref(), at, false);
                self.nested(at, Self::mapping)
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

    /// Reads one sequence or mapping one level deeper, refusing it past
    /// [`MAX_NESTING`]: the recursion stops here, before the stack is at risk.
    fn nested(&mut self, at: Span, read: fn(&mut Self, Span) -> Result<Node, Fatal>) -> Result<Node, Fatal> {
        if self.depth > MAX_NESTING {
            return Err(self.fatal(too_deep(at)));
        }
        self.depth += 1;
        let node = read(self, at);
        self.depth -= 1;
        node
    }

    fn sequence(&mut self, at: Span) -> Result<Node, Fatal> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `code@line:col` of each finding of parsing `text` as `format`, and
    /// whether a tree came out.
    fn parsed(format: Format, text: &str) -> (bool, Vec<String>) {
        let mut sources = SourceMap::new();
        let id = sources.add(SourceFile::new("nested", text));
        let file = sources.get(id).expect("source");
        let mut diagnostics = Vec::new();
        let tree = parse(file, id, format, &mut diagnostics);
        let found = diagnostics
            .iter()
            .map(|diagnostic| {
                let (line, column) = diagnostic.span.map_or((0, 0), |span| file.line_col(span.start));
                format!("{}@{line}:{column}", diagnostic.code)
            })
            .collect();
        (tree.is_some(), found)
    }

    fn toml_array(levels: usize) -> String {
        format!("a = {}{}\n", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn the_limit_itself_loads_and_one_level_more_is_refused_in_both_formats() {
        // YAML: the root sequence is level 0, so MAX_NESTING + 1 dashes.
        assert_eq!(parsed(Format::Yaml, &format!("{}x\n", "- ".repeat(MAX_NESTING + 1))), (true, vec![]));
        assert_eq!(
            parsed(Format::Yaml, &format!("{}x\n", "- ".repeat(MAX_NESTING + 2))),
            (false, vec![format!("nesting-too-deep@1:{}", 2 * (MAX_NESTING + 1) + 1)])
        );
        // TOML: the root table is level 0, `a` is level 1.
        assert_eq!(parsed(Format::Toml, &toml_array(MAX_NESTING)), (true, vec![]));
        assert_eq!(
            parsed(Format::Toml, &toml_array(MAX_NESTING + 1)),
            (false, vec![format!("nesting-too-deep@1:{}", 4 + MAX_NESTING + 1)])
        );
    }

    #[test]
    fn bombs_of_every_shape_end_in_one_finding_not_an_abort() {
        let levels = 10_000;
        let block_sequences = format!("{}x\n", "- ".repeat(levels));
        let block_mappings: String =
            (0..levels).map(|level| format!("{}k:\n", "  ".repeat(level))).collect::<String>() + "x\n";
        let flow_sequences = format!("a: {}{}\n", "[".repeat(levels), "]".repeat(levels));
        let flow_mappings = format!("a: {}1{}\n", "{b: ".repeat(levels), "}".repeat(levels));
        for (name, text) in [
            ("block sequences", &block_sequences),
            ("block mappings", &block_mappings),
            // saphyr's scanner refuses these first (its 255-level guard).
            ("flow sequences", &flow_sequences),
            ("flow mappings", &flow_mappings),
        ] {
            let (tree, found) = parsed(Format::Yaml, text);
            assert!(!tree, "{name}");
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            assert!(found[0].starts_with("nesting-too-deep@"), "{name}: {found:?}");
        }
        let inline_tables = format!("a = {}1{}\n", "{b = ".repeat(levels), "}".repeat(levels));
        let dotted_header = format!("[{}]\nx = 1\n", vec!["t"; levels].join("."));
        let dotted_then_inline = format!("[{}]\n{}", vec!["t"; 60].join("."), toml_array(10));
        for (name, text) in [
            // The toml crate's 80-level guard refuses these first.
            ("inline arrays", toml_array(levels)),
            ("inline tables", inline_tables),
            ("dotted header", dotted_header),
            // Each part is below both guards; together they are too deep.
            ("dotted header and inline arrays", dotted_then_inline),
        ] {
            let (tree, found) = parsed(Format::Toml, &text);
            assert!(!tree, "{name}");
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            assert!(found[0].starts_with("nesting-too-deep@"), "{name}: {found:?}");
        }
    }
}
