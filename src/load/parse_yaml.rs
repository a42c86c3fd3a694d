//! YAML text → [`Node`] tree, built here from `saphyr-parser` events so
//! that spans, duplicate keys and the YAML 1.2 core schema stay under our
//! control. The only file that knows that crate.

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, StrInput};

use crate::diag::{Diagnostic, SourceFile, SourceId, Span};
use crate::load::nesting::{MAX_NESTING, too_deep};
use crate::load::node::{Key, Node, NodeValue};

/// Builds a [`Node`] from `saphyr-parser` events.
///
/// saphyr reports positions in characters; `byte_of` maps them to byte
/// offsets. Anchors, aliases and tags other than `!!str` are refused:
/// planrun files are plain data.
pub(crate) struct YamlBuilder<'a, 'd> {
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
    pub(crate) fn new(file: &'a SourceFile, id: SourceId, diagnostics: &'d mut Vec<Diagnostic>) -> Self {
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

    pub(crate) fn document(mut self) -> Option<Node> {
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
