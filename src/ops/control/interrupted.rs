//! A run whose start was interrupted before its first checkpoint (the
//! store's [`StoreError::Interrupted`]): nothing ran, and its log says
//! what it was started with (`run_started`: the plan file, its policy, the
//! goal; maybe `plan_created`: the files' digests). `resume` starts it
//! again under the same id from that, exactly as `planrun --plan <file>
//! --run-id <id>` would; `cancel` records it as a run that was cancelled
//! before its first step, through the same start and the recorder, so the
//! record is sealed and chained like any other and the id is taken.
//!
//! A log that names nothing usable (no whole first line, not a
//! `run_started`), or a plan file that is gone or no longer valid, is bad
//! input (exit 2) and nothing is written.

use std::path::Path;

use crate::load::Loader;
use crate::model::{Plan, Policy};
use crate::ops::control::error::ControlError;
use crate::runtime::event::{PlanCreated, RunStarted};
use crate::runtime::{Progress, RunError, RunOutcome, RunRequest, RuntimeEnv, execute, execute_cancelled};
use crate::store::{AuditEvent, RunId, StoreError};

/// Where an interrupted start is started again: its workspace, and the
/// folder its plan's policy is found in (as `--policies` for `--plan`),
/// `None` where no such folder is known (the service).
pub(super) struct StartDirs<'a> {
    pub workspace: &'a Path,
    pub policies: Option<&'a Path>,
}

/// What the log of an interrupted start says it was started with.
struct InterruptedStart {
    run_id: RunId,
    started: RunStarted,
    /// `None` when the start was killed before `plan_created`.
    created: Option<PlanCreated>,
}

impl InterruptedStart {
    /// The start `error` is about; any other error is passed on, and a log
    /// that names nothing to start from is [`ControlError::Interrupted`].
    fn read(error: StoreError) -> Result<InterruptedStart, ControlError> {
        let StoreError::Interrupted { id, known, events, .. } = error else {
            return Err(error.into());
        };
        let details = |event: Option<&AuditEvent>, name: &str| {
            event.filter(|event| event.event_type == name).and_then(|event| serde_json::to_value(&event.details).ok())
        };
        let started = details(events.first(), "run_started").and_then(|value| serde_json::from_value(value).ok());
        let Some(started) = started else {
            return Err(ControlError::Interrupted(format!(
                "run `{id}` was interrupted before its first checkpoint and {known}: it names no plan to start \
                 again from; nothing had run and nothing was written: the id is free, start a run with \
                 `planrun --plan <file> --run-id {id}`"
            )));
        };
        let created = details(events.get(1), "plan_created").and_then(|value| serde_json::from_value(value).ok());
        let run_id = RunId::parse(&id).map_err(RunError::InvalidRunId)?;
        Ok(InterruptedStart { run_id, started, created })
    }

    /// Loads the plan file the log names and the policy it names from
    /// `policies`, as `--plan` does; refuses a plan that is not the one
    /// the log names, and (unless `allow_changed`) files whose digests
    /// differ from the ones `plan_created` recorded.
    fn load(&self, policies: &Path, allow_changed: bool) -> Result<(Plan, Policy), ControlError> {
        let (id, path) = (&self.run_id, &self.started.plan_path);
        let mut loader = Loader::new();
        let loaded = loader.load_plan_with_policy(Path::new(path), policies).filter(|_| !loader.has_errors());
        let Some((plan, policy)) = loaded else {
            let first = loader.sorted_diagnostics().into_iter().find(|diagnostic| diagnostic.is_error());
            let why = first.map_or_else(|| "it has errors".to_string(), |diagnostic| diagnostic.message.clone());
            return Err(ControlError::Interrupted(format!(
                "run `{id}` was interrupted before its first checkpoint; its log names plan `{path}` (policy `{}` \
                 in `{}`), which cannot be loaded now: {why}; nothing had run and nothing was written: restore the \
                 file, or start a run with `planrun --plan <file> --run-id {id}`",
                self.started.policy,
                policies.display()
            )));
        };
        if plan.id != self.started.plan_id || policy.name != self.started.policy {
            return Err(ControlError::Refused(format!(
                "`{path}` is no longer the plan `{}` under policy `{}` that run `{id}` was started with",
                self.started.plan_id, self.started.policy
            )));
        }
        let changed = self.created.as_ref().is_some_and(|created| {
            created.plan_sha256 != plan.source.sha256 || created.policy_sha256 != policy.source.sha256
        });
        if changed && !allow_changed {
            return Err(ControlError::Refused(format!(
                "plan `{path}` or its policy changed since run `{id}` was started; starting it again would run \
                 another plan than the one it was started with (pass `--allow-changed-files` to start it anyway)"
            )));
        }
        Ok((plan, policy))
    }

    fn request<'a>(&self, (plan, policy): &'a (Plan, Policy), workspace: &Path) -> RunRequest<'a> {
        RunRequest {
            plan,
            policy,
            goal: self.started.goal.clone(),
            inputs: self.started.inputs.clone(),
            run_id: Some(self.run_id.clone()),
            workspace: workspace.to_path_buf(),
        }
    }
}

/// `resume` of the interrupted start `error` is about: starts it again
/// under the same id from what its log names (`policies` is where the
/// plan's policy is found, as for `--plan`).
pub(super) fn restart(
    dirs: StartDirs<'_>,
    error: StoreError,
    allow_changed: bool,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, ControlError> {
    let StartDirs { workspace, policies } = dirs;
    let start = InterruptedStart::read(error)?;
    let Some(policies) = policies else {
        return Err(ControlError::Interrupted(format!(
            "run `{}` was interrupted before its first checkpoint; it is started again from the command line \
             (`planrun resume {}`), where the policies folder is known",
            start.run_id, start.run_id
        )));
    };
    let files = start.load(policies, allow_changed)?;
    progress.restarting(start.run_id.as_str(), &start.started.plan_path);
    Ok(execute(start.request(&files, workspace), env, progress)?)
}

/// `cancel` of the interrupted start `error` is about: records it as a
/// run that was cancelled before its first step. The plan is loaded as
/// for `resume` (its copy is part of the record); changed files are
/// accepted, since nothing will run from them.
pub(super) fn cancel(
    workspace: &Path,
    policies: &Path,
    error: StoreError,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunOutcome, ControlError> {
    let start = InterruptedStart::read(error)?;
    let files = start.load(policies, true)?;
    Ok(execute_cancelled(start.request(&files, workspace), reason, env)?)
}
