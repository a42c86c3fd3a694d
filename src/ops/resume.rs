//! Continue a run that waits for approval (with a valid approval) or was
//! interrupted.

use crate::ops::{OpsError, RunOutcome};
use crate::runtime::{Progress, ResumeRequest, RuntimeEnv};

/// Resumes `request.run_id`; the outcome's exit status is the run's.
pub fn resume(request: ResumeRequest, env: &RuntimeEnv, progress: &mut dyn Progress) -> Result<RunOutcome, OpsError> {
    Ok(crate::runtime::resume(request, env, progress)?.into())
}
