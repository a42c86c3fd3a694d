//! The `agent` adapter: runs the plan interpreter for the instruction, in
//! process, on a blocking thread, as run `agent-<bridge id>` in
//! `<workspace>/runs/`.
//!
//! The instruction holds the goal as a substring, so keyword routing finds
//! the same plan as for the bare goal; the agent run's `goal` is the
//! instruction (as in the seed). The catalog is loaded and validated once, at
//! start-up.

use std::path::PathBuf;
use std::sync::Arc;

use crate::model::FailureClass;
use crate::router::Router;
use crate::runtime::{NoProgress, RunRequest, RuntimeEnv, execute as run_plan};
use crate::server::adapters::{AdapterMode, AdapterResult, AgentMetadata};
use crate::server::ids::agent_run_id;
use crate::spec::Catalog;
use crate::store::{StepRecordStatus, load_run};

/// What agent runs need: the validated catalog, the workspace and the clock.
pub struct AgentRunner {
    pub catalog: Catalog,
    /// Absolute.
    pub workspace: PathBuf,
    pub env: Arc<RuntimeEnv>,
}

pub async fn execute(runner: Arc<AgentRunner>, instruction: &str, bridge_run_id: &str) -> AdapterResult {
    let instruction = instruction.to_string();
    let run_id = agent_run_id(bridge_run_id);
    let id = run_id.clone();
    match tokio::task::spawn_blocking(move || runner.run(&instruction, &id)).await {
        Ok(result) => result,
        Err(error) => AdapterResult {
            response: String::new(),
            error: Some(format!("agent run panicked or was cancelled: {error}")),
            exit_code: None,
            mode: AdapterMode::Real,
            agent: Some(AgentMetadata {
                agent_run_id: run_id,
                agent_final_status: None,
                agent_state_path: None,
                failure_class: None,
            }),
        },
    }
}

impl AgentRunner {
    /// Routes `instruction` and runs the plan as `run_id`. Exit codes as the
    /// CLI's: 0 done, 1 failed, 2 nothing ran (routing refused, bad run id).
    pub fn run(&self, instruction: &str, run_id: &str) -> AdapterResult {
        let mut metadata = AgentMetadata {
            agent_run_id: run_id.to_string(),
            agent_final_status: None,
            agent_state_path: None,
            failure_class: None,
        };
        let refused = |error: String, metadata: AgentMetadata| AdapterResult {
            response: String::new(),
            error: Some(error),
            exit_code: Some(2),
            mode: AdapterMode::Real,
            agent: Some(metadata),
        };
        let decision = Router::new(&self.catalog.plans).route(instruction);
        let Some(index) = decision.plan() else {
            return refused(decision.explanation(), metadata);
        };
        let plan = &self.catalog.plans[index];
        let Some(policy) = self.catalog.policies.get(&plan.policy) else {
            return refused(
                format!("plan `{}` names policy `{}`, which was not loaded", plan.id, plan.policy),
                metadata,
            );
        };
        let request = RunRequest {
            plan,
            policy,
            goal: Some(instruction.to_string()),
            run_id: Some(run_id.to_string()),
            workspace: self.workspace.clone(),
        };
        let outcome = match run_plan(request, &self.env, &mut NoProgress) {
            Ok(outcome) => outcome,
            Err(error) => {
                let code = if error.nothing_ran() { 2 } else { 1 };
                let mut result = refused(error.to_string(), metadata);
                result.exit_code = Some(code);
                return result;
            }
        };
        let state = &outcome.state;
        let status = state.status.as_str();
        metadata.agent_final_status = Some(status.to_string());
        metadata.agent_state_path = Some(outcome.run_dir.join("state.json").display().to_string());
        metadata.failure_class = last_failure_class(&self.workspace, run_id, &self.env.sealer);
        let response = format!(
            "agent run `{run_id}` ran plan `{}` and ended `{status}` ({})",
            plan.id,
            state.stop_reason.as_deref().unwrap_or("no stop reason")
        );
        let done = status == "done";
        AdapterResult {
            response,
            error: if done {
                None
            } else {
                Some(state.error.clone().unwrap_or_else(|| format!("agent run ended `{status}`")))
            },
            exit_code: Some(match state.status {
                crate::model::RunStatus::Done => 0,
                crate::model::RunStatus::WaitingApproval => 3,
                _ => 1,
            }),
            mode: AdapterMode::Real,
            agent: Some(metadata),
        }
    }
}

/// The failure class of the run's last failed attempt, from its history.
fn last_failure_class(
    workspace: &std::path::Path,
    run_id: &str,
    sealer: &crate::store::Sealer,
) -> Option<FailureClass> {
    let records = load_run(workspace, run_id, sealer).ok()?;
    records
        .history
        .iter()
        .rev()
        .find(|record| record.status == StepRecordStatus::Failed)
        .and_then(|record| record.failure_class)
}
