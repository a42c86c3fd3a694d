//! The bridge run manager: one-shot execution of a goal through an adapter.
//!
//! ```text
//! created      → state.json written (held until the end when the run is
//!                done in memory: see `in_memory`), run_created logged
//! instruction  → "Task: <goal>…", instruction_generated logged
//! prompt guard → blocked? prompt_blocked, status failed, run_finished; stop
//! running      → task_sent logged
//! adapter      → the instruction (agent: the goal itself) through the
//!                adapter; response_received logged (mode, exit_code,
//!                agent_run_id)
//! paused?      → the agent run waits for approval: status waiting_approval,
//!                pending_action set, approval_requested logged; stop
//!                (or its agent step asked a person: status waiting_input,
//!                pending_question set, input_requested logged; stop)
//! done|failed  → run_finished logged (status, adapter_mode, agent ids)
//! ```
//!
//! The returned state is `done`, `failed`, `waiting_approval` or
//! `waiting_input`, never `running`. The two waiting statuses are the only
//! ones that are not final: the bridge run's agent run is paused before a
//! step that needs a person's approval, or its agent step asked a person a
//! question, and the HTTP front end (`server/approvals.rs`) continues it
//! (`done`, `failed`, or waiting again at the next pause) or ends it
//! `rejected`.

use serde::{Deserialize, Serialize};

use crate::model::{FailureClass, RunStatus};
use crate::ops::service::Service;
use crate::ops::service::ServiceError;
use crate::ops::service::adapters::{AdapterKind, AdapterMode, AdapterResult, PendingQuestion, Task};
use crate::ops::service::bridge_event::{
    AgentRunObserved, ApprovalRequested, BridgeEvent, InputRequested, InstructionGenerated, ResponseReceived,
    RunCreated, RunFinished, TaskSent,
};
use crate::ops::service::guard;
use crate::ops::service::ids::{agent_run_id, controller_bridge_id};
pub use crate::ops::service::record_status::BridgeStatus;
use crate::runtime::IdKind;
use crate::store::{Holder, PendingAction, RecordKind, RecordWriter, StoreError};

/// The state of a bridge run, checkpointed in `bridge/runs/<run_id>/state.json`
/// (sealed by the run store). Field order is the file's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeState {
    pub run_id: String,
    pub goal: String,
    pub status: BridgeStatus,
    pub adapter: String,
    pub adapter_mode: AdapterMode,
    pub instruction: String,
    pub response: Option<String>,
    pub error: Option<String>,
    pub exit_code: Option<i32>,
    pub agent_run_id: Option<String>,
    pub agent_final_status: Option<RunStatus>,
    pub agent_state_path: Option<String>,
    /// The plan inputs the request gave (`POST /runs` `inputs`), handed to
    /// the agent run, which checks them against its plan.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The agent run's frozen action, exactly while `status` is
    /// `waiting_approval`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_action: Option<PendingAction>,
    /// The question the agent run's agent step asked a person, exactly
    /// while `status` is `waiting_input` (untrusted: the model's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_question: Option<PendingQuestion>,
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

/// The instruction sent to an adapter that takes text (`stub`,
/// `local_echo`, `openai`, `ollama`): deterministic, holds the goal. The
/// `agent` adapter is given the goal itself.
pub fn build_instruction(goal: &str) -> String {
    format!("Task: {goal}\n\nPlease complete the task above and report the result.")
}

/// Runs `goal` through `adapter` to its end.
pub async fn execute_run(
    service: &Service,
    goal: &str,
    inputs: &serde_json::Map<String, serde_json::Value>,
    adapter: AdapterKind,
    origin: Origin<'_>,
) -> Result<BridgeOutcome, ServiceError> {
    let (records, state) = accept_run(service, goal, inputs, adapter, origin, BridgeStatus::Created)?;
    drive_run(service, records, state, adapter).await
}

/// Creates the bridge run's record: its first checkpoint with `status`
/// (`created`; `queued` when the request is answered before the run is
/// driven, `POST /runs` with `"wait": false`), then `run_created`. The returned
/// writer holds the record until [`drive_run`] is done with it.
pub fn accept_run(
    service: &Service,
    goal: &str,
    inputs: &serde_json::Map<String, serde_json::Value>,
    adapter: AdapterKind,
    origin: Origin<'_>,
    status: BridgeStatus,
) -> Result<(RecordWriter, BridgeState), ServiceError> {
    let (run_id, mut records) = create_records(service, origin)?;
    let mode = service.adapters.mode(adapter);
    let created_at = service.now();
    let instruction = build_instruction(goal);
    let state = BridgeState {
        run_id,
        goal: goal.to_string(),
        status,
        adapter: adapter.name().to_string(),
        adapter_mode: mode,
        instruction,
        response: None,
        error: None,
        exit_code: None,
        agent_run_id: None,
        agent_final_status: None,
        agent_state_path: None,
        inputs: inputs.clone(),
        pending_action: None,
        pending_question: None,
        controller_run_id: match origin {
            Origin::Api => None,
            Origin::Controller { controller_run_id, .. } => Some(controller_run_id.to_string()),
        },
        created_at: created_at.clone(),
        updated_at: created_at.clone(),
    };
    // The first checkpoint before the first event: it names no log line,
    // so the store writes it without waiting for a durability barrier (the
    // record is listed at once; a crash leaves it with its log as a tail).
    // A run driven at once by an adapter that does not really execute is
    // done in memory: its first checkpoint may wait for its last.
    if in_memory(origin, status, mode) {
        records.save_held(&state)?;
    } else {
        records.save(&state)?;
    }
    records.event(
        created_at.clone(),
        &BridgeEvent::RunCreated(RunCreated { goal: goal.to_string(), adapter: adapter.name().to_string() }),
    )?;
    Ok((records, state))
}

/// Whether a new bridge run is done wholly in memory and ends in the
/// request that creates it: started by `POST /runs` and driven at once
/// (`created`, not `queued`), through an adapter that does not really
/// execute (`stub` mode, or `unavailable`). Nothing of it leaves the
/// service, so a crash before its end loses nothing but an unanswered
/// request.
fn in_memory(origin: Origin<'_>, status: BridgeStatus, mode: AdapterMode) -> bool {
    matches!(origin, Origin::Api) && status == BridgeStatus::Created && mode != AdapterMode::Real
}

/// Drives an accepted bridge run (its record held by `records`) from its
/// instruction to its end, or to its agent run's first approval gate.
pub async fn drive_run(
    service: &Service,
    mut records: RecordWriter,
    mut state: BridgeState,
    adapter: AdapterKind,
) -> Result<BridgeOutcome, ServiceError> {
    let (goal, instruction, run_id) = (state.goal.clone(), state.instruction.clone(), state.run_id.clone());
    let goal = goal.as_str();
    let instruction_len = instruction.chars().count();
    records.event(service.now(), &BridgeEvent::InstructionGenerated(InstructionGenerated { instruction_len }))?;

    if let Err(violation) = guard::check(&service.policy.guard, goal) {
        state.status = BridgeStatus::Failed;
        state.error = Some(format!("prompt blocked: {}", violation.reason));
        records.event(service.now(), &BridgeEvent::PromptBlocked(violation.into()))?;
        return finish(service, &mut records, state, None);
    }

    state.status = BridgeStatus::Running;
    state.updated_at = service.now();
    records.event(
        state.updated_at.clone(),
        &BridgeEvent::TaskSent(TaskSent { adapter: adapter.name().to_string(), instruction_len }),
    )?;
    records.save(&state)?;

    let inputs = state.inputs.clone();
    let result =
        service.adapters.execute(adapter, Task { goal, inputs: &inputs, instruction: &instruction }, &run_id).await;
    apply_result(&mut state, &result);
    records.event(
        service.now(),
        &BridgeEvent::ResponseReceived(ResponseReceived {
            mode: result.mode,
            exit_code: result.exit_code,
            response_len: result.response.chars().count(),
            agent_run_id: state.agent_run_id.clone(),
            error: result.error.clone(),
        }),
    )?;
    settle(service, &mut records, state, &result)
}

/// Copies an adapter result into the bridge state (not the status).
pub(crate) fn apply_result(state: &mut BridgeState, result: &AdapterResult) {
    state.adapter_mode = result.mode;
    state.exit_code = result.exit_code;
    state.response = Some(result.response.clone());
    state.error = result.error.clone();
    state.pending_action = None;
    state.pending_question = None;
    if let Some(agent) = &result.agent {
        state.agent_run_id = Some(agent.agent_run_id.clone());
        state.agent_final_status = agent.agent_final_status;
        state.agent_state_path = agent.agent_state_path.clone();
        state.pending_action = agent.pending_action.clone();
        state.pending_question = agent.pending_question.clone();
    }
}

/// Ends the bridge run `done`/`failed` (`rejected` when the agent run was
/// rejected), or pauses it `waiting_approval` (`waiting_input`) when its
/// agent run paused for approval (asked a person a question).
pub(crate) fn settle(
    service: &Service,
    records: &mut RecordWriter,
    mut state: BridgeState,
    result: &AdapterResult,
) -> Result<BridgeOutcome, ServiceError> {
    let failure_class = result.agent.as_ref().and_then(|agent| agent.failure_class);
    let pause = match (state.pending_action.clone(), state.pending_question.clone()) {
        (Some(pending), _) => Some((
            BridgeStatus::WaitingApproval,
            BridgeEvent::ApprovalRequested(ApprovalRequested {
                agent_run_id: state.agent_run_id.clone(),
                step_id: pending.step_id,
                kind: pending.kind,
                scope: pending.scope,
                fingerprint: pending.fingerprint,
                state_version: pending.state_version,
            }),
        )),
        (None, Some(asked)) => Some((
            BridgeStatus::WaitingInput,
            BridgeEvent::InputRequested(InputRequested {
                agent_run_id: state.agent_run_id.clone(),
                step_id: asked.step_id,
                turn: asked.turn,
                question: asked.question,
            }),
        )),
        (None, None) => None,
    };
    if let Some((status, event)) = pause {
        state.status = status;
        state.updated_at = service.now();
        records.event(state.updated_at.clone(), &event)?;
        records.save_last(&state)?;
        return Ok(BridgeOutcome { state, failure_class });
    }
    let agent_status = result.agent.as_ref().and_then(|agent| agent.agent_final_status);
    state.status = if result.succeeded() {
        BridgeStatus::Done
    } else if agent_status == Some(RunStatus::Rejected) {
        BridgeStatus::Rejected
    } else if agent_status == Some(RunStatus::Cancelled) {
        BridgeStatus::Cancelled
    } else {
        BridgeStatus::Failed
    };
    finish(service, records, state, failure_class)
}

pub(crate) fn finish(
    service: &Service,
    records: &mut RecordWriter,
    mut state: BridgeState,
    failure_class: Option<FailureClass>,
) -> Result<BridgeOutcome, ServiceError> {
    state.updated_at = service.now();
    records.event(
        state.updated_at.clone(),
        &BridgeEvent::RunFinished(RunFinished {
            status: state.status,
            adapter_mode: state.adapter_mode,
            agent_run_id: state.agent_run_id.clone(),
            agent_final_status: state.agent_final_status,
        }),
    )?;
    records.save_last(&state)?;
    Ok(BridgeOutcome { state, failure_class })
}

/// Brings a waiting bridge run up to date with its agent run, under the
/// record's lock. The agent run may have been approved and resumed,
/// rejected or cancelled outside the service (the CLI on the same
/// workspace), or answered (`planrun answer`): then the bridge run takes
/// the agent run's real status (`agent_run_observed`, then `run_finished`,
/// or `approval_requested` / `input_requested` at the next pause). A bridge
/// run that is not waiting, or whose agent run waits at the same gate (the
/// same question of the same turn) or cannot be read, is returned
/// unchanged.
pub(crate) fn sync_with_agent(
    service: &Service,
    records: &mut RecordWriter,
    mut state: BridgeState,
) -> Result<BridgeState, ServiceError> {
    let Some(agent_run_id) = state.agent_run_id.clone().filter(|_| state.status.waits_for_a_person()) else {
        return Ok(state);
    };
    let Ok(result) = service.adapters.agent.observe(&agent_run_id) else {
        return Ok(state);
    };
    let Some(agent) = result.agent.as_ref() else {
        return Ok(state);
    };
    let fingerprint = |pending: Option<&PendingAction>| pending.map(|pending| pending.fingerprint.clone());
    if fingerprint(agent.pending_action.as_ref()) == fingerprint(state.pending_action.as_ref())
        && agent.pending_question == state.pending_question
    {
        return Ok(state);
    }
    records.event(
        service.now(),
        &BridgeEvent::AgentRunObserved(AgentRunObserved {
            agent_run_id,
            agent_final_status: agent.agent_final_status,
            reason: "the agent run was continued outside the service".to_string(),
        }),
    )?;
    apply_result(&mut state, &result);
    Ok(settle(service, records, state, &result)?.state)
}

/// The current state of bridge run `run_id` (`GET /runs/{id}`), read
/// through to its agent run when it waits for approval or an answer; `None` when there
/// is no such run. While another request holds the record (an approve or
/// reject in progress), the stored state is returned as it is. An accepted
/// or running run whose agent run exists is `running` with that agent
/// run's id (`with_agent_run`).
pub fn read_current(service: &Service, run_id: &str) -> Result<Option<BridgeState>, ServiceError> {
    let Some(stored) = service.read_record(RecordKind::Bridge, run_id)? else {
        return Ok(None);
    };
    let state: BridgeState = serde_json::from_value(stored).map_err(|error| not_a_bridge_state(run_id, &error))?;
    // (Not a waited-for run's `created`: its request answers at its end,
    // and a scan settling it after a crash holds it too.)
    if matches!(state.status, BridgeStatus::Queued | BridgeStatus::Running) {
        return Ok(Some(with_agent_run(service, state)));
    }
    if !state.status.waits_for_a_person() {
        return Ok(Some(state));
    }
    match open_records(service, run_id) {
        Ok((mut records, locked)) => Ok(Some(sync_with_agent(service, &mut records, locked)?)),
        Err(StoreError::Locked { .. }) => Ok(Some(state)),
        Err(error) => Err(error.into()),
    }
}

/// Bridge run `state`, accepted or running, as it stands: the record may
/// still say `queued` (under group commit a service writes the
/// checkpoints between a request's first and last only when it ends), and
/// names its agent run only once the adapter returns; while a service
/// drives it (holds its record) and that agent run exists, the step is
/// running, so it is shown `running` with the agent run's id. A record
/// nobody holds (its service stopped) is shown as written until the scan
/// settles it.
fn with_agent_run(service: &Service, mut state: BridgeState) -> BridgeState {
    if state.adapter != AdapterKind::Agent.name() || state.agent_run_id.is_some() {
        return state;
    }
    let held = service.store.record_holder(RecordKind::Bridge, &state.run_id);
    if !held.is_ok_and(|holder| holder != Holder::Nobody) {
        return state;
    }
    let id = agent_run_id(&state.run_id);
    if service.store.read_run(&id).is_ok() {
        state.status = BridgeStatus::Running;
        state.agent_run_id = Some(id);
    }
    state
}

fn not_a_bridge_state(run_id: &str, error: &serde_json::Error) -> StoreError {
    StoreError::Tampered { id: run_id.to_string(), reason: format!("`state.json` is not a bridge state: {error}") }
}

/// Creates the record under a fresh id (or the controller's).
fn create_records(service: &Service, origin: Origin<'_>) -> Result<(String, RecordWriter), StoreError> {
    match origin {
        Origin::Controller { controller_run_id, iteration } => {
            let id = controller_bridge_id(controller_run_id, iteration);
            let handle = service.store.create_record(RecordKind::Bridge, &id)?;
            Ok((id, RecordWriter::new(handle)))
        }
        Origin::Api => service.create_record(RecordKind::Bridge, IdKind::Bridge),
    }
}

/// Locks bridge run `run_id`'s record to append to it; returns the writer
/// and the verified, typed state.
pub fn open_records(service: &Service, run_id: &str) -> Result<(RecordWriter, BridgeState), StoreError> {
    open_records_and_log(service, run_id).map(|(records, state, _)| (records, state))
}

/// As [`open_records`], with how many lines the record's audit log holds.
pub fn open_records_and_log(service: &Service, run_id: &str) -> Result<(RecordWriter, BridgeState, usize), StoreError> {
    let (handle, loaded) = service.store.open_record(RecordKind::Bridge, run_id)?;
    let lines = loaded.audit.len();
    let state = serde_json::from_value(loaded.state).map_err(|error| not_a_bridge_state(run_id, &error))?;
    Ok((RecordWriter::new(handle), state, lines))
}
