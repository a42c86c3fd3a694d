//! `resume`: continues a run that is `waiting_approval` (with a valid
//! approval) or `running` (interrupted by a crash), with the plan and policy
//! files it started with; a start interrupted before its first checkpoint
//! is started again (`interrupted.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use crate::confine::Workspace;
use crate::ops::OpsError;
use crate::ops::control::error::ControlError;
use crate::ops::control::held_run::HeldRun;
use crate::ops::control::interrupted::{self, StartDirs};
use crate::ops::control::open::open_in;
use crate::runtime::interpreter::{Interpreter, ResumeError, check_story};
use crate::runtime::{ChangedFiles, Progress, RunError, RunOutcome, RunSecrets, RuntimeEnv, load_files};
use crate::store::{LoadedRun, RunHandle, RunId, RunStore, StoreError};

/// What `resume` needs.
pub struct ResumeRequest {
    pub workspace: PathBuf,
    pub run_id: RunId,
    /// Continue even though the plan or policy file changed since the run
    /// started (the user says so explicitly with `--allow-changed-files`).
    pub allow_changed_files: bool,
    /// Where the plan's policy is found when an interrupted start is
    /// started again (as `--policies` for `--plan`); `None` where no such
    /// folder is known (the service), and such a start is refused.
    pub policies: Option<PathBuf>,
    /// A person's answer to the question of a `waiting_input` run
    /// (`planrun answer`); a run that asks none refuses one.
    pub answer: Option<String>,
}

/// A run opened (and held) for `resume`, with its records read back.
struct OpenedRun {
    run: Box<dyn RunHandle>,
    loaded: LoadedRun,
}

/// Continues a run that is `waiting_approval` (with a valid approval) or
/// `running` (interrupted by a crash); the outcome's exit status is the
/// run's.
pub fn resume(request: ResumeRequest, env: &RuntimeEnv, progress: &mut dyn Progress) -> Result<RunOutcome, OpsError> {
    let store = env.store(&request.workspace);
    let (run, loaded) = match open_in(store.as_ref(), &request.run_id) {
        Ok(opened) => opened,
        Err(ControlError::Store(error @ StoreError::Interrupted { .. })) => {
            let dirs = StartDirs { workspace: &request.workspace, policies: request.policies.as_deref() };
            return Ok(interrupted::restart(dirs, error, request.allow_changed_files, env, progress)?);
        }
        Err(error) => return Err(error.into()),
    };
    Ok(continue_run(&request, store, OpenedRun { run, loaded }, env, progress)?)
}

/// Continues run `held` that this process still holds since it approved it
/// in the same request (the service's approve), so that no other process
/// takes it first: read back strictly, then as [`resume`].
pub fn resume_held(
    request: ResumeRequest,
    held: HeldRun,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, OpsError> {
    let store = env.store(&request.workspace);
    let loaded = store.read_run(held.run_id()).map_err(ControlError::from)?;
    let stored = held.handle.stored_version();
    if loaded.state.state_version != stored {
        let id = held.run_id().to_string();
        let conflict = StoreError::VersionConflict { id, expected: stored, found: loaded.state.state_version };
        return Err(ControlError::from(conflict).into());
    }
    Ok(continue_run(&request, store, OpenedRun { run: held.handle, loaded }, env, progress)?)
}

/// The part of [`resume`] after the run is open: refuse an ended run,
/// check the files and the story, and drive the interpreter.
fn continue_run(
    request: &ResumeRequest,
    store: Arc<dyn RunStore>,
    opened: OpenedRun,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, ControlError> {
    let OpenedRun { run, loaded } = opened;
    let state = &loaded.state;
    if state.status.is_terminal() {
        // An ended run is not continued; its story is still checked, so a
        // forged ending says so rather than passing as a plain refusal.
        if let Ok((plan, _)) = load_files(state, ChangedFiles::Allow, &request.workspace) {
            check_story(&plan, state, &loaded.history)?;
        }
        return Err(ControlError::Refused(format!(
            "run `{}` has already ended with status `{}` ({})",
            state.run_id,
            state.status,
            state.stop_reason.as_ref().map_or("-", crate::model::StopReason::as_str)
        )));
    }
    match (state.status, &request.answer) {
        (crate::model::RunStatus::WaitingInput, None) => {
            return Err(ControlError::Refused(format!(
                "run `{}` waits for a person's answer to its question: `planrun answer {} TEXT`",
                state.run_id, state.run_id
            )));
        }
        (status, Some(_)) if status != crate::model::RunStatus::WaitingInput => {
            return Err(ControlError::Refused(format!(
                "run `{}` asks no question (status `{status}`): there is nothing to answer",
                state.run_id
            )));
        }
        _ => {}
    }
    let changed_files = if request.allow_changed_files { ChangedFiles::Allow } else { ChangedFiles::RefuseResume };
    let (plan, policy) = load_files(state, changed_files, &request.workspace)?;
    RunError::check_sandbox(&policy)?;
    check_story(&plan, state, &loaded.history)?;
    let workspace = Workspace::open(&request.workspace, &policy.files).map_err(|source| {
        ControlError::Store(StoreError::Io { action: "open", path: request.workspace.clone(), source })
    })?;
    // Secret values are never stored: a resumed run reads them again.
    let secrets = RunSecrets::resolve(&plan, &policy).map_err(RunError::Secret)?;
    let discarded = (loaded.discarded_history, loaded.discarded_events);
    let interpreter = Interpreter::resumed(&plan, &policy, &workspace, run, store, loaded, env).with_secrets(secrets);
    let state = interpreter.resume(discarded, request.answer.as_deref(), progress).map_err(|error| match error {
        ResumeError::Approval(invalid) => ControlError::from(invalid),
        ResumeError::Store(store) => ControlError::Store(store),
    })?;
    Ok(RunOutcome { state })
}

/// Whether `text` may be a person's answer to an agent's question: 1 to
/// `MAX_ANSWER_BYTES` bytes, not blank.
pub fn check_answer(text: &str) -> Result<(), String> {
    let max = crate::runtime::interpreter::MAX_ANSWER_BYTES;
    if text.trim().is_empty() {
        return Err("the answer is empty".to_string());
    }
    if text.len() > max {
        return Err(format!("the answer is {} bytes; at most {max} are accepted", text.len()));
    }
    Ok(())
}
