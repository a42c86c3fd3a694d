//! Read a run back from its verified records (`planrun show`, `--json`).

use std::path::Path;

use serde_json::Value;

use crate::ops::OpsError;
use crate::ops::runs::driven;
use crate::runtime::{RuntimeEnv, read_checked};
use crate::store::{Holder, LoadedRun, RunId, RunStore, full_state};

/// The run id that names the newest run when no run is called that.
pub const LATEST: &str = "latest";

/// Every record of `run_id`, read through the run store and verified as
/// `verify` verifies it, story checks included (a run whose records fail
/// verification is an error, never shown as true).
/// `latest` is the newest run, unless a run has that id (an exact id always
/// wins).
pub fn show(workspace: &Path, run_id: &RunId, env: &RuntimeEnv) -> Result<LoadedRun, OpsError> {
    let store = env.store(workspace);
    let run_id = resolve(store.as_ref(), run_id.as_str(), workspace)?;
    Ok(read_checked(store.as_ref(), &run_id, workspace)?.0)
}

/// Run `run` of `workspace` (as [`show`] read it), with who drives it
/// when it is recorded as `running`: the holder of its lock or lease, or
/// [`Holder::Nobody`] when it was interrupted (read again in that case:
/// it may have ended meanwhile).
pub fn driven_run(workspace: &Path, run: LoadedRun, env: &RuntimeEnv) -> Result<(LoadedRun, Option<Holder>), OpsError> {
    Ok(driven(env.store(workspace).as_ref(), run)?)
}

/// The full state of `run_id` as `show --json` prints it (plan with step statuses, history).
pub fn full_state_json(workspace: &Path, run_id: &RunId, env: &RuntimeEnv) -> Result<Value, OpsError> {
    show(workspace, run_id, env).map(|run| full_state(&run))
}

/// `run_id`, or for `latest` with no run of that name the newest run's id.
pub(crate) fn resolve(store: &dyn RunStore, run_id: &str, workspace: &Path) -> Result<String, OpsError> {
    if run_id != LATEST {
        return Ok(run_id.to_string());
    }
    // Newest first: an exact `latest` wins, else the first listed run.
    let listed = store.list_runs()?;
    let exact = listed.iter().find(|listing| listing.run_id == LATEST);
    match exact.or(listed.first()) {
        Some(listing) => Ok(listing.run_id.clone()),
        None => Err(OpsError::Usage(format!(
            "no runs yet in workspace `{}`: `latest` names the newest run",
            workspace.display()
        ))),
    }
}
