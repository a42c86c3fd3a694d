//! Preparing a run: run id, workspace and run folder, then the interpreter.

use std::fs;
use std::io;
use std::path::PathBuf;

use crate::confine::Workspace;
use crate::model::{InputValues, Plan, Policy};
use crate::runtime::interpreter::{Interpreter, NotStarted};
use crate::runtime::{IdKind, Progress, RunSecrets, RuntimeEnv, SecretError};
use crate::store::{RunHandle, RunId, RunIdError, RunState, StoreError, create_unique};

/// What to run.
pub struct RunRequest<'a> {
    pub plan: &'a Plan,
    pub policy: &'a Policy,
    /// The goal that routed to the plan (`None` for `--plan`).
    pub goal: Option<String>,
    /// The plan's inputs, already checked against its declarations
    /// ([`crate::model::resolve_inputs`]).
    pub inputs: InputValues,
    /// An explicit run id; `None` takes one from the [`RuntimeEnv`].
    pub run_id: Option<RunId>,
    /// The workspace folder; created when missing.
    pub workspace: PathBuf,
}

/// How a run ended (any status: a failed step is an outcome, not an error).
#[derive(Debug)]
pub struct RunOutcome {
    pub state: RunState,
}

/// Why a run could not start, or could not keep its records.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Bad `--run-id`; nothing ran.
    #[error(transparent)]
    InvalidRunId(#[from] RunIdError),
    /// The workspace cannot be created or opened; nothing ran.
    #[error("cannot open workspace `{}`: {source}", path.display())]
    Workspace {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The run folder could not be created (for example, the run exists);
    /// nothing ran.
    #[error(transparent)]
    Start(StoreError),
    /// Records could not be written during the run. The run stops at once:
    /// a step is never executed without its records.
    #[error("run records failed: {0}")]
    Records(#[from] StoreError),
    /// A secret the plan's steps use could not be read; nothing ran.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// The policy requires a sandbox (`shell.require_sandbox`) this
    /// process cannot apply; nothing ran.
    #[error("{0}")]
    SandboxRequired(String),
}

impl RunError {
    /// `Err` when `policy` requires a sandbox this process cannot apply:
    /// checked before anything of a run is created or continued.
    pub fn check_sandbox(policy: &Policy) -> Result<(), RunError> {
        crate::tools::sandbox::refusal(&policy.shell).map_or(Ok(()), |why| Err(RunError::SandboxRequired(why)))
    }
}

impl RunError {
    /// Whether nothing ran (bad input), as opposed to a failure mid-run.
    pub fn nothing_ran(&self) -> bool {
        !matches!(self, RunError::Records(_))
    }
}

/// Creates the run and runs it to its end.
pub fn execute(request: RunRequest<'_>, env: &RuntimeEnv, progress: &mut dyn Progress) -> Result<RunOutcome, RunError> {
    create_and(request, None, env, |interpreter| interpreter.run(progress))
}

/// Creates the run and records it `cancelled` before its first step (see
/// [`Interpreter::cancel_before_start`]).
pub fn execute_cancelled(
    request: RunRequest<'_>,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunOutcome, RunError> {
    create_and(request, None, env, |interpreter| interpreter.cancel_before_start(NotStarted::Interrupted, reason))
}

/// Creates the run (id, workspace, folder) — or takes `claimed`, the
/// handle of a queued run a worker claimed, which has no records yet — and
/// hands its interpreter to `go`. From there a claimed run is started
/// exactly as a created one.
pub(crate) fn create_and(
    request: RunRequest<'_>,
    claimed: Option<Box<dyn RunHandle>>,
    env: &RuntimeEnv,
    go: impl for<'r> FnOnce(Interpreter<'r>) -> Result<RunState, StoreError>,
) -> Result<RunOutcome, RunError> {
    // Before anything is created: a run that lacks a secret, or the
    // sandbox its policy requires, never starts.
    RunError::check_sandbox(request.policy)?;
    let secrets = RunSecrets::resolve(request.plan, request.policy)?;
    let workspace_error = |source| RunError::Workspace { path: request.workspace.clone(), source };
    fs::create_dir_all(&request.workspace).map_err(workspace_error)?;
    let workspace = Workspace::open(&request.workspace, &request.policy.files).map_err(workspace_error)?;
    let store = env.store(workspace.root());
    let create = |run_id: &str| store.create_run(run_id);
    let run = match (claimed, &request.run_id) {
        (Some(run), _) => Ok(run),
        (None, Some(run_id)) => create(run_id.as_str()),
        (None, None) => create_unique(env.ids.attempts(), || env.ids.next_id(IdKind::Run, env.clock.as_ref()), create)
            .map(|(_, run)| run),
    }
    .map_err(RunError::Start)?;
    let interpreter = Interpreter::new(request.plan, request.policy, &workspace, run, store, request.goal, env)
        .with_inputs(request.inputs)
        .with_secrets(secrets);
    let state = go(interpreter)?;
    Ok(RunOutcome { state })
}
