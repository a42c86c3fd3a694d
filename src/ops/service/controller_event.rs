//! A controller run's audit events (`bridge/runs/<id>/controller_audit.jsonl`):
//! one [`ControllerEvent`] enum, a typed struct per event for its `details`.
//!
//! Serialised as the record holds them: the variant's snake-case name is
//! `event_type`, its struct is `details` (field order is key order; `None`
//! is written as `null`), and the `status` column comes from
//! [`RecordEvent::status`]. `decision_made` holds the iteration and then
//! the decision's own fields, flattened. To add an event: a struct here
//! with its details in the order they are written, a variant, and its arm
//! in `status`.

use serde::{Deserialize, Serialize};

use crate::model::{FailureClass, RunStatus};
use crate::ops::service::bridge_event::PromptBlocked;
use crate::ops::service::decision::Decision;
use crate::ops::service::record_status::{BridgeStatus, ControllerStatus, ControllerStopReason};
use crate::store::RecordEvent;

/// Every event a controller run's record holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event_type", content = "details", rename_all = "snake_case")]
pub enum ControllerEvent {
    ControllerStarted(ControllerStarted),
    PromptBlocked(PromptBlocked),
    DecisionMade(DecisionMade),
    DecisionRepeated(DecisionRepeated),
    BridgeRunStarted(BridgeRunStarted),
    BridgeRunFinished(BridgeRunFinished),
    RecoveryConsidered(RecoveryConsidered),
    RecoveryApplied(RecoveryApplied),
    RecoverySkipped(RecoverySkipped),
    ControllerInterrupted(ControllerInterrupted),
    ControllerFinished(ControllerFinished),
}

impl RecordEvent for ControllerEvent {
    fn status(&self) -> Option<&'static str> {
        Some(match self {
            ControllerEvent::PromptBlocked(_) | ControllerEvent::ControllerInterrupted(_) => "failed",
            ControllerEvent::ControllerFinished(event) => event.final_status.as_str(),
            ControllerEvent::ControllerStarted(_)
            | ControllerEvent::DecisionMade(_)
            | ControllerEvent::DecisionRepeated(_)
            | ControllerEvent::BridgeRunStarted(_)
            | ControllerEvent::BridgeRunFinished(_)
            | ControllerEvent::RecoveryConsidered(_)
            | ControllerEvent::RecoveryApplied(_)
            | ControllerEvent::RecoverySkipped(_) => "running",
        })
    }
}

/// `controller_started`: the record exists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControllerStarted {
    pub goal: String,
    pub decision_mode: String,
    pub max_iterations: u32,
}

/// `decision_made`: the backend chose the next action.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionMade {
    pub iteration: u32,
    /// Boxed: a decision (with its evidence) is far larger than any other
    /// event.
    #[serde(flatten)]
    pub decision: Box<Decision>,
}

/// `decision_repeated`: the same run chosen again, counted as a failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionRepeated {
    pub iteration: u32,
    pub goal: String,
    pub consecutive_failures: u32,
}

/// `bridge_run_started`: an iteration's bridge run begins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BridgeRunStarted {
    pub iteration: u32,
    pub bridge_run_id: String,
    pub goal: String,
}

/// `bridge_run_finished`: an iteration's bridge run ended (or paused).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BridgeRunFinished {
    pub iteration: u32,
    pub bridge_run_id: String,
    pub status: BridgeStatus,
    pub agent_final_status: Option<RunStatus>,
    pub exit_code: Option<i32>,
}

/// `recovery_considered`: after a failed bridge run, whether a rule applies.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecoveryConsidered {
    pub iteration: u32,
    pub original_goal: String,
    pub failure_class: Option<FailureClass>,
    pub recovery_applied: bool,
    pub reason: String,
}

/// `recovery_applied`: a recovery rule rewrote the goal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecoveryApplied {
    pub iteration: u32,
    pub original_goal: String,
    pub rewritten_goal: String,
    pub rule_id: String,
    pub rule_reason: String,
    /// The plan the rewritten goal routes to (the user's goal's plan, or a
    /// plan it declares in `recovery_plans`).
    pub plan_id: String,
}

/// `recovery_skipped`: no recovery this time, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecoverySkipped {
    pub iteration: u32,
    pub original_goal: String,
    pub reason: String,
}

/// `controller_interrupted`: the service driving the controller run stopped
/// before it ended; the next service's scan ends it (nothing more is
/// decided or run). What it started is taken from its log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControllerInterrupted {
    /// Bridge runs its log records as finished.
    pub iterations: u32,
    /// Every bridge run its log records as started (the last one may have
    /// been cut off with it: it keeps its own record, settled on its own).
    pub linked_runs: Vec<LinkedRun>,
    pub reason: String,
}

/// `controller_finished`: the loop stopped (its `final_status` is the
/// column's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControllerFinished {
    pub final_status: ControllerStatus,
    pub stop_reason: ControllerStopReason,
    pub iterations: u32,
    pub linked_runs: Vec<LinkedRun>,
}

/// One hop of run-id traceability: bridge run → agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkedRun {
    pub bridge_run_id: String,
    pub agent_run_id: String,
}
