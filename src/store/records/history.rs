//! `history.jsonl`: one record per step attempt, hash-chained — a view of
//! the step records the run's log holds (see `head.rs`).
//!
//! The lines are chained with [`Sealer::chain`] (keyed under
//! `PLANRUN_HMAC_KEY`); the link after the last covered line is in the
//! sealed checkpoint (`history_hash`), so an edited, removed, re-ordered or
//! inserted record among those the checkpoint covers is refused on load.
//! The view is written without a sync: the log is the durable record, and
//! a view behind it is written again from it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{FailureClass, StepDetails};
use crate::store::Sealer;

/// How a step attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepRecordStatus {
    Done,
    Failed,
    /// A `when` condition was false.
    Skipped,
}

/// A step result: one attempt of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRecord {
    pub step_id: String,
    pub kind: String,
    pub status: StepRecordStatus,
    /// 1-based attempt that produced this record.
    pub attempt: u32,
    /// Set on failed records, `null` on done ones.
    pub failure_class: Option<FailureClass>,
    /// The resolved action that ran (templates rendered); `null` when
    /// resolution itself failed.
    pub action: Option<Value>,
    /// What the step printed, failed or not (a shell step's stdout, capped
    /// at `max_output_bytes`; the output a failed `expect` refused).
    pub output_text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_json: Option<Value>,
    /// The end of a program's stderr (`tools::STDERR_TAIL_BYTES`), failed
    /// or not; absent for kinds without stderr and in records written
    /// before it was kept (so that their chain links stay the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_text: Option<String>,
    pub error: Option<String>,
    /// Facts from the tool and the policy (decision, rule, program, exit code).
    pub details: StepDetails,
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
}

/// The chain link after `lines` (each without its newline), from `None`.
pub(crate) fn history_chain<'l>(sealer: &Sealer, lines: impl IntoIterator<Item = &'l str>) -> Option<String> {
    lines.into_iter().fold(None, |previous, line| Some(sealer.chain(previous.as_deref(), line.as_bytes())))
}
