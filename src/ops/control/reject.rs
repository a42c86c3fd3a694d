//! `reject`: ends a waiting run `rejected`; the frozen action never runs.

use std::path::Path;

use crate::model::RunStatus;
use crate::ops::control::error::ControlError;
use crate::ops::control::open::open_waiting;
use crate::ops::{EndedRun, OpsError};
use crate::runtime::event::{ApprovalRejected, Event};
use crate::runtime::{Recorder, RuntimeEnv};
use crate::store::{ApprovalDecision, RunId, RunState, Verdict};

/// Ends a waiting run `rejected`: the frozen action never runs.
pub fn reject(
    workspace: &Path,
    run_id: &RunId,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<EndedRun, OpsError> {
    Ok(EndedRun { state: reject_run(workspace, run_id, reason, env)? })
}

fn reject_run(
    workspace: &Path,
    run_id: &RunId,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunState, ControlError> {
    let (run_dir, loaded, pending) = open_waiting(workspace, run_id, env)?;
    let mut state = loaded.state;
    let mut recorder = Recorder::new(run_dir, env.clock.as_ref());
    recorder.emit(Event::ApprovalRejected(ApprovalRejected {
        step_id: pending.step_id.clone(),
        fingerprint: pending.fingerprint.clone(),
        scope: pending.scope.clone(),
        reason: reason.clone(),
    }))?;
    recorder.record_decision(ApprovalDecision {
        step_id: pending.step_id.clone(),
        fingerprint: pending.fingerprint.clone(),
        state_version: pending.state_version,
        scope: pending.scope.clone(),
        decided_by: None,
        verdict: Verdict::Rejected { reason: reason.clone() },
    })?;
    let error = match &reason {
        Some(reason) => format!("step `{}` was rejected: {reason}", pending.step_id),
        None => format!("step `{}` was rejected", pending.step_id),
    };
    recorder.end_by_person(&mut state, RunStatus::Rejected, error)?;
    Ok(state)
}
