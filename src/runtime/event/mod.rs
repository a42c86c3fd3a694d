//! Audit events: one [`Event`] enum, a typed struct per event for its
//! `details`.
//!
//! An event is serialised exactly as `audit.jsonl` holds it: the variant's
//! snake-case name is `event_type`, its struct is `details` (field order is
//! key order, since serde_json keeps insertion order), and the step and
//! status columns come from [`Event::step_id`] and [`Event::status`]. The
//! step id is part of the struct but not of `details` (`#[serde(skip)]`);
//! a status that follows from the details (`done`/`failed`, `true`/`false`)
//! is derived from them, so the two columns cannot disagree.
//!
//! The names are part of the record format, so runs stay comparable; their order
//! in a run is documented in the README. To add an event: a struct here
//! with the details in the order they are written, a variant, and its arms
//! in `step_id` and `status`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{FailureClass, RunStatus, StepDetails, StopReason};
use crate::store::ReceiptState;

mod agent;
pub use agent::{AgentAnswerRecorded, AgentObserved, AgentToolsListed, ListedTool};

/// Every event the runtime writes to `audit.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event_type", content = "details", rename_all = "snake_case")]
pub enum Event {
    RunStarted(RunStarted),
    PlanCreated(PlanCreated),
    StateSaved(StateSaved),
    StepStarted(AttemptStarted),
    ResolutionPerformed(ResolutionPerformed),
    StepFinished(AttemptFinished),
    StepFailed(StepFailed),
    RetryScheduled(RetryScheduled),
    RetryAttemptStarted(AttemptStarted),
    RetryAttemptFinished(AttemptFinished),
    BudgetExhausted(BudgetExhausted),
    RunFinished(RunFinished),
    RunResumed(RunResumed),
    ChildStopped(ChildStopped),
    ConditionEvaluated(ConditionEvaluated),
    StepSkipped(StepSkipped),
    ApprovalRequested(ApprovalRequested),
    ApprovalGranted(ApprovalGranted),
    ApprovalRejected(ApprovalRejected),
    ApprovalVerified(ApprovalVerified),
    ReceiptLookup(ReceiptLookup),
    ReceiptRecorded(ReceiptRecorded),
    ReceiptReused(ReceiptReused),
    ReconciliationRecorded(ReconciliationRecorded),
    ReconciliationSettled(ReconciliationSettled),
    CompletionVerified(CompletionVerified),
    RunCancelled(RunCancelled),
    AgentAnswerRecorded(AgentAnswerRecorded),
    AgentObservation(AgentObserved),
    AgentToolsListed(AgentToolsListed),
}

/// The `event_type` and `details` columns of an event's line.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EventColumns {
    pub event_type: String,
    pub details: Map<String, Value>,
}

impl Event {
    /// The `step_id` column.
    pub fn step_id(&self) -> Option<&str> {
        match self {
            Event::RunStarted(_) | Event::PlanCreated(_) | Event::RunFinished(_) | Event::CompletionVerified(_) => None,
            Event::StateSaved(StateSaved { step_id, .. })
            | Event::BudgetExhausted(BudgetExhausted { step_id, .. })
            | Event::RunResumed(RunResumed { step_id, .. })
            | Event::ChildStopped(ChildStopped { step_id, .. })
            | Event::RunCancelled(RunCancelled { step_id, .. }) => step_id.as_deref(),
            Event::StepStarted(AttemptStarted { step_id, .. })
            | Event::RetryAttemptStarted(AttemptStarted { step_id, .. })
            | Event::ResolutionPerformed(ResolutionPerformed { step_id, .. })
            | Event::StepFinished(AttemptFinished { step_id, .. })
            | Event::RetryAttemptFinished(AttemptFinished { step_id, .. })
            | Event::StepFailed(StepFailed { step_id, .. })
            | Event::RetryScheduled(RetryScheduled { step_id, .. })
            | Event::ConditionEvaluated(ConditionEvaluated { step_id, .. })
            | Event::StepSkipped(StepSkipped { step_id, .. })
            | Event::ApprovalRequested(ApprovalRequested { step_id, .. })
            | Event::ApprovalGranted(ApprovalGranted { step_id, .. })
            | Event::ApprovalRejected(ApprovalRejected { step_id, .. })
            | Event::ApprovalVerified(ApprovalVerified { step_id, .. })
            | Event::ReceiptLookup(ReceiptLookup { step_id, .. })
            | Event::ReceiptRecorded(ReceiptRecorded { step_id, .. })
            | Event::ReceiptReused(ReceiptReused { step_id, .. })
            | Event::ReconciliationRecorded(ReconciliationRecorded { step_id, .. })
            | Event::ReconciliationSettled(ReconciliationSettled { step_id, .. })
            | Event::AgentAnswerRecorded(AgentAnswerRecorded { step_id, .. })
            | Event::AgentObservation(AgentObserved { step_id, .. })
            | Event::AgentToolsListed(AgentToolsListed { step_id, .. }) => Some(step_id),
        }
    }

    /// The `status` column.
    pub fn status(&self) -> &'static str {
        let ok_or_failed = |ok: bool| if ok { "ok" } else { "failed" };
        match self {
            Event::RunStarted(_) | Event::StepStarted(_) | Event::RetryAttemptStarted(_) | Event::RunResumed(_) => {
                "running"
            }
            Event::PlanCreated(_)
            | Event::StateSaved(_)
            | Event::ApprovalGranted(_)
            | Event::ApprovalVerified(_)
            | Event::ReceiptLookup(_)
            | Event::ReceiptRecorded(_)
            | Event::ReceiptReused(_)
            | Event::AgentToolsListed(_) => "ok",
            Event::ResolutionPerformed(event) => ok_or_failed(event.success),
            Event::CompletionVerified(event) => ok_or_failed(event.passed),
            Event::StepFinished(event) | Event::RetryAttemptFinished(event) => {
                if event.failure_class.is_some() {
                    "failed"
                } else {
                    "done"
                }
            }
            Event::StepFailed(_) | Event::BudgetExhausted(_) => "failed",
            Event::RetryScheduled(_) => "scheduled",
            Event::RunFinished(event) => event.status.as_str(),
            Event::ConditionEvaluated(event) => {
                if event.holds {
                    "true"
                } else {
                    "false"
                }
            }
            Event::StepSkipped(_) => "skipped",
            Event::ChildStopped(_) => "killed",
            Event::ApprovalRequested(_) => "waiting_approval",
            Event::ApprovalRejected(_) => "rejected",
            Event::ReconciliationRecorded(_) => "uncertain",
            Event::ReconciliationSettled(event) => {
                if event.applied {
                    "applied"
                } else {
                    "not_applied"
                }
            }
            Event::RunCancelled(_) => "cancelled",
            Event::AgentAnswerRecorded(_) => "recorded",
            Event::AgentObservation(event) => match event.outcome.as_str() {
                "ok" => "ok",
                "refused" => "refused",
                "answered" => "answered",
                _ => "failed",
            },
        }
    }

    /// The `event_type` and `details` columns, exactly as the line holds
    /// them.
    pub fn columns(&self) -> Result<EventColumns, serde_json::Error> {
        // The two entries are taken out of the serialized event as they
        // are: no second pass rebuilds the details map.
        let Value::Object(mut event) = serde_json::to_value(self)? else {
            return Err(serde::ser::Error::custom("an event serializes as an object"));
        };
        match (event.remove("event_type"), event.remove("details")) {
            (Some(Value::String(event_type)), Some(Value::Object(details))) => Ok(EventColumns { event_type, details }),
            _ => Err(serde::ser::Error::custom("an event serializes as `event_type` and `details`")),
        }
    }
}

/// `run_started`: a new run begins. Read back (`Deserialize`) from the log
/// of a start interrupted before its first checkpoint, to start it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    pub plan_id: String,
    pub plan_path: String,
    pub policy: String,
    /// The goal that routed to the plan (`null` for `--plan`).
    pub goal: Option<String>,
    /// The plan's inputs as given (defaults applied); absent when it
    /// declares none.
    #[serde(default, skip_serializing_if = "crate::model::InputValues::is_empty")]
    pub inputs: crate::model::InputValues,
}

/// `plan_created`: `plan.json` was written (read back like [`RunStarted`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanCreated {
    pub step_count: usize,
    pub plan_sha256: String,
    pub policy_sha256: String,
}

/// `state_saved`: a durable checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateSaved {
    #[serde(skip)]
    pub step_id: Option<String>,
    pub state_version: u64,
}

/// `step_started` (attempt 1) or `retry_attempt_started` (later attempts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptStarted {
    #[serde(skip)]
    pub step_id: String,
    pub kind: String,
    pub attempt: u32,
}

/// `resolution_performed`: the step's templates were rendered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResolutionPerformed {
    #[serde(skip)]
    pub step_id: String,
    pub templates_found: bool,
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `step_finished` (attempt 1) or `retry_attempt_finished`: the attempt's
/// outcome; `failure_class` and `error` only when it failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptFinished {
    #[serde(skip)]
    pub step_id: String,
    pub kind: String,
    pub attempt: u32,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_class: Option<FailureClass>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tool's facts (resolved program, matched rule, exit code, byte
    /// counts, receipt), after the attempt's own keys.
    #[serde(flatten)]
    pub tool: StepDetails,
}

/// `step_failed`: an attempt failed; whether another one follows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepFailed {
    #[serde(skip)]
    pub step_id: String,
    pub failure_class: FailureClass,
    pub attempt: u32,
    pub max_attempts: u32,
    pub retry_scheduled: bool,
    pub error: String,
}

/// `retry_scheduled`: another attempt follows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetryScheduled {
    #[serde(skip)]
    pub step_id: String,
    pub failure_class: FailureClass,
    pub next_attempt: u32,
    pub max_attempts: u32,
    /// The wait before the next attempt (`retry_backoff`), in milliseconds.
    pub backoff_ms: u64,
}

/// `budget_exhausted`: a budget stops the run (on the step at the cursor).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetExhausted {
    #[serde(skip)]
    pub step_id: Option<String>,
    pub budget: String,
    pub limit: u64,
    pub used: u64,
}

/// `run_finished`: the run's outcome and counters; `error` only when set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFinished {
    pub status: RunStatus,
    pub stop_reason: Option<StopReason>,
    pub steps: u64,
    pub tool_calls: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `run_resumed`: a paused or interrupted run continues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResumed {
    #[serde(skip)]
    pub step_id: Option<String>,
    pub from_status: RunStatus,
    pub from_state_version: u64,
    pub events_after_checkpoint: u64,
    pub discarded_history_records: usize,
}

/// `child_stopped`: the shell child of the step a killed process was
/// running was still running, and its process group was killed before the
/// run went on (or was cancelled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildStopped {
    #[serde(skip)]
    pub step_id: Option<String>,
    pub pid: u32,
}

/// `condition_evaluated`: a `when` condition and whether it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConditionEvaluated {
    #[serde(skip)]
    pub step_id: String,
    pub value: String,
    pub test: String,
    pub holds: bool,
}

/// `step_skipped`: a false `when` skipped the step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSkipped {
    #[serde(skip)]
    pub step_id: String,
    pub reason: String,
    pub condition: String,
}

/// `approval_requested`: the resolved action is frozen; the run pauses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequested {
    #[serde(skip)]
    pub step_id: String,
    pub fingerprint: String,
    pub scope: String,
    pub risk: String,
    pub required_by: String,
    pub state_version: u64,
    pub action: Value,
}

/// `approval_granted`: `approve` recorded an approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalGranted {
    #[serde(skip)]
    pub step_id: String,
    pub fingerprint: String,
    pub scope: String,
    pub state_version: u64,
    pub approved_by: Option<String>,
    pub expires_at: String,
}

/// `approval_rejected`: `reject` ended the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRejected {
    #[serde(skip)]
    pub step_id: String,
    pub fingerprint: String,
    pub scope: String,
    pub reason: Option<String>,
}

/// `approval_verified`: `resume` checked the approval before running.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalVerified {
    #[serde(skip)]
    pub step_id: String,
    pub fingerprint: String,
    pub scope: String,
    pub state_version: u64,
}

/// `receipt_lookup`: a recovering keyed step looked its receipt up.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiptLookup {
    #[serde(skip)]
    pub step_id: String,
    pub idempotency_key: String,
    /// The receipt's state, `null` when there is none.
    pub found: Option<ReceiptState>,
    /// What the effect itself answered (`applied`, `not_applied`,
    /// `conflict`, `cannot_answer`), when it was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

/// `receipt_recorded`: a keyed effect completed and its receipt is durable.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiptRecorded {
    #[serde(skip)]
    pub step_id: String,
    pub idempotency_key: String,
    pub intent_digest: String,
    /// The receipt's link ([`crate::store::Receipt::link`]): which receipt,
    /// exactly, so that one swapped later fails verification.
    pub receipt_link: String,
}

/// `receipt_reused`: a completed receipt stood in for the effect.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiptReused {
    #[serde(skip)]
    pub step_id: String,
    pub idempotency_key: String,
    pub recovered: bool,
    /// The link of the receipt that stood in for the effect.
    pub receipt_link: String,
}

/// `reconciliation_recorded`: a write's outcome is unknown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReconciliationRecorded {
    #[serde(skip)]
    pub step_id: String,
    pub idempotency_key: String,
    pub reason: String,
}

/// `completion_verified`: the plan's `[[verify]]` checks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompletionVerified {
    pub passed: bool,
    pub checks: Vec<CheckOutcome>,
}

/// One `[[verify]]` check as `completion_verified` and the run's evidence
/// record it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutcome {
    /// What was checked, in words (``file `x` exists``).
    pub check: String,
    pub passed: bool,
    /// What the check saw: a byte count, a ticket's status, a receipt, or
    /// the error that made it fail.
    pub observed: Value,
    /// Where the evidence came from: `fresh_read`, `fresh_lookup` or
    /// `receipt_store`.
    pub source: String,
}

/// `reconciliation_settled`: a person said whether an uncertain write was
/// applied (`planrun reconcile`); the run continues from there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReconciliationSettled {
    #[serde(skip)]
    pub step_id: String,
    pub idempotency_key: Option<String>,
    pub intent_digest: String,
    pub applied: bool,
    pub settled_by: Option<String>,
    /// `--applied`: the link of the receipt the person's word became;
    /// `--not-applied`: `null`, the receipt is gone.
    pub receipt_link: Option<String>,
}

/// `run_cancelled`: `cancel` ended the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunCancelled {
    #[serde(skip)]
    pub step_id: Option<String>,
    pub from_status: RunStatus,
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn columns_follow_field_order_and_omit_absent_options() {
        let tool = StepDetails::Recorded(Map::from_iter([("exit_code".to_string(), json!(3))]));
        let event = Event::RetryAttemptFinished(AttemptFinished {
            step_id: "build".into(),
            kind: "shell".into(),
            attempt: 2,
            duration_ms: 1000,
            failure_class: None,
            error: None,
            tool,
        });
        let columns = event.columns().expect("serialisable");
        assert_eq!(columns.event_type, "retry_attempt_finished");
        assert_eq!(
            serde_json::to_string(&columns.details).expect("serialisable"),
            r#"{"kind":"shell","attempt":2,"duration_ms":1000,"exit_code":3}"#
        );
        assert_eq!((event.step_id(), event.status()), (Some("build"), "done"));
    }

    /// The three events no golden audit snapshot holds, pinned to the
    /// columns the hand-built maps wrote before the events were typed.
    #[test]
    fn events_without_a_golden_snapshot_keep_their_columns() {
        let cases = [
            (
                Event::BudgetExhausted(BudgetExhausted {
                    step_id: Some("loop".into()),
                    budget: "max_steps".into(),
                    limit: 2,
                    used: 2,
                }),
                "budget_exhausted",
                Some("loop"),
                "failed",
                r#"{"budget":"max_steps","limit":2,"used":2}"#,
            ),
            (
                Event::ReconciliationRecorded(ReconciliationRecorded {
                    step_id: "close".into(),
                    idempotency_key: "close-42".into(),
                    reason: "the write timed out".into(),
                }),
                "reconciliation_recorded",
                Some("close"),
                "uncertain",
                r#"{"idempotency_key":"close-42","reason":"the write timed out"}"#,
            ),
            (
                Event::RunCancelled(RunCancelled {
                    step_id: Some("deploy".into()),
                    from_status: RunStatus::Running,
                    reason: Some("by hand".into()),
                }),
                "run_cancelled",
                Some("deploy"),
                "cancelled",
                r#"{"from_status":"running","reason":"by hand"}"#,
            ),
        ];
        for (event, event_type, step_id, status, details) in cases {
            let columns = event.columns().expect("serialisable");
            assert_eq!(columns.event_type, event_type);
            assert_eq!((event.step_id(), event.status()), (step_id, status), "{event_type}");
            assert_eq!(serde_json::to_string(&columns.details).expect("serialisable"), details, "{event_type}");
        }
    }

    #[test]
    fn a_null_option_stays_when_the_line_always_had_the_key() {
        let event =
            Event::RunCancelled(RunCancelled { step_id: None, from_status: RunStatus::WaitingApproval, reason: None });
        let columns = event.columns().expect("serialisable");
        assert_eq!(columns.event_type, "run_cancelled");
        assert_eq!(
            serde_json::to_string(&columns.details).expect("serialisable"),
            r#"{"from_status":"waiting_approval","reason":null}"#
        );
        assert_eq!((event.step_id(), event.status()), (None, "cancelled"));
    }
}
