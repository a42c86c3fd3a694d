//! One `[[steps]]` table → [`Step`]: the common keys (`id`, `kind`,
//! `timeout_secs`, `retry`, `retry_backoff`, `on_failure`, `approval`, `risk`, `idempotency_key`, `when`,
//! `expect`) and each kind's payload, with every template parsed and
//! control fields (program, paths, targets, keys) kept literal.

use crate::diag::{Diagnostic, SourceFile, Span};
use crate::load::defaults::{DEFAULT_FLAKY_FAILURES, DEFAULT_FLAKY_OUTPUT};
use crate::load::did_you_mean::did_you_mean;
use crate::load::keys::{EXPECT, STEP};
use crate::load::loaded_plan::{PlanSpans, SiteKind, StepSpans, TemplateSite};
use std::collections::BTreeMap;

use crate::load::node::{Node, NodeValue};
use crate::load::table::{
    TableReader, compile_regex, error_count, expect_string, name_or_error, value_span, wrong_type,
};
use crate::load::validate_backoff::step_backoff;
use crate::load::validate_secrets::is_env_name;
use crate::model::{Action, Expect, OnFailure, Risk, Step};
use crate::template::{RefTarget, Template};

/// Characters the string form of `command` may not hold: a shell would give
/// them meaning, and planrun never runs a shell.
const SHELL_METACHARACTERS: &[char] =
    &[';', '|', '&', '$', '`', '(', ')', '<', '>', '*', '?', '[', ']', '{', '}', '#', '~', '!', '\n', '\r', '\\'];

const ARRAY_HELP: &str = "write `command` as an array, e.g. `command = [\"ls\", \"-la\"]`";

pub(super) fn step(
    node: &Node,
    index: usize,
    file: &SourceFile,
    plan_spans: &mut PlanSpans,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(Step, StepSpans)> {
    let errors_before = error_count(diagnostics);
    let mut reader =
        TableReader::new(node, &format!("`steps[{index}]`"), format!(" in `steps[{index}]`"), STEP.keys, diagnostics)?;
    let mut spans = StepSpans { id: node.span, ..StepSpans::default() };
    let id = reader.required_string("id", diagnostics).and_then(|(id, id_node)| {
        spans.id = id_node.span;
        let valid = name_or_error(id, id_node, "step id", 64, diagnostics);
        if let Some(id) = &valid {
            reader.set_context(format!(" in step `{id}`"));
        }
        valid
    });
    let kind = reader.required_string("kind", diagnostics).and_then(|(kind, kind_node)| {
        let found = STEP.variant(kind);
        if found.is_none() {
            let names = STEP.variants.iter().map(|variant| variant.name);
            let mut diagnostic = Diagnostic::error("unknown-step-kind", format!("unknown step kind `{kind}`"))
                .with_span(kind_node.span)
                .with_help(format!(
                    "allowed kinds: {}",
                    names.clone().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
                ));
            if let Some(suggestion) = did_you_mean(kind, names) {
                diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
            }
            diagnostics.push(diagnostic);
        }
        found
    });
    let timeout_secs = reader.integer("timeout_secs", 1, diagnostics).map(|(seconds, seconds_node)| {
        spans.timeout = Some(seconds_node.span);
        seconds.unsigned_abs()
    });
    let retry = reader.integer("retry", 1, diagnostics).and_then(|(attempts, attempts_node)| {
        spans.retry = Some(attempts_node.span);
        small(attempts, attempts_node, "`retry`", diagnostics)
    });
    let retry_backoff = reader.get("retry_backoff").and_then(|node| step_backoff(node, diagnostics));

    let approval = match reader.string("approval", diagnostics) {
        None | Some(("required", _)) => reader.has("approval"),
        Some((other, node)) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("unknown `approval` `{other}`"))
                    .with_span(node.span)
                    .with_label("expected `required`")
                    .with_help("write `approval = \"required\"` to pause before this step, or remove the key"),
            );
            false
        }
    };
    let on_failure = reader
        .choice(
            "on_failure",
            "`on_failure`",
            &[("fail", OnFailure::Fail), ("continue", OnFailure::Continue)],
            diagnostics,
        )
        .flatten()
        .unwrap_or_default();
    let declared_risk =
        reader.choice("risk", "`risk`", &[("read", Risk::Read), ("write", Risk::Write)], diagnostics).flatten();

    let step_index = plan_spans.steps.len();
    let mut builder = ActionBuilder {
        reader: &mut reader,
        file,
        step: step_index,
        sites: &mut plan_spans.templates,
        path_span: &mut spans.path,
        command_span: &mut spans.command,
        cwd_span: &mut spans.cwd,
        mcp_spans: &mut spans.mcp,
        diagnostics,
    };
    let idempotency_key = builder.idempotency_key();
    let when = builder.when();
    let expect = builder.expect();
    let action = kind.and_then(|variant| {
        builder.reader.allow(variant.keys);
        builder.action(variant.name)
    });
    let (env, env_spans) =
        if kind.is_some_and(|variant| variant.name == "shell") { builder.env() } else { Default::default() };
    spans.env = env_spans;
    if let (Some(variant), Some(expect)) = (kind, &expect)
        && expect.accepted_exit_codes().is_some()
        && variant.name != "shell"
    {
        let span = reader.key_span("expect").unwrap_or(node.span);
        diagnostics.push(
            Diagnostic::error(
                "invalid-value",
                format!(
                    "`expect.{}` on a `{}` step",
                    if expect.exit_codes.is_some() { "exit_codes" } else { "exit_code" },
                    variant.name
                ),
            )
            .with_span(span)
            .with_label("only `shell` steps have an exit code")
            .with_help("use `output_contains` or `output_matches`, or remove `exit_code`"),
        );
    }
    // With an unknown kind the payload keys cannot be judged; say nothing.
    if kind.is_some() {
        reader.finish(diagnostics);
    }
    if error_count(diagnostics) > errors_before {
        return None;
    }
    let step = Step {
        id: id?,
        action: action?,
        timeout_secs,
        retry,
        retry_backoff,
        on_failure,
        approval,
        declared_risk,
        idempotency_key,
        when,
        expect,
        env,
        span: node.span,
    };
    Some((step, spans))
}

/// A `u32` from a checked non-negative integer, or `invalid-value`.
fn small(value: i64, node: &Node, what: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<u32> {
    match u32::try_from(value) {
        Ok(value) => Some(value),
        Err(_) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("{what} is too large"))
                    .with_span(node.span)
                    .with_label(format!("at most {}", u32::MAX)),
            );
            None
        }
    }
}

pub(super) struct ActionBuilder<'r, 'n, 'd> {
    pub(super) reader: &'r mut TableReader<'n>,
    pub(super) file: &'r SourceFile,
    step: usize,
    sites: &'r mut Vec<TemplateSite>,
    path_span: &'r mut Option<Span>,
    pub(super) command_span: &'r mut Option<Span>,
    cwd_span: &'r mut Option<Span>,
    /// Where an `mcp` step's `server` and `tool` are.
    pub(super) mcp_spans: &'r mut [Option<Span>; 2],
    pub(super) diagnostics: &'d mut Vec<Diagnostic>,
}

impl ActionBuilder<'_, '_, '_> {
    fn action(&mut self, kind: &str) -> Option<Action> {
        match kind {
            "shell" => {
                let node = self.reader.required("command", self.diagnostics)?;
                *self.command_span = Some(node.span);
                let command = self.command(node);
                let cwd = match self.reader.string("cwd", self.diagnostics) {
                    Some((_, node)) => {
                        *self.cwd_span = Some(node.span);
                        Some(self.folder(node))
                    }
                    None => None,
                };
                let stdin =
                    self.reader.string("stdin", self.diagnostics).map(|(_, node)| self.template(node, "`stdin`"));
                // `Some(None)`: the key is there and was refused.
                let (cwd, stdin) = (cwd.map(|cwd| cwd.ok_or(())), stdin.map(|stdin| stdin.ok_or(())));
                Some(Action::Shell { command: command?, cwd: cwd.transpose().ok()?, stdin: stdin.transpose().ok()? })
            }
            "write_file" => {
                let path = self.path();
                let (content, json) = self.file_content()?;
                Some(Action::WriteFile { path: path?, content, json })
            }
            "read_file" => Some(Action::ReadFile { path: self.path()? }),
            "finish" => {
                let message = match self.reader.string("message", self.diagnostics) {
                    Some((_, node)) => Some(self.template(node, "`message`")?),
                    None => None,
                };
                Some(Action::Finish { message })
            }
            "flaky" => {
                let failures = match self.reader.integer("failures", 0, self.diagnostics) {
                    Some((count, node)) => small(count, node, "`failures`", self.diagnostics),
                    None if self.reader.has("failures") => None,
                    None => Some(DEFAULT_FLAKY_FAILURES),
                };
                let output = match self.reader.string("output", self.diagnostics) {
                    Some((_, node)) => self.template(node, "`output`"),
                    None if self.reader.has("output") => None,
                    None => Some(Template::literal(DEFAULT_FLAKY_OUTPUT)),
                };
                Some(Action::Flaky { failures: failures?, output: output? })
            }
            "ticket_lookup" => Some(Action::TicketLookup { ticket_id: self.literal("ticket_id")? }),
            "ticket_close" => Some(Action::TicketClose { ticket_id: self.literal("ticket_id")? }),
            "mcp" => self.mcp_action(),
            "http" => self.http(),
            "agent" => self.agent(),
            _ => None,
        }
    }

    /// A required string that names a target: literal, never a template.
    fn literal(&mut self, key: &str) -> Option<String> {
        let (text, node) = self.reader.required_string(key, self.diagnostics)?;
        self.literal_target(text, node, key)
    }

    /// `text` (the value of `key` in `node`) when it is a literal, non-empty
    /// target name.
    pub(super) fn literal_target(&mut self, text: &str, node: &Node, key: &str) -> Option<String> {
        if text.contains("{{") {
            self.diagnostics.push(
                Diagnostic::error("untrusted-control-field", format!("`{key}` names a target and must be literal"))
                    .with_span(node.span)
                    .with_label("no template here")
                    .with_help("a target never comes from step output: write it out"),
            );
            return None;
        }
        if text.is_empty() {
            self.diagnostics.push(Diagnostic::error("invalid-value", format!("`{key}` is empty")).with_span(node.span));
            return None;
        }
        Some(text.to_string())
    }

    /// `idempotency_key`: a template whose only references are `{{ run.id }}`.
    fn idempotency_key(&mut self) -> Option<Template> {
        let (text, node) = self.reader.string("idempotency_key", self.diagnostics)?;
        if text.trim().is_empty() {
            self.diagnostics
                .push(Diagnostic::error("invalid-value", "`idempotency_key` is empty").with_span(node.span));
            return None;
        }
        self.run_id_only(
            node,
            ("`idempotency_key`", SiteKind::Data),
            ["an idempotency key", "an idempotency key"],
            "write the key literally, or build it from `{{ run.id }}`",
        )
    }

    /// The template in `node` when its only references are `{{ run.id }}`
    /// (a control field: step output never chooses a target), else
    /// `untrusted-control-field` on the first other reference. `field` is
    /// how the message and the label name the field. A path
    /// ([`SiteKind::Path`]) may also take an input; `lint_plan` checks that
    /// the input is `path`-typed (the declarations are the plan's).
    fn run_id_only(
        &mut self,
        node: &Node,
        (key, kind): (&str, SiteKind),
        field: [&str; 2],
        help: &str,
    ) -> Option<Template> {
        let [message_field, label_field] = field;
        let template = self.template_in(node, key, kind)?;
        let is_path = kind == SiteKind::Path;
        let allowed = |target: &RefTarget| match target {
            RefTarget::RunId => true,
            RefTarget::Input(_) => is_path,
            _ => false,
        };
        if let Some(reference) = template.references().find(|reference| !allowed(&reference.target)) {
            self.diagnostics.push(
                Diagnostic::error("untrusted-control-field", format!("step output may not flow into {message_field}"))
                    .with_span(value_span(&self.file.text, node, reference.start, reference.end))
                    .with_label(if is_path {
                        format!("only `{{{{ run.id }}}}` and `path` inputs may appear in {label_field}")
                    } else {
                        format!("only `{{{{ run.id }}}}` may appear in {label_field}")
                    })
                    .with_help(help),
            );
            return None;
        }
        Some(template)
    }

    /// `expect = { exit_code = 0, output_contains = "…", output_matches = "…" }`.
    fn expect(&mut self) -> Option<Expect> {
        let node = self.reader.get("expect")?;
        let mut reader = TableReader::new(node, "`expect`", " in `expect`", EXPECT.keys, self.diagnostics)?;
        let exit_code = reader
            .integer("exit_code", 0, self.diagnostics)
            .and_then(|(code, node)| small(code, node, "`exit_code`", self.diagnostics))
            .map(|code| i32::try_from(code).unwrap_or(i32::MAX));
        let exit_codes = self.exit_codes(&mut reader);
        if let (Some(_), Some(_)) = (exit_code, &exit_codes) {
            self.diagnostics.push(
                Diagnostic::error("invalid-value", "`expect` has both `exit_code` and `exit_codes`")
                    .with_span(reader.key_span("exit_codes").unwrap_or(node.span))
                    .with_label("set one of them")
                    .with_help("list every accepted code in `exit_codes`, e.g. `exit_codes = [0, 1]`"),
            );
        }
        let output_contains = reader.string("output_contains", self.diagnostics).map(|(text, _)| text.to_string());
        let output_matches = reader
            .string("output_matches", self.diagnostics)
            .and_then(|(text, node)| compile_regex(text, false, node, self.diagnostics));
        let status = reader.array("status", self.diagnostics).and_then(|items| self.statuses(items));
        reader.finish(self.diagnostics);
        Some(Expect { exit_code, exit_codes, output_contains, output_matches, status })
    }

    /// `status = [200, …]`: a non-empty array of HTTP statuses (100 to 599).
    fn statuses(&mut self, items: &[Node]) -> Option<Vec<u16>> {
        let statuses = self.integers_in(items, "expect.status", 100..=599, "an HTTP status is 100 to 599")?;
        let statuses: Vec<u16> = statuses.into_iter().filter_map(|code| u16::try_from(code).ok()).collect();
        (!statuses.is_empty()).then_some(statuses)
    }

    /// The integers of the list `key` within `range`, or `invalid-value`
    /// (labelled `label`) or `wrong-type` for each item that is not.
    fn integers_in(
        &mut self,
        items: &[Node],
        key: &str,
        range: std::ops::RangeInclusive<i64>,
        label: &str,
    ) -> Option<Vec<i64>> {
        let mut values = Vec::new();
        for (index, item) in items.iter().enumerate() {
            match item.value {
                NodeValue::Integer(value) if range.contains(&value) => values.push(value),
                NodeValue::Integer(value) => self.diagnostics.push(
                    Diagnostic::error("invalid-value", format!("`{key}[{index}]` is {value}"))
                        .with_span(item.span)
                        .with_label(label),
                ),
                _ => self.diagnostics.push(wrong_type(item, &format!("`{key}[{index}]`"), "an integer")),
            }
        }
        (values.len() == items.len()).then_some(values)
    }

    /// `exit_codes = [0, 1, …]`: a non-empty array of exit codes (0 to 255).
    fn exit_codes(&mut self, reader: &mut TableReader<'_>) -> Option<Vec<i32>> {
        let items = reader.array("exit_codes", self.diagnostics)?;
        let span = reader.key_span("exit_codes");
        if items.is_empty() {
            self.diagnostics.push(
                Diagnostic::error("invalid-value", "`expect.exit_codes` is empty")
                    .with_span(span.unwrap_or_default())
                    .with_label("list at least one exit code"),
            );
            return None;
        }
        let codes = self.integers_in(items, "expect.exit_codes", 0..=255, "an exit code is 0 to 255")?;
        codes.into_iter().map(|code| i32::try_from(code).ok()).collect()
    }

    /// Parses a string node as a template, narrowing syntax errors to the
    /// offending reference, and remembers it for the template lints.
    pub(crate) fn template(&mut self, node: &Node, what: &str) -> Option<Template> {
        self.template_in(node, what, SiteKind::Data)
    }

    /// [`Self::template`] for a field of `kind`.
    pub(super) fn template_in(&mut self, node: &Node, what: &str, kind: SiteKind) -> Option<Template> {
        let text = node.as_str()?;
        match Template::parse(text) {
            Ok(template) => {
                self.sites.push(TemplateSite { step: self.step, template: template.clone(), node: node.clone(), kind });
                Some(template)
            }
            Err(error) => {
                self.diagnostics.push(
                    Diagnostic::error("template-syntax", format!("invalid template in {what}: {}", error.message))
                        .with_span(value_span(&self.file.text, node, error.start, error.end))
                        .with_label("invalid reference"),
                );
                None
            }
        }
    }

    /// A `shell` step's `env`: variable names and template values (the
    /// names are checked against the policy's `shell.env_allow` later).
    fn env(&mut self) -> (BTreeMap<String, Template>, BTreeMap<String, Span>) {
        let (mut env, mut spans) = (BTreeMap::new(), BTreeMap::new());
        let Some(node) = self.reader.get("env") else {
            return (env, spans);
        };
        let Some(entries) = node.as_table() else {
            self.diagnostics.push(wrong_type(node, "`env`", "a table of strings"));
            return (env, spans);
        };
        for (key, value) in entries {
            if !is_env_name(&key.name) {
                self.diagnostics.push(
                    Diagnostic::error("invalid-value", format!("`{}` is not a valid variable name", key.name))
                        .with_span(key.span)
                        .with_help("use ASCII letters, digits and `_`, not starting with a digit"),
                );
                continue;
            }
            if expect_string(value, &format!("`env.{}`", key.name), self.diagnostics).is_none() {
                continue;
            }
            if let Some(template) = self.template_in(value, &format!("`env.{}`", key.name), SiteKind::Env) {
                env.insert(key.name.clone(), template);
                spans.insert(key.name.clone(), key.span);
            }
        }
        (env, spans)
    }

    /// A file path: a template whose only references are `{{ run.id }}`.
    fn path(&mut self) -> Option<Template> {
        let (_, node) = self.reader.required_string("path", self.diagnostics)?;
        *self.path_span = Some(node.span);
        self.run_id_only(
            node,
            ("`path`", SiteKind::Path),
            ["a file path", "a path"],
            "write the path literally; put step output in `content` instead",
        )
    }

    /// A shell step's `cwd`: a control field like `path` (see
    /// [`Self::run_id_only`]: `{{ run.id }}` and `path` inputs only);
    /// confinement is checked by the lints and, at run time, by
    /// [`crate::confine::Workspace::check_cwd`].
    fn folder(&mut self, node: &Node) -> Option<Template> {
        self.run_id_only(
            node,
            ("`cwd`", SiteKind::Path),
            ["a working directory", "a working directory"],
            "write the folder literally, or take it from a `path` input; put step output in arguments or `stdin` instead",
        )
    }

    fn command(&mut self, node: &Node) -> Option<Vec<Template>> {
        if let Some(text) = node.as_str() {
            return self.command_string(text, node);
        }
        let Some(items) = node.as_array() else {
            self.diagnostics.push(wrong_type(node, "`command`", "an array of strings or a string"));
            return None;
        };
        if items.is_empty() {
            self.diagnostics.push(
                Diagnostic::error("invalid-value", "`command` is empty")
                    .with_span(node.span)
                    .with_label("name a program")
                    .with_help("e.g. `command = [\"ls\", \"-la\"]`"),
            );
            return None;
        }
        let mut command = Vec::new();
        let mut ok = true;
        for (index, item) in items.iter().enumerate() {
            let what = format!("`command[{index}]`");
            let Some(text) = expect_string(item, &what, self.diagnostics) else {
                ok = false;
                continue;
            };
            let token = if index == 0 {
                self.program(text, item.span).map(|()| Template::literal(text))
            } else {
                self.template(item, &what)
            };
            match token {
                Some(token) => command.push(token),
                None => ok = false,
            }
        }
        ok.then_some(command)
    }

    fn command_string(&mut self, text: &str, node: &Node) -> Option<Vec<Template>> {
        if let Some(at) = text.find("{{") {
            self.diagnostics.push(
                Diagnostic::error("shell-metacharacter", "templates are not allowed in the string form of `command`")
                    .with_span(value_span(&self.file.text, node, at, at + 2))
                    .with_label("template here")
                    .with_help(ARRAY_HELP),
            );
            return None;
        }
        if let Some((at, character)) =
            text.char_indices().find(|(_, character)| SHELL_METACHARACTERS.contains(character))
        {
            let shown = character.escape_default().to_string();
            self.diagnostics.push(
                Diagnostic::error("shell-metacharacter", format!("shell metacharacter `{shown}` in `command`"))
                    .with_span(value_span(&self.file.text, node, at, at + character.len_utf8()))
                    .with_label("planrun runs no shell, so this would be passed literally")
                    .with_help(ARRAY_HELP),
            );
            return None;
        }
        let Some(words) = shlex::split(text) else {
            self.diagnostics.push(
                Diagnostic::error("invalid-value", "unbalanced quotes in `command`")
                    .with_span(node.span)
                    .with_help(ARRAY_HELP),
            );
            return None;
        };
        let Some(program) = words.first() else {
            self.diagnostics.push(
                Diagnostic::error("invalid-value", "`command` is empty")
                    .with_span(node.span)
                    .with_label("name a program")
                    .with_help(ARRAY_HELP),
            );
            return None;
        };
        self.program(program, node.span)?;
        Some(words.iter().map(|word| Template::literal(word)).collect())
    }

    /// Checks that `program` is a literal bare name.
    fn program(&mut self, program: &str, span: Span) -> Option<()> {
        let problem = if program.is_empty() {
            Some("the program name is empty")
        } else if program.contains("{{") {
            Some("the program may not come from a template")
        } else if program.contains('/') {
            Some("a path is not a program name")
        } else if !program.is_ascii() {
            Some("the program name must be ASCII")
        } else if program.chars().any(|character| character.is_whitespace() || character.is_control()) {
            Some("the program name may not contain whitespace")
        } else if program == "." || program == ".." {
            Some("`.` and `..` are not programs")
        } else {
            None
        };
        let Some(problem) = problem else {
            return Some(());
        };
        self.diagnostics.push(
            Diagnostic::error("invalid-program", format!("`{program}` is not a bare program name"))
                .with_span(span)
                .with_label(problem)
                .with_help("name the program alone, e.g. `ls`; the policy's `search_path` finds it"),
        );
        None
    }
}
