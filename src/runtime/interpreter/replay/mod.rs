//! Replay: a recorded run's steps and agent turns decided again under
//! today's plan and policy, executing nothing, and what would now differ.
//!
//! The decisions are the runtime's own: a planned step's templates are
//! rendered by the interpreter's [`render_action`](super::render) from the
//! outputs the run recorded, its `when` evaluated on them, its action
//! judged by [`action_verdict`](crate::tools::action_verdict) (the tools'
//! decision functions) and the approval gate's
//! [`approval_required_by`](super::gate); an agent turn's recorded model
//! answer is decided by [`decide_turn`](super::agent::decide) as the turn
//! loop decides it. No program starts, no file is written, no request is
//! sent, no model is asked; secrets are never resolved (a step's `env` and
//! `headers` stay templates, as the records keep them).
//!
//! - `steps.rs`: the walk over the recorded history, planned steps;
//! - `turns.rs`: agent turns, from the answers sealed in the audit log.

mod steps;
mod turns;

use serde::Serialize;
use serde_json::Value;

pub use steps::replay_steps;

/// A decision: one the run recorded, or one today's plan and policy make.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decided {
    /// Allowed to run (and it ran, for a recorded decision).
    Allow {
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// Runs only after a person approves it; `required_by` is `step`,
    /// `risk` (an agent's write) or `policy` (a rule that says `prompt`).
    Approval {
        required_by: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
    },
    /// Refused by `rule`.
    Deny { rule: String, reason: String },
    /// A false `when` skips the step.
    Skip,
    /// The model's answer asks a person a question.
    Ask,
    /// The model's answer is `finish`.
    Finish,
    /// The step's templates (or its `when`) cannot be resolved.
    Unresolved { reason: String },
    /// A recorded answer the run had not acted on when it stopped.
    NotActed,
    /// No such step (in today's plan, or in the recorded one).
    Absent,
}

impl Decided {
    /// The decision's name, as `--json` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Decided::Allow { .. } => "allow",
            Decided::Approval { .. } => "approval",
            Decided::Deny { .. } => "deny",
            Decided::Skip => "skip",
            Decided::Ask => "ask",
            Decided::Finish => "finish",
            Decided::Unresolved { .. } => "unresolved",
            Decided::NotActed => "not_acted",
            Decided::Absent => "absent",
        }
    }
}

/// One field of a rendered action that differs from the recorded one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    /// `argv`, `path`, `content`, `url`, `body` … (the action's fields).
    pub field: String,
    /// As recorded; `null` when the recorded action had no such field.
    pub old: Value,
    /// As rendered today; `null` when it has no such field.
    pub new: Value,
}

/// What would now differ for one step or turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    /// It ran (or waited for approval) and would now be refused.
    Denied { rule: String, reason: String },
    /// It was refused by `was_rule` and would now be allowed.
    NoLongerDenied { was_rule: String },
    /// It ran without a person and would now wait for one.
    NewlyNeedsApproval { required_by: String },
    /// It waited for a person and would now run without one.
    NoLongerNeedsApproval { was_required_by: String },
    /// Its rendered action differs from the recorded one.
    RenderedDifferently { fields: Vec<FieldChange> },
    /// Its templates or `when` no longer resolve.
    Unresolved { reason: String },
    /// The step is no longer in the plan.
    StepRemoved,
    /// The step is new: not in the plan the run recorded.
    NewStep,
    /// Any other change of decision (a step's kind, a `when` that now
    /// holds or no longer does …).
    DecisionChanged { old: String, new: String },
}

/// One step (or one agent turn) of the recorded run, decided again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepReplay {
    pub step_id: String,
    /// The step's kind (`shell`, `write_file`, `agent` …), as recorded, or
    /// as today's plan has it for a new step.
    pub kind: String,
    /// The agent turn (1-based); absent for a planned step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// What the run recorded.
    pub old: Decided,
    /// What today's plan and policy decide.
    pub new: Decided,
    /// Empty when nothing differs.
    pub differences: Vec<Difference>,
}

impl StepReplay {
    fn new(step_id: &str, kind: &str, turn: Option<u32>, old: Decided, new: Decided) -> Self {
        let differences = differences(&old, &new);
        StepReplay { step_id: step_id.to_string(), kind: kind.to_string(), turn, old, new, differences }
    }
}

/// What differs between a recorded decision and today's.
fn differences(old: &Decided, new: &Decided) -> Vec<Difference> {
    use Decided as D;
    let ran = |decided: &Decided| matches!(decided, D::Allow { .. } | D::Approval { .. });
    match (old, new) {
        (D::NotActed, _) => Vec::new(),
        (D::Absent, D::Absent) => Vec::new(),
        (D::Absent, _) => vec![Difference::NewStep],
        (_, D::Absent) => vec![Difference::StepRemoved],
        (D::Deny { rule: was, .. }, D::Deny { rule, reason }) if was != rule => {
            vec![Difference::Denied { rule: rule.clone(), reason: reason.clone() }]
        }
        (old, D::Deny { rule, reason }) if ran(old) => {
            vec![Difference::Denied { rule: rule.clone(), reason: reason.clone() }]
        }
        (D::Deny { rule, .. }, new) if ran(new) => {
            let mut found = vec![Difference::NoLongerDenied { was_rule: rule.clone() }];
            if let D::Approval { required_by, .. } = new {
                found.push(Difference::NewlyNeedsApproval { required_by: required_by.clone() });
            }
            found
        }
        (D::Allow { .. }, D::Approval { required_by, .. }) => {
            vec![Difference::NewlyNeedsApproval { required_by: required_by.clone() }]
        }
        (D::Approval { required_by, .. }, D::Allow { .. }) => {
            vec![Difference::NoLongerNeedsApproval { was_required_by: required_by.clone() }]
        }
        (D::Unresolved { .. }, D::Unresolved { .. }) => Vec::new(),
        (_, D::Unresolved { reason }) => vec![Difference::Unresolved { reason: reason.clone() }],
        (old, new) if old.name() == new.name() => Vec::new(),
        (old, new) => vec![Difference::DecisionChanged { old: old.name().to_string(), new: new.name().to_string() }],
    }
}
