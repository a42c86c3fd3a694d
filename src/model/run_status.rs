//! The status of a run as recorded in `state.json`.

use serde::{Deserialize, Serialize};

/// Where a run stands. `running` and `waiting_approval` are not terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    /// Paused before a step that needs a person's approval; `pending_action`
    /// holds the frozen action.
    WaitingApproval,
    Done,
    Failed,
    /// A person rejected the pending action; nothing was executed for it.
    Rejected,
    /// A person abandoned a paused or interrupted run (`planrun cancel`).
    Cancelled,
    /// Paused: an agent step asked a person a question (`planrun answer`).
    WaitingInput,
}

impl RunStatus {
    /// Every status, in the order a run can reach them.
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Running,
        RunStatus::WaitingApproval,
        RunStatus::Done,
        RunStatus::Failed,
        RunStatus::Rejected,
        RunStatus::Cancelled,
        RunStatus::WaitingInput,
    ];

    /// The status named `name` as `state.json` spells it.
    pub fn parse(name: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|status| status.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::WaitingApproval => "waiting_approval",
            RunStatus::Done => "done",
            RunStatus::Failed => "failed",
            RunStatus::Rejected => "rejected",
            RunStatus::Cancelled => "cancelled",
            RunStatus::WaitingInput => "waiting_input",
        }
    }

    /// Whether the run waits for a person: an approval or an answer.
    pub fn is_paused(self) -> bool {
        matches!(self, RunStatus::WaitingApproval | RunStatus::WaitingInput)
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Running | RunStatus::WaitingApproval | RunStatus::WaitingInput)
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
