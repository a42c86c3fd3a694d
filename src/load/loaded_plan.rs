//! A validated plan together with where its parts are in the file: what
//! `validate_plan.rs` and `validate_step.rs` build and what `lint_plan.rs`
//! and `cross_check.rs` point their findings at. It sits in its own file so that
//! the validators and the lints all depend on it and never on each other.

use crate::diag::{Diagnostic, Severity, Span};
use crate::load::node::Node;
use crate::model::{Action, Plan, RunStatus, Step};
use crate::template::Template;

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
    /// Each entry of `recovery_plans`, parallel to the plan's list.
    pub recovery_plans: Vec<Span>,
    pub(crate) templates: Vec<TemplateSite>,
}

/// Where the parts of a step are in its file.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepSpans {
    pub id: Span,
    pub timeout: Option<Span>,
    pub retry: Option<Span>,
    pub path: Option<Span>,
    pub command: Option<Span>,
    /// The span of each name of the step's `env`.
    pub env: std::collections::BTreeMap<String, Span>,
    pub cwd: Option<Span>,
    /// An `mcp` step's `server` and `tool` values.
    pub mcp: [Option<Span>; 2],
}

impl StepSpans {
    /// The step's workspace paths that confinement checks: a file step's
    /// `path`, a shell step's `cwd`, each with the key's name and where its
    /// value is. The lints that judge paths all read them from here.
    pub fn confined_paths<'s>(&self, step: &'s Step) -> Vec<(&'static str, &'s Template, Option<Span>)> {
        match &step.action {
            Action::WriteFile { path, .. } | Action::ReadFile { path } => vec![("path", path, self.path)],
            Action::Shell { cwd: Some(cwd), .. } => vec![("cwd", cwd, self.cwd)],
            _ => Vec::new(),
        }
    }
}

/// A template of a step and where its text starts in the file.
#[derive(Debug, Clone)]
pub(crate) struct TemplateSite {
    pub(crate) step: usize,
    pub(crate) template: Template,
    pub(crate) node: Node,
    /// Which kind of field holds it: what its references may name.
    pub(crate) kind: SiteKind,
}

/// The field a template fills, as the template lints see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SiteKind {
    /// Data: content, arguments, messages, conditions, control fields other
    /// than a path.
    Data,
    /// A file step's `path`: only `{{ run.id }}` and `path`-typed inputs.
    Path,
    /// A value of a shell step's `env`: a place a secret may appear.
    Env,
    /// A value of an `http` step's `headers`: the other place a secret may
    /// appear (sent, never recorded).
    Header,
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
