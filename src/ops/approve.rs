//! Approve the action a run waits on, bound to its fingerprint, state
//! version, scope and an expiry.

use std::path::Path;
use std::time::Duration;

use crate::ops::{ExitStatus, OpsError};
use crate::runtime::approval::ApprovalClaims;
use crate::runtime::{ApproveOutcome, HeldRun, RuntimeEnv};
use crate::store::{Approval, PendingAction};

/// Who approves what, for how long.
pub struct ApproveInput<'a> {
    pub workspace: &'a Path,
    pub run_id: &'a str,
    /// What the person reviewed; each given claim must match the frozen action.
    pub claims: &'a ApprovalClaims,
    pub expires_in: Duration,
    pub approved_by: Option<String>,
}

/// The approval that was recorded, with the action it approves.
#[derive(Debug)]
pub struct Approved {
    pub pending: PendingAction,
    pub approval: Approval,
    /// The run, still held by this process: [`crate::ops::resume_held`]
    /// continues it; dropping it gives the run back.
    pub held: HeldRun,
}

impl Approved {
    /// An approval recorded is a command that did what was asked.
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::Done
    }
}

/// Records the approval (the run continues with `resume`).
pub fn approve(input: ApproveInput<'_>, env: &RuntimeEnv) -> Result<Approved, OpsError> {
    let ApproveOutcome { pending, approval, held } =
        crate::runtime::approve(input.workspace, input.run_id, input.claims, input.expires_in, input.approved_by, env)?;
    Ok(Approved { pending, approval, held })
}
