//! `state.json`: the compact checkpoint.

use serde::{Deserialize, Serialize};

use crate::model::RunStatus;

/// The checkpoint written after every step. Its size does not depend on how
/// many steps have run: the plan is referenced (and stored once in
/// `plan.json`), the history lives in `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunState {
    pub run_id: String,
    /// The goal text that routed to the plan; `null` for `--plan` runs.
    pub goal: Option<String>,
    pub plan: PlanRef,
    pub status: RunStatus,
    /// Why the run stopped: `finish_step`, `end_of_plan`, `step_failed`,
    /// `budget_exhausted`; `null` while running.
    pub stop_reason: Option<String>,
    /// The step being executed (or last executed while the run goes on);
    /// `null` once the run has ended.
    pub current_step_id: Option<String>,
    pub cursor: Cursor,
    pub counters: Counters,
    /// The message of the failure that ended the run, if any.
    pub error: Option<String>,
    /// One more per checkpoint.
    pub state_version: u64,
    /// `seq` of the last audit event written before this checkpoint.
    pub audit_seq: u64,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

/// Which plan and policy the run executes, with digests of their files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRef {
    pub id: String,
    pub path: String,
    pub sha256: String,
    pub policy: String,
    pub policy_path: String,
    pub policy_sha256: String,
    pub step_count: usize,
}

/// Where the run goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Cursor {
    /// Index of the next step to run (equal to the step count at the end).
    pub next_step: usize,
    /// Attempts already made on that step.
    pub attempts: u32,
}

/// Budget counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    /// Distinct steps started (retries not counted).
    pub steps: u64,
    /// Tool invocations (every attempt of a step other than `finish`).
    pub tool_calls: u64,
    /// Failed attempts since the last success.
    pub consecutive_failures: u64,
    /// Lines in `history.jsonl`.
    pub history_records: u64,
}
