//! Read a run back from its verified records (`planrun show`, `--json`).

use std::path::Path;

use serde_json::Value;

use crate::ops::OpsError;
use crate::runtime::RuntimeEnv;
use crate::store::{LoadedRun, full_state, validate_run_id};

/// Every record of `run_id`, read through the run store and verified (a
/// run whose records fail verification is an error, never shown as true).
pub fn show(workspace: &Path, run_id: &str, env: &RuntimeEnv) -> Result<LoadedRun, OpsError> {
    validate_run_id(run_id)?;
    Ok(env.store(workspace).read_run(run_id)?)
}

/// The full seed-shaped state of `run_id` (plan with step statuses, history).
pub fn full_state_json(workspace: &Path, run_id: &str, env: &RuntimeEnv) -> Result<Value, OpsError> {
    show(workspace, run_id, env).map(|run| full_state(&run))
}
