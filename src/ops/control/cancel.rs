//! `cancel`: ends a run that is waiting for approval or was interrupted
//! (before its first checkpoint included), or withdraws a queued one.

use std::path::Path;

use crate::ops::control::error::ControlError;
use crate::ops::control::interrupted;
use crate::ops::control::open::open;
use crate::ops::{EndedRun, OpsError};
use crate::runtime::{QueuedError, Recorder, RunError, RuntimeEnv, cancel_queued};
use crate::store::{RunId, RunState, StoreError};
use crate::tools::children::ChildNote;

/// Which run to cancel, and why.
pub struct CancelInput<'a> {
    pub workspace: &'a Path,
    /// Where the plan's policy is found for a start interrupted before its
    /// first checkpoint (as `--policies` for `--plan`).
    pub policies: &'a Path,
    pub run_id: &'a RunId,
    pub reason: Option<String>,
}

/// Ends a run that is waiting for approval or was interrupted: status
/// `cancelled`, nothing more runs. An ended run is refused. A start
/// interrupted before its first checkpoint is recorded as a run cancelled
/// before its first step (`interrupted.rs`); a queued run is withdrawn.
pub fn cancel(input: CancelInput<'_>, env: &RuntimeEnv) -> Result<EndedRun, OpsError> {
    Ok(EndedRun { state: cancel_run(input, env)? })
}

fn cancel_run(input: CancelInput<'_>, env: &RuntimeEnv) -> Result<RunState, ControlError> {
    let CancelInput { workspace, policies, run_id, reason } = input;
    let (run_dir, loaded) = match open(workspace, run_id, env) {
        Ok(opened) => opened,
        Err(ControlError::Store(error @ StoreError::Interrupted { .. })) => {
            return Ok(interrupted::cancel(workspace, policies, error, reason, env)?.state);
        }
        // Withdrawn from the queue: recorded as a run cancelled before its
        // first step, from what it was submitted with.
        Err(ControlError::Store(StoreError::Queued { .. })) => {
            return cancel_queued(workspace, run_id.as_str(), reason, env).map_err(|error| match error {
                // A worker starting it holds it (exit 1), as any held run.
                QueuedError::Run(RunError::Start(error)) => ControlError::Store(error),
                QueuedError::Run(error) => ControlError::Run(error),
                error @ QueuedError::Request { .. } => ControlError::Interrupted(error.to_string()),
            });
        }
        Err(error) => return Err(error),
    };
    let mut state = loaded.state;
    if state.status.is_terminal() {
        return Err(ControlError::Refused(format!("run `{run_id}` has already ended with status `{}`", state.status)));
    }
    // An interrupted run's step may have left its shell child running.
    let stopped = run_dir.child_note().map(ChildNote::new).and_then(|children| children.stop_left_over());
    let mut recorder = Recorder::new(run_dir, env.clock.as_ref());
    recorder.child_stopped(stopped, &state)?;
    recorder.cancel(&mut state, reason, "cancelled")?;
    Ok(state)
}
