//! Queued runs: submitted without being driven (`planrun --plan FILE
//! --queue`, `POST /runs` with `"wait": false`), started later by a worker
//! of the workspace, on any machine that mounts it.
//!
//! The store keeps the submitted request as text ([`QueuedStart`], JSON):
//! the plan and policy files' paths and texts, as the submitter read them,
//! and the goal. A worker claims the oldest queued run
//! ([`crate::store::RunStore::claim_queued`]: one guarded statement, a new
//! fencing token), validates the copies again (never the files on its own
//! disk, which may differ or be missing) and starts the run exactly as
//! `planrun --plan FILE --run-id ID` does: the same records, byte for byte
//! under the test clock, since the plan's path and digest are the ones the
//! submitter read. `cancel` of a queued run claims it the same way and
//! records it as a run cancelled before its first step (nothing runs).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::load::{Copies, Loader};
use crate::model::{InputValues, Plan, Policy};
use crate::runtime::interpreter::NotStarted;
use crate::runtime::request::create_and;
use crate::runtime::{IdKind, Progress, RunError, RunOutcome, RunRequest, RuntimeEnv};
use crate::store::{QueuedClaim, RunId, RunState, create_unique};

/// The version of [`QueuedStart`] this planrun writes and reads.
const REQUEST_VERSION: u32 = 1;

/// What a queued run was submitted with (the store's `runs.request`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedStart {
    pub version: u32,
    /// The goal that routed to the plan (`None` for `--plan`).
    pub goal: Option<String>,
    /// The plan's inputs, checked when the run was submitted.
    #[serde(default, skip_serializing_if = "InputValues::is_empty")]
    pub inputs: InputValues,
    pub plan: FileCopy,
    pub policy: FileCopy,
    /// The policies `policy` extends (`extends`), nearest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<FileCopy>,
}

/// One file as the submitter read it: its path (as shown in records) and
/// its whole text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileCopy {
    pub path: String,
    pub text: String,
}

/// Why a queued run cannot be submitted or started.
#[derive(Debug, thiserror::Error)]
pub enum QueuedError {
    /// The run could not be queued, or (once claimed) started or recorded.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The stored request is not one this planrun reads, or its copies no
    /// longer validate (another planrun version): nothing ran.
    #[error("queued run `{run_id}` cannot be started from what it was submitted with: {reason}")]
    Request { run_id: String, reason: String },
}

impl QueuedStart {
    /// The request of `plan` under `policy`, whose files read `texts`
    /// (plan, policy: the texts the loader validated).
    pub fn new(plan: &Plan, policy: &Policy, texts: (String, String), goal: Option<String>) -> QueuedStart {
        QueuedStart {
            version: REQUEST_VERSION,
            goal,
            inputs: InputValues::new(),
            plan: FileCopy { path: plan.source.path.clone(), text: texts.0 },
            policy: FileCopy { path: policy.source.path.clone(), text: texts.1 },
            parents: Vec::new(),
        }
    }

    /// Validates the copies again, as `--plan` validates the files.
    fn load(&self, run_id: &str) -> Result<(Plan, Policy), QueuedError> {
        let refuse = |reason: String| QueuedError::Request { run_id: run_id.to_string(), reason };
        let copies: Copies = [&self.plan, &self.policy]
            .into_iter()
            .chain(&self.parents)
            .map(|copy| (PathBuf::from(&copy.path), copy.text.clone()))
            .collect();
        let policies = Path::new(&self.policy.path).parent().unwrap_or(Path::new("")).to_path_buf();
        let mut loader = Loader::from_copies(copies);
        let loaded = loader.load_plan_with_policy(Path::new(&self.plan.path), &policies);
        match loaded {
            Some(files) if !loader.has_errors() => Ok(files),
            _ => {
                let first = loader.sorted_diagnostics().into_iter().find(|diagnostic| diagnostic.is_error());
                Err(refuse(first.map_or_else(|| "its plan has errors".to_string(), |first| first.message.clone())))
            }
        }
    }

    fn parse(run_id: &str, text: &str) -> Result<QueuedStart, QueuedError> {
        let refuse = |reason: String| QueuedError::Request { run_id: run_id.to_string(), reason };
        let start: QueuedStart = crate::strict_json::from_str(text).map_err(|error| refuse(error.to_string()))?;
        if start.version != REQUEST_VERSION {
            return Err(refuse(format!(
                "it is a request of version {}, this planrun reads version {REQUEST_VERSION}",
                start.version
            )));
        }
        Ok(start)
    }
}

/// Queues `start` in the store of `workspace` as run `run_id` (or a fresh
/// id from the environment's generator); returns the id. Nothing runs.
pub fn submit(
    start: &QueuedStart,
    run_id: Option<RunId>,
    workspace: &Path,
    env: &RuntimeEnv,
) -> Result<String, RunError> {
    let request = serde_json::to_string(start).map_err(|_| {
        RunError::Start(crate::store::StoreError::Unsupported("the run's request cannot be serialised"))
    })?;
    let store = env.store(workspace);
    let queue = |id: &str| store.queue_run(id, &request);
    match run_id {
        Some(run_id) => queue(run_id.as_str()).map(|()| run_id.into_string()),
        None => create_unique(env.ids.attempts(), || env.ids.next_id(IdKind::Run, env.clock.as_ref()), queue)
            .map(|(id, ())| id),
    }
    .map_err(RunError::Start)
}

/// Starts claimed queued run `claim` in `workspace` and runs it to its end
/// or its first approval gate, as a run started directly.
pub fn start_claimed(
    claim: QueuedClaim,
    workspace: &Path,
    env: &RuntimeEnv,
    progress: &mut dyn Progress,
) -> Result<RunOutcome, QueuedError> {
    run_claimed(claim, workspace, env, |interpreter| interpreter.run(progress))
}

/// `cancel` of queued run `run_id`: claims it and records it as a run
/// cancelled before its first step.
pub fn cancel_queued(
    workspace: &Path,
    run_id: &str,
    reason: Option<String>,
    env: &RuntimeEnv,
) -> Result<RunState, QueuedError> {
    let claim = env.store(workspace).claim_queued_run(run_id).map_err(RunError::Start)?;
    let outcome =
        run_claimed(claim, workspace, env, |interpreter| interpreter.cancel_before_start(NotStarted::Queued, reason))?;
    Ok(outcome.state)
}

fn run_claimed(
    claim: QueuedClaim,
    workspace: &Path,
    env: &RuntimeEnv,
    go: impl for<'r> FnOnce(crate::runtime::interpreter::Interpreter<'r>) -> Result<RunState, crate::store::StoreError>,
) -> Result<RunOutcome, QueuedError> {
    let run_id = claim.handle.run_id().to_string();
    let start = QueuedStart::parse(&run_id, &claim.request)?;
    let (plan, policy) = start.load(&run_id)?;
    let request = RunRequest {
        plan: &plan,
        policy: &policy,
        goal: start.goal,
        inputs: start.inputs,
        run_id: Some(RunId::parse(&run_id).map_err(RunError::InvalidRunId)?),
        workspace: workspace.into(),
    };
    Ok(create_and(request, Some(claim.handle), env, go)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From the repository root, as the tests run.
    fn loaded() -> (Loader, (Plan, Policy)) {
        let mut loader = Loader::new();
        let files = loader
            .load_plan_with_policy(Path::new("plans/flow_pwd.toml"), Path::new("policies"))
            .expect("flow_pwd loads");
        (loader, files)
    }

    fn texts(loader: &Loader, plan: &Plan, policy: &Policy) -> (String, String) {
        let text = |path: &str| loader.sources().named(path).expect("loaded").text.clone();
        (text(&plan.source.path), text(&policy.source.path))
    }

    #[test]
    fn the_copies_load_as_the_files_did_and_nothing_else_is_read() {
        let (loader, (plan, policy)) = loaded();
        let start = QueuedStart::new(&plan, &policy, texts(&loader, &plan, &policy), Some("g".into()));
        let text = serde_json::to_string(&start).expect("serialise");
        let read = QueuedStart::parse("q", &text).expect("parse");
        assert_eq!(read, start);
        let (again, again_policy) = read.load("q").expect("the copies validate");
        assert_eq!(again.source, plan.source, "same path and digest: the same records");
        assert_eq!(again_policy.source, policy.source);
        assert_eq!(serde_json::to_value(&again).ok(), serde_json::to_value(&plan).ok(), "the same plan");

        // A copy is never completed from disk: a policy that is not among
        // the copies is not found, though `policies/default.toml` exists.
        let mut partial = start.clone();
        partial.policy.path = "elsewhere/default.toml".into();
        assert!(partial.load("q").is_ok(), "the policy copy is found under its own path, not on disk");
        partial.plan.text = partial.plan.text.replace("policy = \"default\"", "policy = \"other\"");
        assert!(matches!(partial.load("q"), Err(QueuedError::Request { .. })), "no `other` among the copies");
        assert!(matches!(QueuedStart::parse("q", "{\"version\": 2}"), Err(QueuedError::Request { .. })));
        let newer = text.replace("\"version\":1", "\"version\":2");
        assert!(matches!(QueuedStart::parse("q", &newer), Err(QueuedError::Request { .. })), "{newer}");
    }

    #[test]
    fn a_policy_that_extends_another_loads_from_the_copies_with_its_parent() {
        let (loader, (plan, policy)) = loaded();
        let mut start = QueuedStart::new(&plan, &policy, texts(&loader, &plan, &policy), None);
        start.plan.text = start.plan.text.replace("policy = \"default\"", "policy = \"child\"");
        let parent = start.policy.clone();
        start.policy = FileCopy {
            path: "policies/child.toml".into(),
            text: "version = 1\nextends = \"default\"\n[budget]\nmax_steps = 1\n".into(),
        };
        assert!(matches!(start.load("q"), Err(QueuedError::Request { .. })), "the parent is not among the copies");
        start.parents.push(parent);
        let (_, merged) = start.load("q").expect("the copies validate");
        assert_eq!(merged.name, "child");
        assert_eq!(merged.budget.max_steps, 1);
        assert_eq!(merged.extends, ["policies/default.toml"]);
        assert_eq!(merged.shell.allow.len(), policy.shell.allow.len(), "the parent's rules");
        let text = serde_json::to_string(&start).expect("serialise");
        assert_eq!(QueuedStart::parse("q", &text).expect("parse"), start);
    }
}
