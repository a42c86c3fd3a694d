//! Opening an existing run for a control command: the run id is checked,
//! the records verified and the run locked before anything changes.

use std::path::Path;

use crate::model::RunStatus;
use crate::runtime::RuntimeEnv;
use crate::runtime::control::error::ControlError;
use crate::store::{LoadedRun, PendingAction, RunDir, RunState, validate_run_id};

/// Opens and verifies run `run_id`.
pub(super) fn open(workspace: &Path, run_id: &str, env: &RuntimeEnv) -> Result<(RunDir, LoadedRun), ControlError> {
    validate_run_id(run_id)?;
    Ok(RunDir::open(workspace, run_id, env.sealer.clone())?)
}

/// Opens a run that must be waiting for approval, with its pending action.
pub(super) fn open_waiting(
    workspace: &Path,
    run_id: &str,
    env: &RuntimeEnv,
) -> Result<(RunDir, RunState, PendingAction), ControlError> {
    let (run_dir, loaded) = open(workspace, run_id, env)?;
    let state = loaded.state;
    let Some(pending) = state.pending_action.clone().filter(|_| state.status == RunStatus::WaitingApproval) else {
        return Err(ControlError::Refused(format!(
            "run `{run_id}` is not waiting for approval (status `{}`)",
            state.status
        )));
    };
    Ok((run_dir, state, pending))
}
