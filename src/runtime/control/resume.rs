//! `resume`: continues a run that is `waiting_approval` (with a valid
//! approval) or `running` (interrupted by a crash), with the plan and policy
//! files it started with; a start interrupted before its first checkpoint
//! is started again (`interrupted.rs`).

use std::path::PathBuf;

use crate::confine::Workspace;
use crate::runtime::control::error::ControlError;
use crate::runtime::control::files::load_files;
use crate::runtime::control::interrupted;
use crate::runtime::control::open::open_in;
use crate::runtime::interpreter::{Interpreter, ResumeError, check_story};
use crate::runtime::{Progress, RunOutcome, RuntimeEnv};
use crate::store::StoreError;

/// What `resume` needs.
pub struct ResumeRequest {
    pub workspace: PathBuf,
    pub run_id: String,
    /// Continue even though the plan or policy file changed since the run
    /// started (the user says so explicitly with `--allow-changed-files`).
    pub allow_changed_files: bool,
    /// Where the plan's policy is found when an interrupted start is
    /// started again (as `--policies` for `--plan`); `None` where no such
    /// folder is known (the service), and such a start is refused.
    pub policies: Option<PathBuf>,
}

/// Continues a run that is `waiting_approval` (with a valid approval) or
/// `running` (interrupted by a crash).
pub fn resume(
    request: ResumeRequest,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, ControlError> {
    let store = env.store(&request.workspace);
    let (run, loaded) = match open_in(store.as_ref(), &request.run_id) {
        Ok(opened) => opened,
        Err(ControlError::Store(error @ StoreError::Interrupted { .. })) => {
            let dirs = (request.workspace.as_path(), request.policies.as_ref());
            return interrupted::restart(dirs, error, request.allow_changed_files, env, progress);
        }
        Err(error) => return Err(error),
    };
    let state = &loaded.state;
    if state.status.is_terminal() {
        // An ended run is not continued; its story is still checked, so a
        // forged ending says so rather than passing as a plain refusal.
        if let Ok((plan, _)) = load_files(state, true) {
            check_story(&plan, state, &loaded.history)?;
        }
        return Err(ControlError::Refused(format!(
            "run `{}` has already ended with status `{}` ({})",
            state.run_id,
            state.status,
            state.stop_reason.as_deref().unwrap_or("-")
        )));
    }
    let (plan, policy) = load_files(state, request.allow_changed_files)?;
    check_story(&plan, state, &loaded.history)?;
    let workspace = Workspace::open(&request.workspace, &policy.files).map_err(|source| {
        ControlError::Store(StoreError::Io { action: "open", path: request.workspace.clone(), source })
    })?;
    let discarded = (loaded.discarded_history, loaded.discarded_events);
    let path = run.location().to_path_buf();
    let interpreter = Interpreter::resumed(&plan, &policy, &workspace, run, store, loaded, env);
    let state = interpreter.resume(discarded, progress).map_err(|error| match error {
        ResumeError::Approval(invalid) => ControlError::from(invalid),
        ResumeError::Store(store) => ControlError::Store(store),
    })?;
    Ok(RunOutcome { state, run_dir: path })
}
