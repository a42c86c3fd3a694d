//! `cancel`: ends a run that is waiting for approval or was interrupted.

use std::path::Path;

use serde_json::{Map, json};

use crate::model::RunStatus;
use crate::runtime::control::error::ControlError;
use crate::runtime::control::open::open;
use crate::runtime::recorder::Recorder;
use crate::runtime::{EventType, RuntimeEnv};
use crate::store::RunState;

/// Ends a run that is waiting for approval or was interrupted: status
/// `cancelled`, nothing more runs. An ended run is refused.
pub fn cancel(
    workspace: &Path,
    run_id: &str,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunState, ControlError> {
    let (run_dir, loaded) = open(workspace, run_id, env)?;
    let mut state = loaded.state;
    if state.status.is_terminal() {
        return Err(ControlError::Refused(format!("run `{run_id}` has already ended with status `{}`", state.status)));
    }
    let mut recorder = Recorder::new(run_dir, run_id, env.clock.as_ref());
    let mut details = Map::new();
    details.insert("from_status".into(), json!(state.status));
    details.insert("reason".into(), json!(reason));
    let step_id = state.current_step_id.clone();
    recorder.emit(EventType::RunCancelled, step_id.as_deref(), Some("cancelled"), details)?;
    let error = match &reason {
        Some(reason) => format!("cancelled: {reason}"),
        None => "cancelled".to_string(),
    };
    recorder.end_by_person(&mut state, RunStatus::Cancelled, error)?;
    Ok(state)
}
