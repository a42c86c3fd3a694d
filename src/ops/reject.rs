//! Reject the action a run waits on: the run ends `rejected` and the frozen
//! action never runs.

use std::path::Path;

use crate::ops::{EndedRun, OpsError};
use crate::runtime::RuntimeEnv;

pub fn reject(workspace: &Path, run_id: &str, reason: Option<String>, env: &RuntimeEnv) -> Result<EndedRun, OpsError> {
    Ok(EndedRun { state: crate::runtime::reject(workspace, run_id, reason, env)? })
}
