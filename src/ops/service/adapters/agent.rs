//! The `agent` adapter: runs the plan interpreter for the user's goal, in
//! process, on a blocking thread, as run `agent-<bridge id>` in
//! `<workspace>/runs/`.
//!
//! The goal is routed exactly as `planrun route` and `planrun --goal` route
//! it, and is the agent run's `goal`: never the bridge run's instruction,
//! whose fixed wording ("report the result") would match keywords of its
//! own. The catalog is loaded and validated once, at start-up.
//!
//! A run that pauses for approval (`waiting_approval`, exit code 3) is
//! continued by [`AgentRunner::approve`] + [`AgentRunner::resume_held`] or ended
//! by [`AgentRunner::reject`]; one whose agent step asks a person
//! (`waiting_input`, exit code 4) is continued by [`AgentRunner::answer`] (the runtime's control API; each locks the run
//! folder, so two decisions on one run never both execute).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::load::Catalog;
use crate::model::{
    FailureClass, GivenInput, GivenValue, InputError, InputSource, RunStatus, StopReason, resolve_inputs,
};
use crate::ops::service::adapters::{AdapterMode, AdapterResult, AgentMetadata, PendingQuestion};
use crate::ops::service::ids::agent_run_id;
use crate::ops::{self, ApproveInput, Approved, ExitStatus, OpsError, RunInput, RunTarget};
use crate::ops::{HeldRun, ResumeRequest};
use crate::runtime::approval::ApprovalClaims;
use crate::runtime::{NoProgress, RuntimeEnv};
use crate::store::{RunId, RunState, RunStore, StepRecordStatus};

/// What agent runs need: the validated catalog, the workspace, the clock
/// and the store the runs are read back from.
pub struct AgentRunner {
    pub catalog: Catalog,
    /// Absolute.
    pub workspace: PathBuf,
    pub env: Arc<RuntimeEnv>,
    pub store: Arc<dyn RunStore>,
}

pub async fn execute(
    runner: Arc<AgentRunner>,
    goal: &str,
    inputs: &serde_json::Map<String, serde_json::Value>,
    bridge_run_id: &str,
) -> AdapterResult {
    let goal = goal.to_string();
    let inputs = request_inputs(inputs);
    let run_id = agent_run_id(bridge_run_id);
    let id = run_id.clone();
    match tokio::task::spawn_blocking(move || runner.run(&goal, inputs, &id)).await {
        Ok(result) => result,
        Err(error) => AdapterResult {
            response: String::new(),
            error: Some(format!("agent run panicked or was cancelled: {error}")),
            exit_code: None,
            mode: AdapterMode::Real,
            agent: Some(AgentMetadata::new(run_id)),
        },
    }
}

/// A request's `inputs` as given inputs (checked against the plan by the run).
fn request_inputs(inputs: &serde_json::Map<String, serde_json::Value>) -> Vec<GivenInput> {
    inputs
        .iter()
        .map(|(name, value)| GivenInput {
            name: name.clone(),
            value: GivenValue::Json(value.clone()),
            source: InputSource::Request,
        })
        .collect()
}

impl AgentRunner {
    /// Checks a request's `inputs` against the plan `goal` routes to,
    /// before a run is accepted: `Err` names the input. A goal that routes
    /// nowhere is left to the run, which reports it.
    pub fn check_inputs(
        &self,
        goal: &str,
        inputs: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), InputError> {
        let Ok((plan, _)) = crate::router::select(&self.catalog, goal) else {
            return Ok(());
        };
        resolve_inputs(&plan.id, &plan.inputs, &request_inputs(inputs)).map(|_| ())
    }

    /// Routes `goal` and runs the plan as `run_id` through the same use
    /// case as the command line ([`ops::run`]); exit codes as the CLI's.
    pub fn run(&self, goal: &str, inputs: Vec<GivenInput>, run_id: &str) -> AdapterResult {
        let input = RunInput {
            target: RunTarget::Goal { goal, catalog: &self.catalog },
            run_id: Some(run_id.to_string()),
            workspace: self.workspace.clone(),
            inputs,
        };
        match ops::run(input, &self.env, &mut NoProgress) {
            Ok(outcome) => self.result(run_id, &outcome.state, "ran"),
            Err(error) => AdapterResult {
                response: String::new(),
                error: Some(error.to_string()),
                exit_code: Some(i32::from(error.exit_status())),
                mode: AdapterMode::Real,
                agent: Some(AgentMetadata::new(run_id.to_string())),
            },
        }
    }

    /// Records an approval of agent run `run_id`'s frozen action
    /// (`ops::approve`: checks the claims, locks the run).
    pub fn approve(
        &self,
        run_id: &str,
        claims: &ApprovalClaims,
        expires_in: Duration,
        approved_by: Option<String>,
    ) -> Result<Approved, OpsError> {
        let run_id = &RunId::parse(run_id)?;
        ops::approve(ApproveInput { workspace: &self.workspace, run_id, claims, expires_in, approved_by }, &self.env)
    }

    /// Continues agent run `held` after [`AgentRunner::approve`] approved
    /// it (`ops::resume_held`, never with changed plan or policy
    /// files): the run stays held in between, so that no worker (of this
    /// node or another sharing the store) takes it first.
    pub fn resume_held(&self, held: HeldRun) -> Result<AdapterResult, OpsError> {
        let run_id = held.run_id().to_string();
        let request = ResumeRequest {
            workspace: self.workspace.clone(),
            run_id: RunId::parse(&run_id)?,
            allow_changed_files: false,
            policies: None,
            answer: None,
        };
        let outcome = ops::resume_held(request, held, &self.env, &mut NoProgress)?;
        Ok(self.result(&run_id, &outcome.state, "resumed"))
    }

    /// Records a person's `answer` to the question agent run `run_id`
    /// asked and continues it (`ops::resume` with the answer, as `planrun
    /// answer`; never with changed plan or policy files). The caller
    /// checked the answer ([`ops::check_answer`]); a run that asks nothing
    /// refuses it.
    pub fn answer(&self, run_id: &str, answer: String) -> Result<AdapterResult, OpsError> {
        let request = ResumeRequest {
            workspace: self.workspace.clone(),
            run_id: RunId::parse(run_id)?,
            allow_changed_files: false,
            policies: None,
            answer: Some(answer),
        };
        let outcome = ops::resume(request, &self.env, &mut NoProgress)?;
        Ok(self.result(run_id, &outcome.state, "resumed"))
    }

    /// Ends agent run `run_id` `rejected` (`ops::reject`).
    pub fn reject(&self, run_id: &str, reason: Option<String>) -> Result<AdapterResult, OpsError> {
        let ended = ops::reject(&self.workspace, &RunId::parse(run_id)?, reason, &self.env)?;
        Ok(self.result(run_id, &ended.state, "stopped"))
    }

    /// The adapter result of agent run `run_id` as its records stand now:
    /// a person may have approved and resumed, rejected or cancelled it
    /// outside the service (the CLI on the same workspace).
    pub fn observe(&self, run_id: &str) -> Result<AdapterResult, OpsError> {
        let run = self.store.read_run(run_id).map_err(OpsError::Records)?;
        Ok(self.result(run_id, &run.state, "was continued outside the service on"))
    }

    /// The adapter result of agent run `run_id` that ended (or paused) with
    /// `state`; `verb` says what happened to it (`ran`, `resumed`, `stopped`).
    fn result(&self, run_id: &str, state: &RunState, verb: &str) -> AdapterResult {
        let status = state.status.as_str();
        let waiting = state.status == RunStatus::WaitingApproval;
        let metadata = AgentMetadata {
            agent_run_id: run_id.to_string(),
            agent_final_status: Some(state.status),
            agent_state_path: Some(self.store.run_state_location(run_id)),
            // The final class: a run that ended `done` (or waits for a
            // person) has none, whatever an earlier retried attempt had.
            failure_class: (state.status == RunStatus::Failed)
                .then(|| last_failure_class(self.store.as_ref(), run_id))
                .flatten(),
            pending_action: state.pending_action.clone().filter(|_| waiting),
            pending_question: pending_question(state),
        };
        let response = match (metadata.pending_action.as_ref(), metadata.pending_question.as_ref()) {
            (Some(pending), _) => format!(
                "agent run `{run_id}` {verb} plan `{}` and is waiting for approval of step `{}`",
                state.plan.id, pending.step_id
            ),
            (None, Some(asked)) => format!(
                "agent run `{run_id}` {verb} plan `{}` and is waiting for an answer to the question of step `{}`",
                state.plan.id, asked.step_id
            ),
            (None, None) => format!(
                "agent run `{run_id}` {verb} plan `{}` and ended `{status}` ({})",
                state.plan.id,
                state.stop_reason.as_ref().map_or("no stop reason", StopReason::as_str)
            ),
        };
        // A paused run is not an error: it waits for a person's decision
        // or answer.
        let error = if state.status == RunStatus::Done || waiting || metadata.pending_question.is_some() {
            None
        } else {
            Some(state.error.clone().unwrap_or_else(|| format!("agent run ended `{status}`")))
        };
        AdapterResult {
            response,
            error,
            exit_code: Some(i32::from(ExitStatus::for_run(state.status))),
            mode: AdapterMode::Real,
            agent: Some(metadata),
        }
    }
}

/// The question a `waiting_input` run's agent step asked, with its step
/// and turn.
fn pending_question(state: &RunState) -> Option<PendingQuestion> {
    let agent = state.agent.as_ref().filter(|_| state.status == RunStatus::WaitingInput)?;
    Some(PendingQuestion {
        step_id: agent.step_id.clone(),
        turn: agent.turns.last().map_or(0, |turn| turn.turn),
        question: agent.question.clone()?,
    })
}

/// The failure class of the run's last failed attempt, from its history.
fn last_failure_class(store: &dyn RunStore, run_id: &str) -> Option<FailureClass> {
    let records = store.read_run(run_id).ok()?;
    records
        .history
        .iter()
        .rev()
        .find(|record| record.status == StepRecordStatus::Failed)
        .and_then(|record| record.failure_class)
}
