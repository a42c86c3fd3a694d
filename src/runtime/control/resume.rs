//! `resume`: continues a run that is `waiting_approval` (with a valid
//! approval) or `running` (interrupted by a crash), with the plan and policy
//! files it started with.

use std::path::{Path, PathBuf};

use crate::confine::Workspace;
use crate::load::Loader;
use crate::model::{Plan, Policy};
use crate::runtime::control::error::ControlError;
use crate::runtime::control::open::open_in;
use crate::runtime::interpreter::{Interpreter, ResumeError};
use crate::runtime::{Progress, RunOutcome, RuntimeEnv};
use crate::store::{RunState, StoreError};

/// What `resume` needs.
pub struct ResumeRequest {
    pub workspace: PathBuf,
    pub run_id: String,
    /// Continue even though the plan or policy file changed since the run
    /// started (the user says so explicitly with `--allow-changed-files`).
    pub allow_changed_files: bool,
}

/// Continues a run that is `waiting_approval` (with a valid approval) or
/// `running` (interrupted by a crash).
pub fn resume(
    request: ResumeRequest,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, ControlError> {
    let store = env.store(&request.workspace);
    let (run, loaded) = open_in(store.as_ref(), &request.run_id)?;
    let state = &loaded.state;
    if state.status.is_terminal() {
        return Err(ControlError::Refused(format!(
            "run `{}` has already ended with status `{}` ({})",
            state.run_id,
            state.status,
            state.stop_reason.as_deref().unwrap_or("-")
        )));
    }
    let (plan, policy) = load_files(state, request.allow_changed_files)?;
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

/// Loads the plan and policy a run started with, from the paths it
/// recorded, and refuses files whose digest changed unless allowed.
fn load_files(state: &RunState, allow_changed: bool) -> Result<(Plan, Policy), ControlError> {
    let mut loader = Loader::new();
    let plan = loader.load_plan(Path::new(&state.plan.path));
    let policy = loader.load_policy(Path::new(&state.plan.policy_path));
    let (Some(plan), Some(policy)) = (plan, policy) else {
        let (sources, diagnostics) = (loader.sources().clone(), loader.diagnostics().to_vec());
        return Err(ControlError::Files { sources, diagnostics });
    };
    let mut changed = Vec::new();
    if plan.source.sha256 != state.plan.sha256 {
        changed.push(format!("plan `{}`", state.plan.path));
    }
    if policy.source.sha256 != state.plan.policy_sha256 {
        changed.push(format!("policy `{}`", state.plan.policy_path));
    }
    if !changed.is_empty() && !allow_changed {
        return Err(ControlError::Refused(format!(
            "{} changed since run `{}` started; resuming would run steps that were not part of it (pass `--allow-changed-files` to continue anyway)",
            changed.join(" and "),
            state.run_id
        )));
    }
    if plan.id != state.plan.id || plan.steps.len() != state.plan.step_count {
        return Err(ControlError::Refused(format!(
            "`{}` is no longer the plan `{}` with {} steps that the run started",
            state.plan.path, state.plan.id, state.plan.step_count
        )));
    }
    Ok((plan, policy))
}
