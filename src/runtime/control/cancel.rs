//! `cancel`: ends a run that is waiting for approval or was interrupted.

use std::path::Path;

use crate::model::RunStatus;
use crate::runtime::RuntimeEnv;
use crate::runtime::control::error::ControlError;
use crate::runtime::control::open::open;
use crate::runtime::event::{Event, RunCancelled};
use crate::runtime::recorder::Recorder;
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
    let mut recorder = Recorder::new(run_dir, env.clock.as_ref());
    recorder.emit(Event::RunCancelled(RunCancelled {
        step_id: state.current_step_id.clone(),
        from_status: state.status,
        reason: reason.clone(),
    }))?;
    let error = match &reason {
        Some(reason) => format!("cancelled: {reason}"),
        None => "cancelled".to_string(),
    };
    recorder.end_by_person(&mut state, RunStatus::Cancelled, error)?;
    Ok(state)
}
