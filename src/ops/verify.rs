//! `planrun verify <run_id>`: checks one run's records end to end and says
//! what it found.
//!
//! The check is the store's strict read ([`crate::store::RunStore::read_run`]):
//! the checkpoint's seal (SHA-256, or HMAC-SHA256 under `PLANRUN_HMAC_KEY`),
//! strict JSON and the state's invariants, the audit log's hash chain up to
//! the line the checkpoint covers, the history chain up to the record it
//! covers, the plan copy's link, that every view agrees with the log, and
//! that the receipts the log names (by `receipt_link`) are exactly the ones
//! it used. Then every check `approve` and `resume` make of the story the
//! records tell ([`crate::runtime::read_checked`]: each step before the
//! cursor has its record, a frozen action is the plan's step at the cursor,
//! a `done` run has its evidence bound to what ran), each failure named.
//! Lines past the checkpoint are a crash tail: counted and reported, never
//! trusted; a view behind the log is reported. `resume`, `show` and
//! `runs` refuse a run for the same reasons with the same exit status (2).

use std::path::Path;

use crate::model::RunStatus;
use crate::ops::{ExitStatus, OpsError};
use crate::runtime::{RuntimeEnv, StoryCheck, read_checked};
use crate::store::{RunId, StoreError};

/// What `verify` found.
#[derive(Debug)]
pub enum Verification {
    /// Every record the checkpoint covers verifies.
    Verified(VerifiedRun),
    /// A record fails verification: edited, removed, re-ordered, forged or
    /// torn (the store's reason).
    Failed { run_id: String, reason: String },
}

/// A run whose records verify, and what they hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedRun {
    pub run_id: String,
    pub status: RunStatus,
    pub state_version: u64,
    /// Audit events covered by the checkpoint.
    pub events: u64,
    /// History records covered by the checkpoint.
    pub history_records: u64,
    /// Whether the records are keyed (HMAC) rather than plain SHA-256.
    pub keyed: bool,
    /// Audit lines past the checkpoint (a crash tail, not trusted).
    pub tail_events: u64,
    /// History lines past the checkpoint (likewise).
    pub tail_history: usize,
    /// The views (`history.jsonl`, `plan.json`, `state.json`) that are
    /// behind the log, in words: what a power cut leaves, written again
    /// from the log when the run is next opened for writing.
    pub views_behind: Vec<String>,
    /// Whether the story checks ran (they cannot without the plan file
    /// the run started with, unchanged).
    pub story: StoryCheck,
}

impl Verification {
    /// 0 verified, 2 a record fails verification.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            Verification::Verified(_) => ExitStatus::Done,
            Verification::Failed { .. } => ExitStatus::InvalidInput,
        }
    }
}

/// Verifies run `run_id` of `workspace`. An unknown or invalid run id, or a
/// record that cannot be read at all, is an [`OpsError`] (exit 2 too).
pub fn verify(workspace: &Path, run_id: &RunId, env: &RuntimeEnv) -> Result<Verification, OpsError> {
    let store = env.store(workspace);
    let resolved = crate::ops::show::resolve(store.as_ref(), run_id.as_str(), workspace)?;
    let run_id = resolved.as_str();
    match read_checked(store.as_ref(), run_id, workspace) {
        Ok((run, story)) => Ok(Verification::Verified(VerifiedRun {
            run_id: run.state.run_id.clone(),
            status: run.state.status,
            state_version: run.state.state_version,
            events: run.audit_tail.seq,
            history_records: run.history.len() as u64,
            keyed: env.sealer.is_keyed(),
            tail_events: run.discarded_events,
            tail_history: run.discarded_history,
            views_behind: run.views_behind(),
            story,
        })),
        Err(StoreError::Tampered { id, reason }) => Ok(Verification::Failed { run_id: id, reason }),
        Err(StoreError::Corrupt { path, line, message }) => Ok(Verification::Failed {
            run_id: run_id.to_string(),
            reason: format!("`{}` line {line} is not a valid record: {message}", path.display()),
        }),
        Err(StoreError::Unreadable { id, path, source }) => {
            Ok(Verification::Failed { run_id: id, reason: format!("cannot read `{}`: {source}", path.display()) })
        }
        Err(error) => Err(error.into()),
    }
}
