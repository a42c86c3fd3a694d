//! Read a run back from its verified records (`planrun show`, `--json`).

use std::path::Path;

use serde_json::Value;

use crate::ops::OpsError;
use crate::store::{LoadedRun, Sealer, full_state, load_run, validate_run_id};

/// Every record of `run_id`, verified (a run whose records fail
/// verification is an error, never shown as true).
pub fn show(workspace: &Path, run_id: &str, sealer: &Sealer) -> Result<LoadedRun, OpsError> {
    validate_run_id(run_id)?;
    Ok(load_run(workspace, run_id, sealer)?)
}

/// The full seed-shaped state of `run_id` (plan with step statuses, history).
pub fn full_state_json(workspace: &Path, run_id: &str, sealer: &Sealer) -> Result<Value, OpsError> {
    show(workspace, run_id, sealer).map(|run| full_state(&run))
}
