//! The statuses of the service's records: [`BridgeStatus`] (a bridge
//! run's `state.json`), [`ControllerStatus`] and [`ControllerStopReason`] (a
//! controller run's `controller_state.json`). They live apart from the run managers so that
//! the records' typed events (`bridge_event`, `controller_event`) can name
//! them without importing the managers that write those events.

use crate::model::open_words::open_words;
use serde::{Deserialize, Serialize};

/// Where a bridge run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeStatus {
    /// Accepted (`POST /runs` with `"wait": false`) and not driven yet: a
    /// task of the node that accepted it drives it, or, if that node died,
    /// the scan of any node of the workspace.
    Queued,
    Created,
    Running,
    /// Not final: the agent run is paused for approval.
    WaitingApproval,
    /// Not final: the agent run's agent step asked a person a question
    /// (`POST /runs/{id}/answer`).
    WaitingInput,
    Done,
    Failed,
    /// A person rejected the pending action.
    Rejected,
    /// A person cancelled the agent run while it waited (`planrun cancel`).
    Cancelled,
}

impl BridgeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BridgeStatus::Queued => "queued",
            BridgeStatus::Created => "created",
            BridgeStatus::Running => "running",
            BridgeStatus::WaitingApproval => "waiting_approval",
            BridgeStatus::WaitingInput => "waiting_input",
            BridgeStatus::Done => "done",
            BridgeStatus::Failed => "failed",
            BridgeStatus::Rejected => "rejected",
            BridgeStatus::Cancelled => "cancelled",
        }
    }

    /// Whether the bridge run's agent run waits for a person: an approval
    /// (`waiting_approval`) or an answer (`waiting_input`).
    pub fn waits_for_a_person(self) -> bool {
        matches!(self, BridgeStatus::WaitingApproval | BridgeStatus::WaitingInput)
    }
}

/// Where a controller run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerStatus {
    Running,
    /// The last bridge run waits for a person's approval.
    WaitingApproval,
    /// The last bridge run waits for a person's answer to its question.
    WaitingInput,
    Done,
    Failed,
}

impl ControllerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerStatus::Running => "running",
            ControllerStatus::WaitingApproval => "waiting_approval",
            ControllerStatus::WaitingInput => "waiting_input",
            ControllerStatus::Done => "done",
            ControllerStatus::Failed => "failed",
        }
    }
}

/// Why a controller run stopped (its state's and `controller_finished`'s
/// `stop_reason`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerStopReason {
    /// The decision was `stop`.
    DecisionStop,
    /// `max_iterations` bridge runs were started.
    MaxIterations,
    /// `max_consecutive_failures` runs in a row failed (or were repeated).
    ConsecutiveFailures,
    /// The guard refused the goal.
    PromptBlocked,
    /// The last bridge run waits for a person.
    WaitingApproval,
    /// The last bridge run waits for a person's answer.
    WaitingInput,
    /// The service driving it stopped before it ended.
    Interrupted,
    /// A reason this version does not write, kept as recorded.
    Other(String),
}

impl ControllerStopReason {
    const KNOWN: [ControllerStopReason; 7] = [
        ControllerStopReason::DecisionStop,
        ControllerStopReason::MaxIterations,
        ControllerStopReason::ConsecutiveFailures,
        ControllerStopReason::PromptBlocked,
        ControllerStopReason::WaitingApproval,
        ControllerStopReason::WaitingInput,
        ControllerStopReason::Interrupted,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            ControllerStopReason::DecisionStop => "decision_stop",
            ControllerStopReason::MaxIterations => "max_iterations",
            ControllerStopReason::ConsecutiveFailures => "consecutive_failures",
            ControllerStopReason::PromptBlocked => "prompt_blocked",
            ControllerStopReason::WaitingApproval => "waiting_approval",
            ControllerStopReason::WaitingInput => "waiting_input",
            ControllerStopReason::Interrupted => "interrupted",
            ControllerStopReason::Other(reason) => reason,
        }
    }
}

open_words!(ControllerStopReason);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_stop_reasons_keep_their_words() {
        for known in ControllerStopReason::KNOWN {
            let text = serde_json::to_string(&known).expect("json");
            assert_eq!(serde_json::from_str::<ControllerStopReason>(&text).expect("reason"), known);
        }
        let other: ControllerStopReason = serde_json::from_str(r#""made_up""#).expect("reason");
        assert_eq!(serde_json::to_string(&other).expect("json"), r#""made_up""#);
    }
}
