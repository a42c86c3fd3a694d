//! The bridge run manager: one-shot execution of a goal through an adapter.
//!
//! ```text
//! created      → state.json written, run_created logged
//! instruction  → "Task: <goal>…", instruction_generated logged
//! prompt guard → blocked? prompt_blocked, status failed, run_finished; stop
//! running      → task_sent logged
//! adapter      → response_received logged (mode, exit_code, agent_run_id)
//! paused?      → the agent run waits for approval: status waiting_approval,
//!                pending_action set, approval_requested logged; stop
//! done|failed  → run_finished logged (status, adapter_mode, agent ids)
//! ```
//!
//! The returned state is `done`, `failed` or `waiting_approval`, never
//! `running`. `waiting_approval` is the only status that is not final: the
//! bridge run's agent run is paused before a step that needs a person's
//! approval, and [`crate::server::approvals`] continues it (`done`, `failed`,
//! or `waiting_approval` again at the next gated step) or ends it `rejected`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::model::FailureClass;
use crate::server::adapters::{AdapterKind, AdapterResult};
use crate::server::error::ServiceError;
use crate::server::guard;
use crate::server::ids::{RunKind, controller_bridge_id};
use crate::server::records::{RecordDir, RecordError, details, read_state_as};
use crate::server::service::Service;
use crate::store::PendingAction;

/// The state file of a bridge run.
pub const STATE_FILE: &str = "state.json";
/// The audit log of a bridge run.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// `bridge/runs/<run_id>/state.json`. Field order is the file's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeState {
    pub run_id: String,
    pub goal: String,
    /// `created`, `running`, `waiting_approval` (not final: the agent run is
    /// paused for approval), `done`, `failed` or `rejected` (a person
    /// rejected the pending action).
    pub status: String,
    pub adapter: String,
    /// `real`, `stub` or `unavailable`.
    pub adapter_mode: String,
    pub instruction: String,
    pub response: Option<String>,
    pub error: Option<String>,
    pub exit_code: Option<i32>,
    pub agent_run_id: Option<String>,
    pub agent_final_status: Option<String>,
    pub agent_state_path: Option<String>,
    /// The agent run's frozen action, exactly while `status` is
    /// `waiting_approval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_action: Option<PendingAction>,
    /// The controller run that started this bridge run, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_run_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A finished (or paused) bridge run.
pub struct BridgeOutcome {
    pub state: BridgeState,
    /// The agent run's last failure class (agent adapter only).
    pub failure_class: Option<FailureClass>,
}

/// Who starts a bridge run.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// `POST /runs`: a fresh `br-…` id.
    Api,
    /// A controller iteration: `bri-<ctrl id>-i<n>`.
    Controller { controller_run_id: &'a str, iteration: u32 },
}

/// The instruction sent to the adapter: deterministic, holds the goal.
pub fn build_instruction(goal: &str) -> String {
    format!("Task: {goal}\n\nPlease complete the task above and report the result.")
}

/// Runs `goal` through `adapter` to its end.
pub async fn execute_run(
    service: &Service,
    goal: &str,
    adapter: AdapterKind,
    origin: Origin<'_>,
) -> Result<BridgeOutcome, ServiceError> {
    let (run_id, mut records) = create_records(service, origin)?;
    let mode = service.adapters.mode(adapter);
    let created_at = service.now();
    let instruction = build_instruction(goal);
    let mut state = BridgeState {
        run_id: run_id.clone(),
        goal: goal.to_string(),
        status: "created".to_string(),
        adapter: adapter.name().to_string(),
        adapter_mode: mode.as_str().to_string(),
        instruction: instruction.clone(),
        response: None,
        error: None,
        exit_code: None,
        agent_run_id: None,
        agent_final_status: None,
        agent_state_path: None,
        pending_action: None,
        controller_run_id: match origin {
            Origin::Api => None,
            Origin::Controller { controller_run_id, .. } => Some(controller_run_id.to_string()),
        },
        created_at: created_at.clone(),
        updated_at: created_at.clone(),
    };
    records.event(
        &created_at,
        "run_created",
        Some("created"),
        details([("goal", json!(goal)), ("adapter", json!(adapter.name()))]),
    )?;
    records.save(&state)?;
    let instruction_len = instruction.chars().count();
    records.event(
        &service.now(),
        "instruction_generated",
        Some("created"),
        details([("instruction_len", json!(instruction_len))]),
    )?;

    if let Err(violation) = guard::check(&service.policy.guard, goal) {
        let now = service.now();
        records.event(
            &now,
            "prompt_blocked",
            Some("failed"),
            details([("rule", json!(violation.rule)), ("reason", json!(violation.reason))]),
        )?;
        state.status = "failed".to_string();
        state.error = Some(format!("prompt blocked: {}", violation.reason));
        return finish(service, &mut records, state, None);
    }

    state.status = "running".to_string();
    state.updated_at = service.now();
    records.event(
        &state.updated_at,
        "task_sent",
        Some("running"),
        details([("adapter", json!(adapter.name())), ("instruction_len", json!(instruction_len))]),
    )?;
    records.save(&state)?;

    let result = service.adapters.execute(adapter, &instruction, &run_id).await;
    apply_result(&mut state, &result);
    records.event(
        &service.now(),
        "response_received",
        Some("running"),
        details([
            ("mode", json!(result.mode.as_str())),
            ("exit_code", json!(result.exit_code)),
            ("response_len", json!(result.response.chars().count())),
            ("agent_run_id", json!(state.agent_run_id)),
            ("error", json!(result.error)),
        ]),
    )?;
    settle(service, &mut records, state, &result)
}

/// Copies an adapter result into the bridge state (not the status).
pub(crate) fn apply_result(state: &mut BridgeState, result: &AdapterResult) {
    state.adapter_mode = result.mode.as_str().to_string();
    state.exit_code = result.exit_code;
    state.response = Some(result.response.clone());
    state.error = result.error.clone();
    state.pending_action = None;
    if let Some(agent) = &result.agent {
        state.agent_run_id = Some(agent.agent_run_id.clone());
        state.agent_final_status = agent.agent_final_status.clone();
        state.agent_state_path = agent.agent_state_path.clone();
        state.pending_action = agent.pending_action.clone();
    }
}

/// Ends the bridge run `done`/`failed` (`rejected` when the agent run was
/// rejected), or pauses it `waiting_approval` when its agent run paused.
pub(crate) fn settle(
    service: &Service,
    records: &mut RecordDir,
    mut state: BridgeState,
    result: &AdapterResult,
) -> Result<BridgeOutcome, ServiceError> {
    let failure_class = result.agent.as_ref().and_then(|agent| agent.failure_class);
    if let Some(pending) = state.pending_action.clone() {
        state.status = "waiting_approval".to_string();
        state.updated_at = service.now();
        records.event(
            &state.updated_at,
            "approval_requested",
            Some("waiting_approval"),
            details([
                ("agent_run_id", json!(state.agent_run_id)),
                ("step_id", json!(pending.step_id)),
                ("kind", json!(pending.kind)),
                ("scope", json!(pending.scope)),
                ("fingerprint", json!(pending.fingerprint)),
                ("state_version", json!(pending.state_version)),
            ]),
        )?;
        records.save(&state)?;
        return Ok(BridgeOutcome { state, failure_class });
    }
    let rejected = result.agent.as_ref().and_then(|agent| agent.agent_final_status.as_deref()) == Some("rejected");
    state.status = if result.succeeded() {
        "done"
    } else if rejected {
        "rejected"
    } else {
        "failed"
    }
    .to_string();
    finish(service, records, state, failure_class)
}

pub(crate) fn finish(
    service: &Service,
    records: &mut RecordDir,
    mut state: BridgeState,
    failure_class: Option<FailureClass>,
) -> Result<BridgeOutcome, ServiceError> {
    state.updated_at = service.now();
    records.event(
        &state.updated_at,
        "run_finished",
        Some(&state.status),
        details([
            ("status", json!(state.status)),
            ("adapter_mode", json!(state.adapter_mode)),
            ("agent_run_id", json!(state.agent_run_id)),
            ("agent_final_status", json!(state.agent_final_status)),
        ]),
    )?;
    records.save(&state)?;
    Ok(BridgeOutcome { state, failure_class })
}

/// Creates the record folder under a fresh id (or the controller's).
fn create_records(service: &Service, origin: Origin<'_>) -> Result<(String, RecordDir), ServiceError> {
    let root = service.records_root();
    let create = |id: &str| RecordDir::create(&root, id, STATE_FILE, AUDIT_FILE);
    match origin {
        Origin::Controller { controller_run_id, iteration } => {
            let id = controller_bridge_id(controller_run_id, iteration);
            let records = create(&id)?;
            Ok((id, records))
        }
        Origin::Api => {
            let mut last: Option<RecordError> = None;
            for _ in 0..100 {
                let id = service.ids.next(RunKind::Bridge, service.env.clock.as_ref());
                match create(&id) {
                    Ok(records) => return Ok((id, records)),
                    Err(error) if error.is_taken() => last = Some(error),
                    Err(error) => return Err(error.into()),
                }
            }
            Err(last.map_or(ServiceError::NoFreeId, ServiceError::from))
        }
    }
}

/// The persisted state of bridge run `run_id`, if it exists.
pub fn read(service: &Service, run_id: &str) -> Result<Option<Value>, ServiceError> {
    Ok(crate::server::records::read_state(&service.records_root(), run_id, STATE_FILE)?)
}

/// The persisted state of bridge run `run_id`, typed, if it exists.
pub fn read_typed(service: &Service, run_id: &str) -> Result<Option<BridgeState>, ServiceError> {
    Ok(read_state_as(&service.records_root(), run_id, STATE_FILE)?)
}

/// Opens bridge run `run_id`'s records to append to them.
pub fn open_records(service: &Service, run_id: &str) -> Result<RecordDir, ServiceError> {
    Ok(RecordDir::open(&service.records_root(), run_id, STATE_FILE, AUDIT_FILE)?)
}
