//! Cancel a run that waits for approval or was interrupted: it ends
//! `cancelled` and nothing more runs.

use std::path::Path;

use crate::ops::{EndedRun, OpsError};
use crate::runtime::RuntimeEnv;

pub fn cancel(workspace: &Path, run_id: &str, reason: Option<String>, env: &RuntimeEnv) -> Result<EndedRun, OpsError> {
    Ok(EndedRun { state: crate::runtime::cancel(workspace, run_id, reason, env)? })
}
