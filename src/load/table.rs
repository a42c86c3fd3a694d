//! Typed reading of tables with findings: the helper every validator uses.
//!
//! A [`TableReader`] wraps one table node and the keys it may hold. Each
//! getter marks its key as read and reports `wrong-type` (or `missing-key`
//! for the `required_*` forms) instead of stopping; [`TableReader::finish`]
//! then reports every key nobody asked for as `unknown-key`, with the allowed
//! keys and a did-you-mean. The allowed keys come from the declarative lists
//! in `keys.rs` (which also generate the JSON Schema); reading a key that is
//! not listed is a bug, caught by a debug assertion. Adding a key to a
//! section is one entry in its list plus one getter call.

use std::collections::BTreeMap;

use crate::diag::{Diagnostic, Span};
use crate::load::did_you_mean::did_you_mean;
use crate::load::keys::{KeySpec, Type};
use crate::load::node::{Key, Node, NodeValue};

/// Reads one table, collecting findings in the caller's list.
pub(crate) struct TableReader<'n> {
    span: Span,
    entries: &'n [(Key, Node)],
    used: Vec<bool>,
    allowed: Vec<&'static KeySpec>,
    /// Where the table is, for messages: `` in step `step-1` `` or empty.
    context: String,
}

impl<'n> TableReader<'n> {
    /// Wraps `node`, or reports `wrong-type` (naming `what`) when it is not
    /// a table.
    pub(crate) fn new(
        node: &'n Node,
        what: &str,
        context: impl Into<String>,
        allowed: &'static [KeySpec],
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<Self> {
        let Some(entries) = node.as_table() else {
            diagnostics.push(wrong_type(node, what, "a table"));
            return None;
        };
        Some(TableReader {
            span: node.span,
            entries,
            used: vec![false; entries.len()],
            allowed: allowed.iter().collect(),
            context: context.into(),
        })
    }

    /// Replaces the context used in messages (once a step's id is known).
    pub(crate) fn set_context(&mut self, context: impl Into<String>) {
        self.context = context.into();
    }

    /// Adds keys to the allowed list (used once a step's kind is known),
    /// listed right after the `kind` key that chose them.
    pub(crate) fn allow(&mut self, keys: &'static [KeySpec]) {
        let at =
            self.allowed.iter().position(|key| matches!(key.ty, Type::Kind)).map_or(self.allowed.len(), |at| at + 1);
        self.allowed.splice(at..at, keys);
    }

    /// Whether the table has `key` (without marking it read).
    pub(crate) fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(name, _)| name.name == key)
    }

    /// The span of `key` itself.
    pub(crate) fn key_span(&self, key: &str) -> Option<Span> {
        self.entries.iter().find(|(name, _)| name.name == key).map(|(name, _)| name.span)
    }

    /// Checks, in debug builds, that `key` is declared in `keys.rs` with a
    /// type this getter reads: the schema generated from the declarations
    /// then cannot drift from what the validator accepts.
    fn declared_as(&self, key: &str, fits: impl Fn(Type) -> bool) {
        let declared = self.allowed.iter().find(|allowed| allowed.name == key);
        debug_assert!(
            declared.is_some_and(|spec| fits(spec.ty)),
            "key `{key}` is read with a type that `load/keys.rs` does not declare: {declared:?}"
        );
    }

    /// The value of `key`, marking it read.
    pub(crate) fn get(&mut self, key: &str) -> Option<&'n Node> {
        debug_assert!(
            self.allowed.iter().any(|allowed| allowed.name == key),
            "key `{key}` is read but not declared in `load/keys.rs`"
        );
        let index = self.entries.iter().position(|(name, _)| name.name == key)?;
        self.used[index] = true;
        Some(&self.entries[index].1)
    }

    /// The value of `key`, or `missing-key` on the table.
    pub(crate) fn required(&mut self, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<&'n Node> {
        let found = self.get(key);
        if found.is_none() {
            diagnostics.push(
                Diagnostic::error("missing-key", format!("missing key `{key}`{}", self.context))
                    .with_span(self.span)
                    .with_label(format!("`{key}` is required here")),
            );
        }
        found
    }

    /// What a key is called in messages: `` `retry` in step `a` ``.
    pub(crate) fn describe(&self, key: &str) -> String {
        format!("`{key}`{}", self.context)
    }

    pub(crate) fn string(&mut self, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<(&'n str, &'n Node)> {
        let node = self.get(key)?;
        self.typed_string(key, node, diagnostics)
    }

    pub(crate) fn required_string(
        &mut self,
        key: &str,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<(&'n str, &'n Node)> {
        let node = self.required(key, diagnostics)?;
        self.typed_string(key, node, diagnostics)
    }

    fn typed_string(
        &self,
        key: &str,
        node: &'n Node,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<(&'n str, &'n Node)> {
        self.declared_as(key, |ty| matches!(ty, Type::String | Type::Name { .. } | Type::Enum(_) | Type::Kind));
        match node.as_str() {
            Some(text) => Some((text, node)),
            None => {
                diagnostics.push(wrong_type(node, &self.describe(key), "a string"));
                None
            }
        }
    }

    /// One of the strings `choices` names (the values `keys.rs` declares
    /// for `key`), as its value: `Some(None)` when the key is absent, `None`
    /// after a reported `wrong-type` or `invalid-value` (`unknown <what>`,
    /// listing the choices).
    pub(crate) fn choice<T: Copy>(
        &mut self,
        key: &str,
        what: &str,
        choices: &[(&str, T)],
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<Option<T>> {
        self.declared_as(
            key,
            |ty| matches!(ty, Type::Enum(values) if values.iter().eq(choices.iter().map(|(name, _)| name))),
        );
        let Some(node) = self.get(key) else {
            return Some(None);
        };
        let (text, node) = self.typed_string(key, node, diagnostics)?;
        if let Some((_, value)) = choices.iter().find(|(name, _)| *name == text) {
            return Some(Some(*value));
        }
        let names: Vec<String> = choices.iter().map(|(name, _)| format!("`{name}`")).collect();
        let expected = match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("unknown {what} `{text}`"))
                .with_span(node.span)
                .with_label(format!("expected {expected}")),
        );
        None
    }

    /// An integer of at least `min`, or `wrong-type` / `invalid-value`.
    pub(crate) fn integer(
        &mut self,
        key: &str,
        min: i64,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<(i64, &'n Node)> {
        let node = self.get(key)?;
        self.typed_integer(key, node, min, diagnostics)
    }

    pub(crate) fn required_integer(
        &mut self,
        key: &str,
        min: i64,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<(i64, &'n Node)> {
        let node = self.required(key, diagnostics)?;
        self.typed_integer(key, node, min, diagnostics)
    }

    fn typed_integer(
        &self,
        key: &str,
        node: &'n Node,
        min: i64,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<(i64, &'n Node)> {
        self.declared_as(key, |ty| {
            matches!(ty, Type::Integer { min: declared } if declared == min) || matches!(ty, Type::Version)
        });
        self.bounded(key, node, min, None, diagnostics)
    }

    /// The integer in `node` when it is at least `min` (and at most `max`),
    /// else `wrong-type` or `invalid-value`.
    fn bounded(
        &self,
        key: &str,
        node: &'n Node,
        min: i64,
        max: Option<i64>,
        diagnostics: &mut Vec<Diagnostic>,
    ) -> Option<(i64, &'n Node)> {
        let NodeValue::Integer(number) = node.value else {
            diagnostics.push(wrong_type(node, &self.describe(key), "an integer"));
            return None;
        };
        if number >= min && max.is_none_or(|max| number <= max) {
            return Some((number, node));
        }
        let (bound, label) = match max {
            None => (format!("at least {min}"), format!("expected {min} or more")),
            Some(max) => (format!("between {min} and {max}"), format!("expected {min} to {max}")),
        };
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("{} must be {bound}, found {number}", self.describe(key)))
                .with_span(node.span)
                .with_label(label),
        );
        None
    }

    /// What `keys.rs` declares for `key`, as `pick` takes it from its type.
    fn declared<T>(&self, key: &str, pick: impl Fn(Type) -> Option<T>) -> Option<T> {
        self.allowed.iter().find(|allowed| allowed.name == key).and_then(|spec| pick(spec.ty))
    }

    /// An integer within the range that `keys.rs` declares for `key`
    /// ([`Type::Range`]), or `wrong-type` / `invalid-value`.
    pub(crate) fn ranged(&mut self, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<(i64, &'n Node)> {
        let declared = self.declared(key, |ty| match ty {
            Type::Range { min, max } => Some((min, max)),
            _ => None,
        });
        debug_assert!(declared.is_some(), "key `{key}` is read as a range but `load/keys.rs` declares no range");
        let (min, max) = declared?;
        let node = self.get(key)?;
        self.bounded(key, node, min, Some(max), diagnostics)
    }

    /// A number (integer or float) within the range that `keys.rs`
    /// declares for `key` ([`Type::Number`]), or `wrong-type` /
    /// `invalid-value`.
    pub(crate) fn number(&mut self, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<(f64, &'n Node)> {
        let number_range = |ty: Type| match ty {
            Type::Number { min, max } => Some((min, max)),
            _ => None,
        };
        // A number, or a number among the types a key may have (a `when`
        // bound is a number or a template).
        let declared = self.declared(key, |ty| match ty {
            Type::AnyOf(types) => types.iter().find_map(|ty| number_range(*ty)),
            ty => number_range(ty),
        });
        debug_assert!(declared.is_some(), "key `{key}` is read as a number but `load/keys.rs` declares none");
        let (min, max) = declared?;
        let node = self.get(key)?;
        let number = match node.value {
            NodeValue::Float(number) => number,
            NodeValue::Integer(number) => number as f64,
            _ => {
                diagnostics.push(wrong_type(node, &self.describe(key), "a number"));
                return None;
            }
        };
        if (min..=max).contains(&number) {
            return Some((number, node));
        }
        diagnostics.push(
            Diagnostic::error(
                "invalid-value",
                format!("{} must be between {min:?} and {max:?}, found {number}", self.describe(key)),
            )
            .with_span(node.span)
            .with_label(format!("expected {min:?} to {max:?}")),
        );
        None
    }

    pub(crate) fn bool(&mut self, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<bool> {
        self.declared_as(key, |ty| matches!(ty, Type::Boolean));
        let node = self.get(key)?;
        match node.value {
            NodeValue::Bool(flag) => Some(flag),
            _ => {
                diagnostics.push(wrong_type(node, &self.describe(key), "a boolean"));
                None
            }
        }
    }

    pub(crate) fn array(&mut self, key: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<&'n [Node]> {
        self.declared_as(key, |ty| matches!(ty, Type::Array(_) | Type::NonEmptyArray(_)));
        let node = self.get(key)?;
        match node.as_array() {
            Some(items) => Some(items),
            None => {
                diagnostics.push(wrong_type(node, &self.describe(key), "an array"));
                None
            }
        }
    }

    /// Reports every key that no getter read and that is not allowed.
    pub(crate) fn finish(self, diagnostics: &mut Vec<Diagnostic>) {
        let allowed_list = self.allowed.iter().map(|key| format!("`{}`", key.name)).collect::<Vec<_>>().join(", ");
        for ((key, _), used) in self.entries.iter().zip(&self.used) {
            if *used || self.allowed.iter().any(|allowed| allowed.name == key.name) {
                continue;
            }
            let mut diagnostic =
                Diagnostic::error("unknown-key", format!("unknown key `{}`{}", key.name, self.context))
                    .with_span(key.span)
                    .with_help(format!("allowed keys: {allowed_list}"));
            if let Some(suggestion) = did_you_mean(&key.name, self.allowed.iter().map(|allowed| allowed.name)) {
                diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
            }
            diagnostics.push(diagnostic);
        }
    }
}

/// `wrong-type` on `node`: `what` must be `expected`.
pub(crate) fn wrong_type(node: &Node, what: &str, expected: &str) -> Diagnostic {
    Diagnostic::error("wrong-type", format!("{what} must be {expected}, found {}", node.type_name()))
        .with_span(node.span)
        .with_label(format!("expected {expected}"))
}

/// The string in `node`, or `wrong-type`.
pub(crate) fn expect_string<'n>(node: &'n Node, what: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<&'n str> {
    let text = node.as_str();
    if text.is_none() {
        diagnostics.push(wrong_type(node, what, "a string"));
    }
    text
}

/// The items of `node`, or `wrong-type`.
pub(crate) fn expect_array<'n>(node: &'n Node, what: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<&'n [Node]> {
    let items = node.as_array();
    if items.is_none() {
        diagnostics.push(wrong_type(node, what, "an array"));
    }
    items
}

/// Reads the required `version` key and checks that it is 1.
pub(crate) fn check_version(reader: &mut TableReader<'_>, diagnostics: &mut Vec<Diagnostic>) {
    if let Some((version, node)) = reader.required_integer("version", i64::MIN, diagnostics)
        && version != 1
    {
        diagnostics.push(
            Diagnostic::error("unsupported-version", format!("unsupported version {version}"))
                .with_span(node.span)
                .with_label("expected 1")
                .with_help("this planrun reads `version = 1`"),
        );
    }
}

/// Whether `text` is a name: 1 to `max` ASCII letters, digits, `_` or `-`.
pub(crate) fn is_name(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.len() <= max
        && text.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// The byte offset in the file where the text of string `node` starts, when
/// the source holds the value verbatim (no escapes, no folded lines), so
/// that a byte range of the value maps to a range of the file.
pub(crate) fn verbatim_start(text: &str, node: &Node) -> Option<usize> {
    let value = node.as_str()?;
    let raw = text.get(node.span.start..node.span.end)?;
    [0, 1, 3].into_iter().find_map(|quote| {
        (raw.len() == value.len() + 2 * quote && raw.get(quote..quote + value.len()) == Some(value))
            .then_some(node.span.start + quote)
    })
}

/// The span of bytes `start..end` of string `node`'s value, or the whole
/// node when the value is not verbatim in the source.
pub(crate) fn value_span(text: &str, node: &Node, start: usize, end: usize) -> Span {
    match verbatim_start(text, node) {
        Some(base) => Span { source: node.span.source, start: base + start, end: base + end },
        None => node.span,
    }
}

/// How many of `diagnostics` are errors: a validator compares the count
/// before and after a table to know whether the table itself had errors.
pub(crate) fn error_count(diagnostics: &[Diagnostic]) -> usize {
    diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count()
}

/// `name` when it is a valid name of at most `max` bytes, else
/// `invalid-value` on `node` (naming `what`).
pub(crate) fn name_or_error(
    name: &str,
    node: &Node,
    what: &str,
    max: usize,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<String> {
    if is_name(name, max) {
        return Some(name.to_string());
    }
    let limit = if max == usize::MAX { String::new() } else { format!(" (at most {max})") };
    diagnostics.push(
        Diagnostic::error("invalid-value", format!("invalid {what} `{name}`"))
            .with_span(node.span)
            .with_label("not a valid name")
            .with_help(format!("use ASCII letters, digits, `_` and `-`{limit}")),
    );
    None
}

/// The regex in string `node` (`pattern`, anchored at both ends when
/// `anchored`), or `invalid-regex` on the node with the parser's reason.
pub(crate) fn compile_regex(
    pattern: &str,
    anchored: bool,
    node: &Node,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<regex::Regex> {
    let compiled = if anchored { regex::Regex::new(&format!("^(?:{pattern})$")) } else { regex::Regex::new(pattern) };
    compiled
        .map_err(|error| {
            // The last line of the error is the reason (after the pattern and
            // its caret line).
            let detail = error.to_string();
            let reason = detail.lines().last().unwrap_or("invalid regex").trim().trim_start_matches("error: ");
            diagnostics.push(
                Diagnostic::error("invalid-regex", format!("invalid regex `{pattern}`"))
                    .with_span(node.span)
                    .with_label(reason.to_string()),
            );
        })
        .ok()
}

/// A section's reader; an absent section reads as an empty table.
pub(crate) fn section<'n>(
    node: Option<&'n Node>,
    name: &str,
    keys: &'static [KeySpec],
    empty: &'n Node,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<TableReader<'n>> {
    TableReader::new(node.unwrap_or(empty), &format!("`[{name}]`"), format!(" in `[{name}]`"), keys, diagnostics)
}

pub(crate) fn empty_table() -> Node {
    Node::new(Span::default(), NodeValue::Table(Vec::new()))
}

/// An array of strings, each checked by `check`.
pub(crate) fn strings(
    items: &[Node],
    key: &str,
    diagnostics: &mut Vec<Diagnostic>,
    mut check: impl FnMut(&str, &Node, &mut Vec<Diagnostic>) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (index, item) in items.iter().enumerate() {
        if let Some(text) = expect_string(item, &format!("`{key}[{index}]`"), diagnostics)
            && check(text, item, diagnostics)
        {
            out.push(text.to_string());
        }
    }
    out
}

/// A table of strings (`shell.env`, a scenario's `env`), or `wrong-type`
/// on the table or on each value that is not a string; `name` is the key's
/// dotted path, for messages.
pub(crate) fn string_map(node: &Node, name: &str, diagnostics: &mut Vec<Diagnostic>) -> BTreeMap<String, String> {
    let Some(entries) = node.as_table() else {
        diagnostics.push(wrong_type(node, &format!("`{name}`"), "a table of strings"));
        return BTreeMap::new();
    };
    let mut map = BTreeMap::new();
    for (key, value) in entries {
        if let Some(text) = expect_string(value, &format!("`{name}.{}`", key.name), diagnostics) {
            map.insert(key.name.clone(), text.to_string());
        }
    }
    map
}

/// Whether `text` is a bare program name, or `invalid-program` on `node`.
pub(crate) fn bare_name(text: &str, node: &Node, diagnostics: &mut Vec<Diagnostic>) -> bool {
    let bare = !text.is_empty()
        && text.is_ascii()
        && text != "."
        && text != ".."
        && !text.contains('/')
        && !text.chars().any(|character| character.is_whitespace() || character.is_control());
    if !bare {
        diagnostics.push(
            Diagnostic::error("invalid-program", format!("`{text}` is not a bare program name"))
                .with_span(node.span)
                .with_label("expected a name such as `git`")
                .with_help("policies name programs without a path; `search_path` finds them"),
        );
    }
    bare
}
