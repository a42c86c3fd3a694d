//! `planrun worker`: takes up the runs of its workspace that a database
//! store holds for nobody — interrupted ones (their process died and its
//! lease expired) and approved ones waiting to be resumed — and drives each
//! as `resume` does: claiming its lease (a new fencing token), verifying
//! its records, recovering from receipts, and giving the lease back at the
//! end or at the next approval gate.
//!
//! Each run is tried once per checkpoint: a run the worker could not
//! continue (an expired approval, changed files) is not tried again until
//! its `state_version` moves. A run another worker claimed first is
//! skipped. Queued runs, concurrency within one worker and LISTEN/NOTIFY
//! wake-ups come next (see docs/scale-out.md).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use crate::ops::{OpsError, RunOutcome};
use crate::runtime::{ControlError, NoProgress, ResumeRequest, RuntimeEnv};
use crate::store::StoreError;

/// What the worker is asked to do.
#[derive(Debug, Clone)]
pub struct WorkerInput {
    pub workspace: PathBuf,
    /// One pass over the runnable runs, then return.
    pub once: bool,
    /// How long to wait between passes.
    pub poll: Duration,
}

/// One run the worker took up, and how it went.
#[derive(Debug)]
pub struct WorkedRun {
    pub run_id: String,
    pub outcome: Result<RunOutcome, OpsError>,
}

/// Whether `error` says another process holds the run now.
fn taken_by_another(error: &OpsError) -> bool {
    matches!(
        error,
        OpsError::Control(ControlError::Store(StoreError::Locked { .. } | StoreError::LeaseLost { .. }))
            | OpsError::Records(StoreError::Locked { .. } | StoreError::LeaseLost { .. })
    )
}

/// Works runs until stopped (or after one pass with `once`), calling
/// `report` for each run taken up; returns how many were.
pub fn work(input: &WorkerInput, env: &RuntimeEnv, report: &mut dyn FnMut(&WorkedRun)) -> Result<usize, OpsError> {
    let store = env.store(&input.workspace);
    let mut tried: HashSet<(String, u64)> = HashSet::new();
    let mut worked = 0;
    loop {
        for runnable in store.runnable_runs()? {
            if !tried.insert((runnable.run_id.clone(), runnable.state_version)) {
                continue;
            }
            let request = ResumeRequest {
                workspace: input.workspace.clone(),
                run_id: runnable.run_id.clone(),
                allow_changed_files: false,
            };
            let outcome = crate::ops::resume(request, env, &mut NoProgress);
            if outcome.as_ref().is_err_and(taken_by_another) {
                continue;
            }
            worked += 1;
            report(&WorkedRun { run_id: runnable.run_id, outcome });
        }
        if input.once {
            return Ok(worked);
        }
        std::thread::sleep(input.poll);
    }
}
