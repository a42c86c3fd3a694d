//! Plan tree → [`Plan`], collecting every finding of the file in one pass.
//!
//! `validate_plan` builds the model and reports errors; `lint_plan` then
//! reports what is legal but suspicious in one plan (templates that cannot
//! resolve, unreachable steps, paths outside the workspace) as warnings, or
//! as notes when the plan documents a failing scenario. Checks that need the
//! policy or other plans live in `catalog.rs`.
//!
//! Adding a step kind: add it to `keys::STEP`'s variants with its payload
//! keys and build its [`Action`] in `action`.

use std::collections::HashMap;

use crate::diag::{Diagnostic, Severity, SourceFile, Span};
use crate::model::{
    Action, BudgetOverride, Condition, ConditionTest, Expect, Plan, Risk, RunStatus, SourceRef, Step, VerifyCheck,
    WhenFalse,
};
use crate::spec::keys::{EXPECT, PLAN, PLAN_BUDGET, STEP, VERIFY, WHEN};
use crate::spec::node::Node;
use crate::spec::table::{TableReader, check_version, did_you_mean, expect_string, is_name, value_span, wrong_type};
use crate::template::{Field, RefTarget, Reference, Template};

/// Characters the string form of `command` may not hold: a shell would give
/// them meaning, and planrun never runs a shell.
const SHELL_METACHARACTERS: &[char] =
    &[';', '|', '&', '$', '`', '(', ')', '<', '>', '*', '?', '[', ']', '{', '}', '#', '~', '!', '\n', '\r', '\\'];

const ARRAY_HELP: &str = "write `command` as an array, e.g. `command = [\"ls\", \"-la\"]`";

/// A validated plan with the spans that later checks point at.
#[derive(Debug, Clone)]
pub(crate) struct LoadedPlan {
    pub plan: Plan,
    pub spans: PlanSpans,
}

/// Where the parts of a plan are in its file.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlanSpans {
    pub id: Span,
    pub policy: Option<Span>,
    pub default: Option<Span>,
    pub steps_key: Option<Span>,
    pub steps: Vec<StepSpans>,
    templates: Vec<TemplateSite>,
}

/// Where the parts of a step are in its file.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepSpans {
    pub id: Span,
    pub timeout: Option<Span>,
    pub retry: Option<Span>,
    pub path: Option<Span>,
    pub command: Option<Span>,
}

/// A template of a step and where its text starts in the file.
#[derive(Debug, Clone)]
struct TemplateSite {
    step: usize,
    template: Template,
    node: Node,
}

impl LoadedPlan {
    /// Turns a warning into a note when the plan documents a failing run.
    pub(crate) fn soften(&self, diagnostic: Diagnostic) -> Diagnostic {
        soften(diagnostic, self.plan.expected_status == RunStatus::Failed)
    }
}

fn soften(mut diagnostic: Diagnostic, expected_failed: bool) -> Diagnostic {
    if expected_failed && diagnostic.severity == Severity::Warning {
        diagnostic.severity = Severity::Note;
        let expected = "expected: this plan documents a failing scenario";
        diagnostic.help = Some(match diagnostic.help.take() {
            Some(help) => format!("{help}; {expected}"),
            None => expected.to_string(),
        });
    }
    diagnostic
}

/// Builds the plan, or returns `None` when the file has errors (all of them
/// reported).
pub(crate) fn validate_plan(
    root: &Node,
    file: &SourceFile,
    source: SourceRef,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<LoadedPlan> {
    let errors_before = error_count(diagnostics);
    let mut spans = PlanSpans::default();
    let mut reader = TableReader::new(root, "a plan file", "", PLAN.keys, diagnostics)?;
    check_version(&mut reader, diagnostics);

    let id = reader.required_string("id", diagnostics).and_then(|(id, node)| {
        spans.id = node.span;
        name_or_error(id, node, "plan id", 64, diagnostics)
    });
    let description = reader.string("description", diagnostics).map_or_else(String::new, |(text, _)| text.to_string());

    let mut keywords = Vec::new();
    let mut keyword_spans = Vec::new();
    if let Some(items) = reader.array("keywords", diagnostics) {
        for (index, item) in items.iter().enumerate() {
            let Some(keyword) = expect_string(item, &format!("`keywords[{index}]`"), diagnostics) else {
                continue;
            };
            if keyword.trim().is_empty() {
                diagnostics.push(
                    Diagnostic::error("invalid-value", "a keyword may not be empty")
                        .with_span(item.span)
                        .with_label("empty keyword"),
                );
                continue;
            }
            keywords.push(keyword.to_string());
            keyword_spans.push(item.span);
        }
    }

    let policy = match reader.string("policy", diagnostics) {
        Some((name, node)) => {
            spans.policy = Some(node.span);
            name_or_error(name, node, "policy name", usize::MAX, diagnostics)
        }
        None => Some("default".to_string()),
    };
    spans.default = reader.key_span("default");
    let default = reader.bool("default", diagnostics).unwrap_or(false);
    let expected_status = match reader.string("expected_status", diagnostics) {
        None => Some(RunStatus::Done),
        Some(("done", _)) => Some(RunStatus::Done),
        Some(("failed", _)) => Some(RunStatus::Failed),
        Some((other, node)) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("unknown `expected_status` `{other}`"))
                    .with_span(node.span)
                    .with_label("expected `done` or `failed`"),
            );
            None
        }
    };

    spans.steps_key = reader.key_span("steps");
    let mut steps = Vec::new();
    if let Some(node) = reader.required("steps", diagnostics) {
        match node.as_array() {
            None => diagnostics.push(wrong_type(node, "`steps`", "an array of tables")),
            Some([]) => diagnostics.push(
                Diagnostic::error("invalid-value", "`steps` is empty")
                    .with_span(node.span)
                    .with_label("a plan needs at least one step")
                    .with_help("add a `[[steps]]` table"),
            ),
            Some(items) => {
                let mut first_seen: HashMap<String, Span> = HashMap::new();
                for (index, item) in items.iter().enumerate() {
                    let built = step(item, index, file, &mut spans, diagnostics);
                    let Some((step, step_spans)) = built else {
                        continue;
                    };
                    if let Some(first) = first_seen.get(&step.id) {
                        let (line, _) = file.line_col(first.start);
                        diagnostics.push(
                            Diagnostic::error(
                                "duplicate-step-id",
                                format!("duplicate step id `{}`, first used on line {line}", step.id),
                            )
                            .with_span(step_spans.id)
                            .with_label("used again here")
                            .with_help("give every step of a plan its own id"),
                        );
                        continue;
                    }
                    first_seen.insert(step.id.clone(), step_spans.id);
                    steps.push(step);
                    spans.steps.push(step_spans);
                }
            }
        }
    }
    let budget = plan_budget(&mut reader, diagnostics);
    let verify = verify_checks(&mut reader, &steps, diagnostics);
    reader.finish(diagnostics);

    if error_count(diagnostics) > errors_before {
        return None;
    }
    let (Some(id), Some(policy), Some(expected_status), Some(budget), Some(verify)) =
        (id, policy, expected_status, budget, verify)
    else {
        return None;
    };
    Some(LoadedPlan {
        plan: Plan {
            id,
            description,
            keywords,
            policy,
            default,
            expected_status,
            steps,
            budget,
            verify,
            source,
            keyword_spans,
        },
        spans,
    })
}

fn error_count(diagnostics: &[Diagnostic]) -> usize {
    diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count()
}

fn name_or_error(name: &str, node: &Node, what: &str, max: usize, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
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

fn step(
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
    let declared_risk = match reader.string("risk", diagnostics) {
        None => None,
        Some(("read", _)) => Some(Risk::Read),
        Some(("write", _)) => Some(Risk::Write),
        Some((other, node)) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("unknown `risk` `{other}`"))
                    .with_span(node.span)
                    .with_label("expected `read` or `write`"),
            );
            None
        }
    };

    let step_index = plan_spans.steps.len();
    let mut builder = ActionBuilder {
        reader: &mut reader,
        file,
        step: step_index,
        sites: &mut plan_spans.templates,
        path_span: &mut spans.path,
        command_span: &mut spans.command,
        diagnostics,
    };
    let idempotency_key = builder.idempotency_key();
    let when = builder.when();
    let expect = builder.expect();
    let action = kind.and_then(|variant| {
        builder.reader.allow(variant.keys);
        builder.action(variant.name)
    });
    if let (Some(variant), Some(Expect { exit_code: Some(_), .. })) = (kind, &expect)
        && variant.name != "shell"
    {
        let span = reader.key_span("expect").unwrap_or(node.span);
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("`expect.exit_code` on a `{}` step", variant.name))
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
        approval,
        declared_risk,
        idempotency_key,
        when,
        expect,
        span: node.span,
    };
    Some((step, spans))
}

/// The first line of a regex error, for a label.
fn regex_error(error: &regex::Error) -> String {
    error.to_string().lines().last().unwrap_or("invalid").trim_start_matches("error: ").to_string()
}

/// The plan's `[budget]`: `None` only after a reported error.
fn plan_budget(reader: &mut TableReader<'_>, diagnostics: &mut Vec<Diagnostic>) -> Option<BudgetOverride> {
    let Some(node) = reader.get("budget") else {
        return Some(BudgetOverride::default());
    };
    let errors_before = error_count(diagnostics);
    let mut table = TableReader::new(node, "`budget`", " in `[budget]`", PLAN_BUDGET.keys, diagnostics)?;
    let mut limit = |key: &str| table.integer(key, 1, diagnostics).map(|(value, _)| value.unsigned_abs());
    let budget = BudgetOverride {
        max_steps: limit("max_steps"),
        max_tool_calls: limit("max_tool_calls"),
        max_consecutive_failures: limit("max_consecutive_failures"),
        step_timeout_secs: limit("step_timeout_secs"),
        max_run_secs: limit("max_run_secs"),
    };
    table.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(budget)
}

/// The plan's `[[verify]]` checks: `None` only after a reported error.
fn verify_checks(
    reader: &mut TableReader<'_>,
    steps: &[Step],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Vec<VerifyCheck>> {
    let Some(items) = reader.array("verify", diagnostics) else {
        return (!reader.has("verify")).then(Vec::new);
    };
    let errors_before = error_count(diagnostics);
    let mut checks = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let what = format!("`verify[{index}]`");
        let Some(mut table) = TableReader::new(item, &what, format!(" in {what}"), VERIFY.keys, diagnostics) else {
            continue;
        };
        let Some((kind, kind_node)) = table.required_string("kind", diagnostics) else {
            continue;
        };
        let Some(variant) = VERIFY.variant(kind) else {
            let names = VERIFY.variants.iter().map(|variant| variant.name);
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("unknown verify kind `{kind}`"))
                    .with_span(kind_node.span)
                    .with_help(format!(
                        "allowed kinds: {}",
                        names.map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
                    )),
            );
            continue;
        };
        table.allow(variant.keys);
        let check = match variant.name {
            "file" => {
                let path = table.required_string("path", diagnostics).map(|(text, _)| text.to_string());
                let contains = table.string("contains", diagnostics).map(|(text, _)| text.to_string());
                path.map(|path| VerifyCheck::File { path, contains })
            }
            "ticket_status" => {
                let ticket = table.required_string("ticket_id", diagnostics).map(|(text, _)| text.to_string());
                let equals = table.required_string("equals", diagnostics).map(|(text, _)| text.to_string());
                ticket.zip(equals).map(|(ticket_id, equals)| VerifyCheck::TicketStatus { ticket_id, equals })
            }
            _ => table.required_string("step", diagnostics).and_then(|(step, node)| {
                let keyed = steps.iter().any(|candidate| candidate.id == step && candidate.idempotency_key.is_some());
                if !keyed {
                    diagnostics.push(
                        Diagnostic::error("invalid-value", format!("step `{step}` has no `idempotency_key`"))
                            .with_span(node.span)
                            .with_label("no receipt to verify")
                            .with_help("name a step of this plan that has an `idempotency_key`"),
                    );
                    return None;
                }
                Some(VerifyCheck::Receipt { step: step.to_string() })
            }),
        };
        table.finish(diagnostics);
        checks.extend(check);
    }
    (error_count(diagnostics) == errors_before).then_some(checks)
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

struct ActionBuilder<'r, 'n, 'd> {
    reader: &'r mut TableReader<'n>,
    file: &'r SourceFile,
    step: usize,
    sites: &'r mut Vec<TemplateSite>,
    path_span: &'r mut Option<Span>,
    command_span: &'r mut Option<Span>,
    diagnostics: &'d mut Vec<Diagnostic>,
}

impl ActionBuilder<'_, '_, '_> {
    fn action(&mut self, kind: &str) -> Option<Action> {
        match kind {
            "shell" => {
                let node = self.reader.required("command", self.diagnostics)?;
                *self.command_span = Some(node.span);
                let command = self.command(node)?;
                Some(Action::Shell { command })
            }
            "write_file" => {
                let path = self.path();
                let content = self.required_template("content");
                Some(Action::WriteFile { path: path?, content: content? })
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
                    None => Some(1),
                };
                let output = match self.reader.string("output", self.diagnostics) {
                    Some((_, node)) => self.template(node, "`output`"),
                    None if self.reader.has("output") => None,
                    None => Some(Template::literal("ok")),
                };
                Some(Action::Flaky { failures: failures?, output: output? })
            }
            "ticket_lookup" => Some(Action::TicketLookup { ticket_id: self.literal("ticket_id")? }),
            "ticket_close" => Some(Action::TicketClose { ticket_id: self.literal("ticket_id")? }),
            _ => None,
        }
    }

    /// A required string that names a target: literal, never a template.
    fn literal(&mut self, key: &str) -> Option<String> {
        let (text, node) = self.reader.required_string(key, self.diagnostics)?;
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
        let template = self.template(node, "`idempotency_key`")?;
        if let Some(reference) = template.references().find(|reference| reference.target != RefTarget::RunId) {
            self.diagnostics.push(
                Diagnostic::error("untrusted-control-field", "step output may not flow into an idempotency key")
                    .with_span(value_span(&self.file.text, node, reference.start, reference.end))
                    .with_label("only `{{ run.id }}` may appear in an idempotency key")
                    .with_help("write the key literally, or build it from `{{ run.id }}`"),
            );
            return None;
        }
        Some(template)
    }

    /// `when = { value = "…", equals | not_equals | contains | matches = "…", otherwise = … }`.
    fn when(&mut self) -> Option<Condition> {
        let node = self.reader.get("when")?;
        let mut reader = TableReader::new(node, "`when`", " in `when`", WHEN.keys, self.diagnostics)?;
        let value = reader.required_string("value", self.diagnostics).map(|(_, node)| node);
        let mut tests = Vec::new();
        for key in ["equals", "not_equals", "contains", "matches"] {
            if let Some((text, node)) = reader.string(key, self.diagnostics) {
                tests.push((key, text, node));
            }
        }
        let otherwise = match reader.string("otherwise", self.diagnostics) {
            None | Some(("skip", _)) => Some(WhenFalse::Skip),
            Some(("already_satisfied", _)) => Some(WhenFalse::AlreadySatisfied),
            Some((other, node)) => {
                self.diagnostics.push(
                    Diagnostic::error("invalid-value", format!("unknown `otherwise` `{other}`"))
                        .with_span(node.span)
                        .with_label("expected `skip` or `already_satisfied`"),
                );
                None
            }
        };
        reader.finish(self.diagnostics);
        let test = match tests.as_slice() {
            [(key, text, node)] => match *key {
                "equals" => Some(ConditionTest::Equals((*text).to_string())),
                "not_equals" => Some(ConditionTest::NotEquals((*text).to_string())),
                "contains" => Some(ConditionTest::Contains((*text).to_string())),
                _ => match regex::Regex::new(text) {
                    Ok(regex) => Some(ConditionTest::Matches(regex)),
                    Err(error) => {
                        self.diagnostics.push(
                            Diagnostic::error("invalid-regex", format!("invalid regex `{text}`"))
                                .with_span(node.span)
                                .with_label(regex_error(&error)),
                        );
                        None
                    }
                },
            },
            _ => {
                self.diagnostics.push(
                    Diagnostic::error("invalid-value", "`when` needs exactly one test")
                        .with_span(node.span)
                        .with_label(format!("found {}", tests.len()))
                        .with_help("use one of `equals`, `not_equals`, `contains`, `matches`"),
                );
                None
            }
        };
        let value = self.template(value?, "`when.value`")?;
        Some(Condition { value, test: test?, otherwise: otherwise? })
    }

    /// `expect = { exit_code = 0, output_contains = "…", output_matches = "…" }`.
    fn expect(&mut self) -> Option<Expect> {
        let node = self.reader.get("expect")?;
        let mut reader = TableReader::new(node, "`expect`", " in `expect`", EXPECT.keys, self.diagnostics)?;
        let exit_code = reader
            .integer("exit_code", 0, self.diagnostics)
            .and_then(|(code, node)| small(code, node, "`exit_code`", self.diagnostics))
            .map(|code| i32::try_from(code).unwrap_or(i32::MAX));
        let output_contains = reader.string("output_contains", self.diagnostics).map(|(text, _)| text.to_string());
        let output_matches = reader.string("output_matches", self.diagnostics).and_then(|(text, node)| {
            regex::Regex::new(text)
                .map_err(|error| {
                    self.diagnostics.push(
                        Diagnostic::error("invalid-regex", format!("invalid regex `{text}`"))
                            .with_span(node.span)
                            .with_label(regex_error(&error)),
                    );
                })
                .ok()
        });
        reader.finish(self.diagnostics);
        Some(Expect { exit_code, output_contains, output_matches })
    }

    fn required_template(&mut self, key: &str) -> Option<Template> {
        let (_, node) = self.reader.required_string(key, self.diagnostics)?;
        self.template(node, &format!("`{key}`"))
    }

    /// Parses a string node as a template, narrowing syntax errors to the
    /// offending reference, and remembers it for the template lints.
    fn template(&mut self, node: &Node, what: &str) -> Option<Template> {
        let text = node.as_str()?;
        match Template::parse(text) {
            Ok(template) => {
                self.sites.push(TemplateSite { step: self.step, template: template.clone(), node: node.clone() });
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

    /// A file path: a template whose only references are `{{ run.id }}`.
    fn path(&mut self) -> Option<Template> {
        let (_, node) = self.reader.required_string("path", self.diagnostics)?;
        *self.path_span = Some(node.span);
        let template = self.template(node, "`path`")?;
        if let Some(reference) = template.references().find(|reference| reference.target != RefTarget::RunId) {
            self.diagnostics.push(
                Diagnostic::error("untrusted-control-field", "step output may not flow into a file path")
                    .with_span(value_span(&self.file.text, node, reference.start, reference.end))
                    .with_label("only `{{ run.id }}` may appear in a path")
                    .with_help("write the path literally; put step output in `content` instead"),
            );
            return None;
        }
        Some(template)
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

/// `template-field-never-produced`: an `output_json` reference to a step
/// (or, for `last`, the step before) whose kind never produces structured
/// output. Unknown and forward references are reported on their own.
fn field_never_produced(plan: &Plan, site: usize, reference: &Reference, span: Span) -> Option<Diagnostic> {
    let (target, field) = match &reference.target {
        RefTarget::Last(field) => (site.checked_sub(1)?, field),
        RefTarget::Step { id, field } => {
            (plan.steps.iter().position(|step| &step.id == id).filter(|at| *at < site)?, field)
        }
        RefTarget::RunId => return None,
    };
    if !matches!(field, Field::OutputJson(_)) {
        return None;
    }
    let step = &plan.steps[target];
    if step.action.may_produce_json() {
        return None;
    }
    Some(
        Diagnostic::warning(
            "template-field-never-produced",
            format!(
                "`{{{{ {} }}}}` reads structured output, but step `{}` is a `{}` step, which never produces `output_json`",
                reference.expr,
                step.id,
                step.action.kind()
            ),
        )
        .with_span(span)
        .with_label("always fails with `template_error`")
        .with_help("use `output_text`, or refer to a `read_file`, `ticket_lookup` or `ticket_close` step (the kinds with `output_json`)"),
    )
}

/// Warnings about one valid plan.
pub(crate) fn lint_plan(loaded: &LoadedPlan, file: &SourceFile, diagnostics: &mut Vec<Diagnostic>) {
    let plan = &loaded.plan;
    let spans = &loaded.spans;
    let mut found = Vec::new();

    match plan.steps.iter().position(|step| matches!(step.action, Action::Finish { .. })) {
        None => {
            let mut diagnostic = Diagnostic::warning("no-finish", format!("plan `{}` has no `finish` step", plan.id))
                .with_help("end the plan with a step of kind `finish`");
            if let Some(span) = spans.steps_key.or(Some(spans.id)) {
                diagnostic = diagnostic.with_span(span);
            }
            found.push(diagnostic);
        }
        Some(finish) => {
            for (step, step_spans) in plan.steps.iter().zip(&spans.steps).skip(finish + 1) {
                found.push(
                    Diagnostic::warning(
                        "unreachable-step",
                        format!(
                            "step `{}` comes after `finish` step `{}` and never runs",
                            step.id, plan.steps[finish].id
                        ),
                    )
                    .with_span(step_spans.id)
                    .with_label("unreachable")
                    .with_help("move the `finish` step to the end"),
                );
            }
        }
    }

    for site in &spans.templates {
        for reference in site.template.references() {
            let span = value_span(&file.text, &site.node, reference.start, reference.end);
            let this = &plan.steps[site.step].id;
            if let Some(diagnostic) = field_never_produced(plan, site.step, reference, span) {
                found.push(diagnostic);
            }
            match &reference.target {
                RefTarget::Last(_) if site.step == 0 => found.push(
                    Diagnostic::warning(
                        "template-last-in-first-step",
                        format!("`{{{{ {} }}}}` in the first step: no step has run yet", reference.expr),
                    )
                    .with_span(span)
                    .with_label("always fails with `template_error`")
                    .with_help("refer to a step that runs earlier, or remove the reference"),
                ),
                RefTarget::Step { id, .. } => match plan.steps.iter().position(|step| &step.id == id) {
                    None => {
                        let mut diagnostic = Diagnostic::warning(
                            "template-unknown-step",
                            format!("`{{{{ {} }}}}` names no step of plan `{}`", reference.expr, plan.id),
                        )
                        .with_span(span);
                        let ids = plan.steps.iter().map(|step| step.id.as_str());
                        if let Some(suggestion) = did_you_mean(id, ids) {
                            diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
                        }
                        found.push(diagnostic);
                    }
                    Some(target) if target >= site.step => {
                        let when = if target == site.step {
                            "the step itself".to_string()
                        } else {
                            format!("step `{id}`, which runs later")
                        };
                        found.push(
                            Diagnostic::warning(
                                "template-forward-reference",
                                format!("`{{{{ {} }}}}` in step `{this}` refers to {when}", reference.expr),
                            )
                            .with_span(span)
                            .with_label("has no output yet when this step runs")
                            .with_help("refer only to steps that run before this one"),
                        );
                    }
                    Some(_) => {}
                },
                _ => {}
            }
        }
    }

    for (step, step_spans) in plan.steps.iter().zip(&spans.steps) {
        let path = match &step.action {
            Action::WriteFile { path, .. } | Action::ReadFile { path } => path.source(),
            _ => continue,
        };
        let absolute = path.starts_with('/') || path.starts_with('\\');
        let parent = path.split(['/', '\\']).any(|component| component == "..");
        if absolute || parent {
            let why = if absolute { "is absolute" } else { "has a `..` component" };
            let mut diagnostic =
                Diagnostic::warning("path-outside-workspace", format!("path `{path}` in step `{}` {why}", step.id))
                    .with_label("the runtime denies paths outside the workspace")
                    .with_help("use a path relative to the workspace");
            if let Some(span) = step_spans.path {
                diagnostic = diagnostic.with_span(span);
            }
            found.push(diagnostic);
        }
    }

    diagnostics.extend(found.into_iter().map(|diagnostic| loaded.soften(diagnostic)));
}
