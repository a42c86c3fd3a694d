//! Continuing and deciding on existing runs: `resume`, `approve`, `reject`.
//!
//! Each opens the run with [`RunDir::open`], which verifies the checkpoint
//! envelope, the audit chain and their agreement, and locks the run; a run
//! that fails verification is refused before anything changes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, json};

use crate::confine::Workspace;
use crate::diag::{Diagnostic, SourceMap};
use crate::load::Loader;
use crate::model::{Plan, Policy, RunStatus};
use crate::runtime::approval::{ApprovalClaims, ApprovalInvalid, check_claims};
use crate::runtime::interpreter::{Interpreter, ResumeError};
use crate::runtime::{EventType, Progress, RunOutcome, RuntimeEnv, format_timestamp, records};
use crate::store::{Approval, PendingAction, RunDir, RunIdError, RunState, StoreError, validate_run_id};

/// Why a control command did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Bad run id (exit 2).
    #[error(transparent)]
    InvalidRunId(#[from] RunIdError),
    /// The records are missing, unreadable, edited or inconsistent (exit 2
    /// for bad records, 1 for a run locked by another process).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The plan or policy files the run was started with are invalid now
    /// (exit 2).
    #[error("the run's plan or policy files are invalid")]
    Files { sources: SourceMap, diagnostics: Vec<Diagnostic> },
    /// The request was understood and refused (exit 1): the run is not
    /// waiting, an approval does not match, the files changed.
    #[error("{0}")]
    Refused(String),
}

impl From<ApprovalInvalid> for ControlError {
    fn from(error: ApprovalInvalid) -> Self {
        ControlError::Refused(error.to_string())
    }
}

impl ControlError {
    /// Whether the input itself was bad (exit 2) rather than refused (exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            ControlError::InvalidRunId(_) | ControlError::Files { .. } => true,
            ControlError::Store(error) => {
                matches!(error, StoreError::NotFound { .. } | StoreError::Tampered { .. } | StoreError::Corrupt { .. })
            }
            ControlError::Refused(_) => false,
        }
    }
}

/// What `resume` needs.
pub struct ResumeRequest {
    pub workspace: PathBuf,
    pub run_id: String,
    /// Continue even though the plan or policy file changed since the run
    /// started (the user says so explicitly with `--allow-changed-files`).
    pub allow_changed_files: bool,
}

fn open(workspace: &Path, run_id: &str, env: &RuntimeEnv) -> Result<(RunDir, crate::store::LoadedRun), ControlError> {
    validate_run_id(run_id)?;
    Ok(RunDir::open(workspace, run_id, env.sealer.clone())?)
}

/// Continues a run that is `waiting_approval` (with a valid approval) or
/// `running` (interrupted by a crash).
pub fn resume(
    request: ResumeRequest,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, ControlError> {
    let (run_dir, loaded) = open(&request.workspace, &request.run_id, env)?;
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
    let discarded = loaded.discarded_history;
    let path = run_dir.path.clone();
    let interpreter = Interpreter::resumed(&plan, &policy, &workspace, run_dir, loaded, env);
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

/// Opens a run that must be waiting for approval, with its pending action.
fn open_waiting(
    workspace: &Path,
    run_id: &str,
    env: &RuntimeEnv,
) -> Result<(RunDir, RunState, PendingAction), ControlError> {
    let (run_dir, loaded) = open(workspace, run_id, env)?;
    let state = loaded.state;
    let Some(pending) = state.pending_action.clone().filter(|_| state.status == RunStatus::WaitingApproval) else {
        return Err(ControlError::Refused(format!(
            "run `{run_id}` is not waiting for approval (status `{}`)",
            state.status
        )));
    };
    Ok((run_dir, state, pending))
}

/// What `approve` recorded.
pub struct ApproveOutcome {
    pub pending: PendingAction,
    pub approval: Approval,
}

/// Records an approval bound to the frozen action's fingerprint, the state
/// version that froze it, its scope, and an expiry.
pub fn approve(
    workspace: &Path,
    run_id: &str,
    claims: &ApprovalClaims,
    expires_in: Duration,
    approved_by: Option<String>,
    env: &RuntimeEnv,
) -> Result<ApproveOutcome, ControlError> {
    let (mut run_dir, mut state, pending) = open_waiting(workspace, run_id, env)?;
    check_claims(&pending, claims)?;
    let now = env.clock.now();
    let expires_in = SignedDuration::try_from(expires_in).unwrap_or(SignedDuration::MAX);
    let expires_at: Timestamp = now.checked_add(expires_in).unwrap_or(Timestamp::MAX);
    let approval = Approval {
        fingerprint: pending.fingerprint.clone(),
        state_version: pending.state_version,
        scope: pending.scope.clone(),
        approved_by,
        approved_at: format_timestamp(now),
        expires_at: format_timestamp(expires_at),
    };
    let mut details = Map::new();
    details.insert("fingerprint".into(), json!(approval.fingerprint));
    details.insert("scope".into(), json!(approval.scope));
    details.insert("state_version".into(), json!(approval.state_version));
    details.insert("approved_by".into(), json!(approval.approved_by));
    details.insert("expires_at".into(), json!(approval.expires_at));
    let clock = env.clock.as_ref();
    records::emit(
        &mut run_dir,
        clock,
        run_id,
        EventType::ApprovalGranted,
        Some(&pending.step_id),
        Some("ok"),
        details,
    )?;
    state.approval = Some(approval.clone());
    records::checkpoint(&mut run_dir, clock, &mut state)?;
    Ok(ApproveOutcome { pending, approval })
}

/// Ends a waiting run `rejected`: the frozen action never runs.
pub fn reject(
    workspace: &Path,
    run_id: &str,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunState, ControlError> {
    let (mut run_dir, mut state, pending) = open_waiting(workspace, run_id, env)?;
    let clock = env.clock.as_ref();
    let mut details = Map::new();
    details.insert("fingerprint".into(), json!(pending.fingerprint));
    details.insert("scope".into(), json!(pending.scope));
    details.insert("reason".into(), json!(reason));
    records::emit(
        &mut run_dir,
        clock,
        run_id,
        EventType::ApprovalRejected,
        Some(&pending.step_id),
        Some("rejected"),
        details,
    )?;
    let error = match &reason {
        Some(reason) => format!("step `{}` was rejected: {reason}", pending.step_id),
        None => format!("step `{}` was rejected", pending.step_id),
    };
    records::end_by_person(&mut run_dir, clock, &mut state, RunStatus::Rejected, error)?;
    Ok(state)
}

/// Ends a run that is waiting for approval or was interrupted: status
/// `cancelled`, nothing more runs. An ended run is refused.
pub fn cancel(
    workspace: &Path,
    run_id: &str,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunState, ControlError> {
    let (mut run_dir, loaded) = open(workspace, run_id, env)?;
    let mut state = loaded.state;
    if state.status.is_terminal() {
        return Err(ControlError::Refused(format!("run `{run_id}` has already ended with status `{}`", state.status)));
    }
    let clock = env.clock.as_ref();
    let mut details = Map::new();
    details.insert("from_status".into(), json!(state.status));
    details.insert("reason".into(), json!(reason));
    let step_id = state.current_step_id.clone();
    records::emit(
        &mut run_dir,
        clock,
        run_id,
        EventType::RunCancelled,
        step_id.as_deref(),
        Some("cancelled"),
        details,
    )?;
    let error = match &reason {
        Some(reason) => format!("cancelled: {reason}"),
        None => "cancelled".to_string(),
    };
    records::end_by_person(&mut run_dir, clock, &mut state, RunStatus::Cancelled, error)?;
    Ok(state)
}
