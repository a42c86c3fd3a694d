//! `approve`: records an approval bound to the frozen action, without
//! running it (`resume` runs it). The frozen action is first checked
//! against the plan's step at the cursor rendered from the verified record.

use std::path::Path;
use std::time::Duration;

use crate::ops::control::error::ControlError;
use crate::ops::control::held_run::HeldRun;
use crate::ops::control::open::open_waiting;
use crate::ops::{ExitStatus, OpsError};
use crate::runtime::approval::{ApprovalClaims, check_claims};
use crate::runtime::event::{ApprovalGranted, Event};
use crate::runtime::interpreter::check_story;
use crate::runtime::{ChangedFiles, Recorder, RuntimeEnv, format_timestamp, load_files};
use crate::store::{Approval, ApprovalDecision, PendingAction, RunId, Verdict};
use jiff::{SignedDuration, Timestamp};

/// Who approves what, for how long.
pub struct ApproveInput<'a> {
    pub workspace: &'a Path,
    pub run_id: &'a RunId,
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

/// Records an approval bound to the frozen action's fingerprint, the state
/// version that froze it, its scope, and an expiry (the run continues with
/// `resume`).
pub fn approve(input: ApproveInput<'_>, env: &RuntimeEnv) -> Result<Approved, OpsError> {
    Ok(record_approval(input, env)?)
}

fn record_approval(input: ApproveInput<'_>, env: &RuntimeEnv) -> Result<Approved, ControlError> {
    let ApproveInput { workspace, run_id, claims, expires_in, approved_by } = input;
    let (run_dir, loaded, pending) = open_waiting(workspace, run_id, env)?;
    // A person approves what the plan at the cursor renders to from the
    // verified record, not whatever a re-sealed checkpoint says was frozen.
    let (plan, _) = load_files(&loaded.state, ChangedFiles::RefuseApprove, workspace)?;
    check_story(&plan, &loaded.state, &loaded.history)?;
    let mut state = loaded.state;
    check_claims(&pending, claims)?;
    let now = env.clock.now();
    let signed = SignedDuration::try_from(expires_in).unwrap_or(SignedDuration::MAX);
    let expires_at: Timestamp = now.checked_add(signed).unwrap_or(Timestamp::MAX);
    let approval = Approval {
        fingerprint: pending.fingerprint.clone(),
        state_version: pending.state_version,
        scope: pending.scope.clone(),
        approved_by,
        approved_at: format_timestamp(now),
        expires_at: format_timestamp(expires_at),
    };
    let mut recorder = Recorder::new(run_dir, env.clock.as_ref());
    recorder.emit(Event::ApprovalGranted(ApprovalGranted {
        step_id: pending.step_id.clone(),
        fingerprint: approval.fingerprint.clone(),
        scope: approval.scope.clone(),
        state_version: approval.state_version,
        approved_by: approval.approved_by.clone(),
        expires_at: approval.expires_at.clone(),
    }))?;
    recorder.record_decision(ApprovalDecision {
        step_id: pending.step_id.clone(),
        fingerprint: approval.fingerprint.clone(),
        state_version: approval.state_version,
        scope: approval.scope.clone(),
        decided_by: approval.approved_by.clone(),
        verdict: Verdict::Approved { expires_in },
    })?;
    state.approval = Some(approval.clone());
    recorder.checkpoint(&mut state)?;
    Ok(Approved { pending, approval, held: HeldRun { handle: recorder.into_run() } })
}
