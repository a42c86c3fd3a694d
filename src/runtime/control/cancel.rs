//! `cancel`: ends a run that is waiting for approval or was interrupted
//! (before its first checkpoint included).

use std::path::Path;

use crate::runtime::RuntimeEnv;
use crate::runtime::control::error::ControlError;
use crate::runtime::control::interrupted;
use crate::runtime::control::open::open;
use crate::runtime::recorder::Recorder;
use crate::store::{RunState, StoreError};

/// Ends a run that is waiting for approval or was interrupted: status
/// `cancelled`, nothing more runs. An ended run is refused. A start
/// interrupted before its first checkpoint is recorded as a run cancelled
/// before its first step (`interrupted.rs`; `policies` is where its plan's
/// policy is found).
pub fn cancel(
    (workspace, policies): (&Path, &Path),
    run_id: &str,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunState, ControlError> {
    let (run_dir, loaded) = match open(workspace, run_id, env) {
        Ok(opened) => opened,
        Err(ControlError::Store(error @ StoreError::Interrupted { .. })) => {
            return Ok(interrupted::cancel((workspace, policies), error, reason, env)?.state);
        }
        Err(error) => return Err(error),
    };
    let mut state = loaded.state;
    if state.status.is_terminal() {
        return Err(ControlError::Refused(format!("run `{run_id}` has already ended with status `{}`", state.status)));
    }
    let mut recorder = Recorder::new(run_dir, env.clock.as_ref());
    recorder.cancel(&mut state, reason, "cancelled")?;
    Ok(state)
}
