//! `reject`: ends a waiting run `rejected`; the frozen action never runs.

use std::path::Path;

use serde_json::{Map, json};

use crate::model::RunStatus;
use crate::runtime::control::error::ControlError;
use crate::runtime::control::open::open_waiting;
use crate::runtime::recorder::Recorder;
use crate::runtime::{EventType, RuntimeEnv};
use crate::store::RunState;

/// Ends a waiting run `rejected`: the frozen action never runs.
pub fn reject(
    workspace: &Path,
    run_id: &str,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunState, ControlError> {
    let (run_dir, mut state, pending) = open_waiting(workspace, run_id, env)?;
    let mut recorder = Recorder::new(run_dir, run_id, env.clock.as_ref());
    let mut details = Map::new();
    details.insert("fingerprint".into(), json!(pending.fingerprint));
    details.insert("scope".into(), json!(pending.scope));
    details.insert("reason".into(), json!(reason));
    recorder.emit(EventType::ApprovalRejected, Some(&pending.step_id), Some("rejected"), details)?;
    let error = match &reason {
        Some(reason) => format!("step `{}` was rejected: {reason}", pending.step_id),
        None => format!("step `{}` was rejected", pending.step_id),
    };
    recorder.end_by_person(&mut state, RunStatus::Rejected, error)?;
    Ok(state)
}
