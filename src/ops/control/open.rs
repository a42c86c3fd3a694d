//! Opening an existing run for a control command (its id was checked where
//! it came in: a [`RunId`]): the records verified and the run locked before anything changes.

use std::path::Path;

use crate::model::RunStatus;
use crate::ops::control::error::ControlError;
use crate::runtime::RuntimeEnv;
use crate::store::{LoadedRun, PendingAction, RunHandle, RunId, RunStore};

/// Opens and verifies run `run_id` in the environment's run store of
/// `workspace`.
pub(super) fn open(
    workspace: &Path,
    run_id: &RunId,
    env: &RuntimeEnv,
) -> Result<(Box<dyn RunHandle>, LoadedRun), ControlError> {
    open_in(env.store(workspace).as_ref(), run_id)
}

/// Opens and verifies run `run_id` in `store`.
pub(super) fn open_in(store: &dyn RunStore, run_id: &RunId) -> Result<(Box<dyn RunHandle>, LoadedRun), ControlError> {
    Ok(store.open_run(run_id.as_str())?)
}

/// Opens a run that must be waiting for approval, with its pending action.
pub(super) fn open_waiting(
    workspace: &Path,
    run_id: &RunId,
    env: &RuntimeEnv,
) -> Result<(Box<dyn RunHandle>, LoadedRun, PendingAction), ControlError> {
    let (run_dir, loaded) = open(workspace, run_id, env)?;
    let state = &loaded.state;
    let Some(pending) = state.pending_action.clone().filter(|_| state.status == RunStatus::WaitingApproval) else {
        return Err(ControlError::Refused(format!(
            "run `{run_id}` is not waiting for approval (status `{}`)",
            state.status
        )));
    };
    Ok((run_dir, loaded, pending))
}
