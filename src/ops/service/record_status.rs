//! The statuses of the service's records: [`BridgeStatus`] (a bridge
//! run's `state.json`) and [`ControllerStatus`] (a controller run's
//! `controller_state.json`). They live apart from the run managers so that
//! the records' typed events (`bridge_event`, `controller_event`) can name
//! them without importing the managers that write those events.

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
            BridgeStatus::Done => "done",
            BridgeStatus::Failed => "failed",
            BridgeStatus::Rejected => "rejected",
            BridgeStatus::Cancelled => "cancelled",
        }
    }
}

/// Where a controller run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerStatus {
    Running,
    /// The last bridge run waits for a person's approval.
    WaitingApproval,
    Done,
    Failed,
}

impl ControllerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ControllerStatus::Running => "running",
            ControllerStatus::WaitingApproval => "waiting_approval",
            ControllerStatus::Done => "done",
            ControllerStatus::Failed => "failed",
        }
    }
}
