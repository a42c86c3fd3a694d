//! Continue a run that waits for approval (with a valid approval) or was
//! interrupted.

use crate::ops::{OpsError, RunOutcome};
use crate::runtime::{HeldRun, Progress, ResumeRequest, RuntimeEnv};

/// Resumes `request.run_id`; the outcome's exit status is the run's.
pub fn resume(request: ResumeRequest, env: &RuntimeEnv, progress: &mut dyn Progress) -> Result<RunOutcome, OpsError> {
    Ok(crate::runtime::resume(request, env, progress)?.into())
}

/// Resumes run `held`, which this process still holds since it approved
/// it (the service's approve), so that no other process takes it first.
pub fn resume_held(
    request: ResumeRequest,
    held: HeldRun,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, OpsError> {
    Ok(crate::runtime::resume_held(request, held, env, progress)?.into())
}
