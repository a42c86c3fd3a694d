//! A bridge run's audit events (`bridge/runs/<run_id>/audit.jsonl`): one
//! [`BridgeEvent`] enum, a typed struct per event for its `details`.
//!
//! Serialised as the record holds them: the variant's snake-case name is
//! `event_type`, its struct is `details` (field order is key order; an
//! `Option` that is `None` is written as `null`, never left out), and the
//! `status` column comes from [`BridgeEvent`]'s [`RecordEvent::status`],
//! derived from the details where they decide it. The approval events
//! (`approval_granted`, `resume_refused`, `run_resumed`,
//! `approval_rejected`) and `answer_given` are written by the HTTP front end
//! (`server/approvals.rs`) to the same record. To add an event: a struct here with its details in the
//! order they are written, a variant, and its arm in `status`.

use serde::Serialize;

use crate::model::RunStatus;
use crate::ops::service::adapters::AdapterMode;
use crate::ops::service::guard::GuardViolation;
use crate::ops::service::record_status::BridgeStatus;
use crate::store::RecordEvent;

/// Every event a bridge run's record holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event_type", content = "details", rename_all = "snake_case")]
pub enum BridgeEvent {
    RunCreated(RunCreated),
    InstructionGenerated(InstructionGenerated),
    PromptBlocked(PromptBlocked),
    TaskSent(TaskSent),
    ResponseReceived(ResponseReceived),
    ApprovalRequested(ApprovalRequested),
    AgentRunObserved(AgentRunObserved),
    ApprovalGranted(ApprovalGranted),
    ResumeRefused(ResumeRefused),
    RunResumed(RunResumed),
    ApprovalRejected(ApprovalRejected),
    InputRequested(InputRequested),
    AnswerGiven(AnswerGiven),
    RunInterrupted(RunInterrupted),
    RunFinished(RunFinished),
}

impl RecordEvent for BridgeEvent {
    fn status(&self) -> Option<&'static str> {
        Some(match self {
            BridgeEvent::RunCreated(_) | BridgeEvent::InstructionGenerated(_) => "created",
            BridgeEvent::PromptBlocked(_) => "failed",
            BridgeEvent::TaskSent(_) | BridgeEvent::ResponseReceived(_) | BridgeEvent::RunResumed(_) => "running",
            BridgeEvent::ApprovalRequested(_) | BridgeEvent::ApprovalGranted(_) | BridgeEvent::ResumeRefused(_) => {
                "waiting_approval"
            }
            // The agent run's status as observed; `null` while it has none.
            BridgeEvent::AgentRunObserved(event) => return event.agent_final_status.map(RunStatus::as_str),
            BridgeEvent::ApprovalRejected(_) => "rejected",
            BridgeEvent::InputRequested(_) | BridgeEvent::AnswerGiven(_) => "waiting_input",
            BridgeEvent::RunInterrupted(_) => "failed",
            BridgeEvent::RunFinished(event) => event.status.as_str(),
        })
    }
}

/// `run_created`: the record exists.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunCreated {
    pub goal: String,
    pub adapter: String,
}

/// `instruction_generated`: the instruction for the adapter is built.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstructionGenerated {
    /// In characters.
    pub instruction_len: usize,
}

/// `prompt_blocked`: the prompt guard refused the goal (bridge and
/// controller records alike).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptBlocked {
    pub rule: &'static str,
    pub reason: String,
}

impl From<GuardViolation> for PromptBlocked {
    fn from(violation: GuardViolation) -> Self {
        PromptBlocked { rule: violation.rule, reason: violation.reason }
    }
}

/// `task_sent`: the instruction went to the adapter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSent {
    pub adapter: String,
    pub instruction_len: usize,
}

/// `response_received`: the adapter answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResponseReceived {
    pub mode: AdapterMode,
    pub exit_code: Option<i32>,
    /// In characters.
    pub response_len: usize,
    pub agent_run_id: Option<String>,
    pub error: Option<String>,
}

/// `approval_requested`: the agent run paused before a gated step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequested {
    pub agent_run_id: Option<String>,
    pub step_id: String,
    pub kind: String,
    pub scope: String,
    pub fingerprint: String,
    pub state_version: u64,
}

/// `agent_run_observed`: the agent run was continued outside the service.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentRunObserved {
    pub agent_run_id: String,
    pub agent_final_status: Option<RunStatus>,
    pub reason: String,
}

/// `run_interrupted`: the service that drove the run stopped before it
/// ended (a crash, a kill); the scan of the next service ends it `failed`
/// (`run_finished` follows) without sending it to the adapter again.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInterrupted {
    /// The status its record was left in (`created`, `queued`, `running`).
    pub last_status: BridgeStatus,
    pub reason: String,
}

/// `approval_granted`: the approval is recorded on the agent run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalGranted {
    pub agent_run_id: String,
    pub step_id: String,
    pub fingerprint: String,
    pub scope: String,
    pub state_version: u64,
    pub approved_by: Option<String>,
    pub expires_at: String,
}

/// `resume_refused`: the approval is recorded but the resume was refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResumeRefused {
    pub agent_run_id: String,
    pub code: &'static str,
    pub error: String,
}

/// `run_resumed`: the approved agent run ran on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResumed {
    pub agent_run_id: String,
    pub exit_code: Option<i32>,
    pub agent_final_status: Option<RunStatus>,
    pub response_len: usize,
}

/// `approval_rejected`: a person rejected the pending action.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRejected {
    pub agent_run_id: String,
    /// The pending action's (`null` if the run named none).
    pub step_id: Option<String>,
    pub fingerprint: Option<String>,
    pub reason: Option<String>,
}

/// `input_requested`: the agent run's agent step asked a person a question
/// (the model's text: untrusted).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InputRequested {
    pub agent_run_id: Option<String>,
    pub step_id: String,
    pub turn: u32,
    pub question: String,
}

/// `answer_given`: a person's answer was recorded on the agent run (the
/// text itself is sealed in the agent run's records, as its turn's
/// observation).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerGiven {
    pub agent_run_id: String,
    pub step_id: String,
    pub turn: u32,
    /// In bytes.
    pub answer_bytes: usize,
}

/// `run_finished`: the bridge run ended (its `status` is the column's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunFinished {
    pub status: BridgeStatus,
    pub adapter_mode: AdapterMode,
    pub agent_run_id: Option<String>,
    pub agent_final_status: Option<RunStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(event: &BridgeEvent) -> Result<String, serde_json::Error> {
        serde_json::to_string(event)
    }

    #[test]
    fn nones_are_written_as_null_in_field_order() -> Result<(), serde_json::Error> {
        let event = BridgeEvent::ApprovalRejected(ApprovalRejected {
            agent_run_id: "agent-br-1".into(),
            step_id: None,
            fingerprint: Some("f".into()),
            reason: None,
        });
        assert_eq!(
            line(&event)?,
            r#"{"event_type":"approval_rejected","details":{"agent_run_id":"agent-br-1","step_id":null,"fingerprint":"f","reason":null}}"#
        );
        assert_eq!(event.status(), Some("rejected"));
        Ok(())
    }

    #[test]
    fn status_follows_the_details() -> Result<(), serde_json::Error> {
        let observed = |agent_final_status| {
            BridgeEvent::AgentRunObserved(AgentRunObserved {
                agent_run_id: "agent-br-1".into(),
                agent_final_status,
                reason: "r".into(),
            })
        };
        assert_eq!(observed(Some(RunStatus::Done)).status(), Some("done"));
        assert_eq!(observed(None).status(), None);
        let finished = BridgeEvent::RunFinished(RunFinished {
            status: BridgeStatus::Cancelled,
            adapter_mode: AdapterMode::Stub,
            agent_run_id: None,
            agent_final_status: None,
        });
        assert_eq!(finished.status(), Some("cancelled"));
        assert_eq!(
            line(&finished)?,
            r#"{"event_type":"run_finished","details":{"status":"cancelled","adapter_mode":"stub","agent_run_id":null,"agent_final_status":null}}"#
        );
        Ok(())
    }
}
