//! Cancel a run that waits for approval or was interrupted (before its
//! first checkpoint included: then it is recorded as a run cancelled
//! before its first step): it ends `cancelled` and nothing more runs.

use std::path::Path;

use crate::ops::{EndedRun, OpsError};
use crate::runtime::RuntimeEnv;

/// Cancels `run_id` of `workspace`; `policies` is where the plan's policy
/// is found for a start interrupted before its first checkpoint.
pub fn cancel(
    (workspace, policies): (&Path, &Path),
    run_id: &str,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<EndedRun, OpsError> {
    Ok(EndedRun { state: crate::runtime::cancel((workspace, policies), run_id, reason, env)? })
}
