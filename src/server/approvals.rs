//! Deciding on bridge runs whose agent run is paused for approval
//! (`POST /runs/{id}/approve`, `POST /runs/{id}/reject`), and answering the
//! question an agent step asked (`POST /runs/{id}/answer`).
//!
//! ```text
//! approve: waiting_approval → approval recorded on agent-<id>   approval_granted
//!          → agent run resumed                                   run_resumed
//!          → done | failed                                       run_finished
//!            or waiting_approval at the next gated step          approval_requested
//! reject:  waiting_approval → agent run ended rejected           approval_rejected
//!          → rejected                                            run_finished
//! answer:  waiting_input → answer recorded on agent-<id>, run    answer_given
//!          resumed                                               run_resumed
//!          → done | failed                                       run_finished
//!            or waiting_input / waiting_approval at the next     input_requested /
//!            pause                                               approval_requested
//! ```
//!
//! An answer is checked as `planrun answer` checks it (1 to 2000 bytes, not
//! blank) before the record is opened; the runtime records it on the agent
//! run as the turn's observation (`source=person trust=untrusted`, sealed)
//! in the same lock as the resume, so a refused answer changes nothing.
//!
//! The approval is checked by the runtime (`ops::approve`) against the
//! frozen action: fingerprint (required over HTTP: an operator approves what
//! they saw), and scope and state version when given. A refused decision
//! changes nothing. When the approval is recorded but the resume is refused
//! (the approval expired, the plan files changed, the run is locked),
//! `approval_granted` and `resume_refused` are logged and the bridge run
//! stays `waiting_approval`.
//!
//! One decision at a time per bridge run: a decision holds the bridge
//! record's lock (the store's, taken when the record is opened) from the
//! check that the run is waiting until the new state is written, so a
//! second one meanwhile is refused `run_locked`, in this process or another.
//! The runtime's lock on the agent run does the same for the CLI on the same
//! workspace. The agent run itself stays held from its approval to the end
//! of its resume (`HeldRun`): with a shared store, another node's worker
//! woken by the approval cannot take it in between.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;

use crate::ops::ControlError;
use crate::ops::OpsError;
use crate::ops::service::Service;
use crate::ops::service::adapters::AdapterResult;
use crate::ops::service::bridge::{self, BridgeState, BridgeStatus};
use crate::ops::service::bridge_event::{
    AnswerGiven, ApprovalGranted, ApprovalRejected, BridgeEvent, ResumeRefused, RunResumed,
};
use crate::runtime::approval::ApprovalClaims;
use crate::server::error::ApiError;
use crate::store::{RecordWriter, StoreError};

/// What `POST /runs/{id}/approve` asks for.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub fingerprint: String,
    pub scope: Option<String>,
    pub state_version: Option<u64>,
    pub expires_in: Duration,
    pub approved_by: Option<String>,
}

/// Approves the pending action of bridge run `run_id` and resumes its agent
/// run; returns the new bridge state.
pub async fn approve(service: &Service, run_id: &str, request: ApprovalRequest) -> Result<BridgeState, ApiError> {
    let (mut records, state, agent_run_id) = open_waiting(service, run_id, BridgeStatus::WaitingApproval)?;
    let claims = ApprovalClaims {
        fingerprint: Some(request.fingerprint),
        scope: request.scope,
        state_version: request.state_version,
    };
    let runner = Arc::clone(&service.adapters.agent);
    let id = agent_run_id.clone();
    let granted = blocking(move || runner.approve(&id, &claims, request.expires_in, request.approved_by))
        .await?
        .map_err(refused)?;
    // The agent run stays held from the approval to its resume: on a
    // shared store another node's worker would otherwise take it first.
    let held = granted.held;
    records.event(
        service.now(),
        &BridgeEvent::ApprovalGranted(ApprovalGranted {
            agent_run_id: agent_run_id.clone(),
            step_id: granted.pending.step_id,
            fingerprint: granted.approval.fingerprint,
            scope: granted.approval.scope,
            state_version: granted.approval.state_version,
            approved_by: granted.approval.approved_by,
            expires_at: granted.approval.expires_at,
        }),
    )?;
    let runner = Arc::clone(&service.adapters.agent);
    let result = match blocking(move || runner.resume_held(held)).await? {
        Ok(result) => result,
        Err(error) => {
            let error = refused(error);
            records.event(
                service.now(),
                &BridgeEvent::ResumeRefused(ResumeRefused {
                    agent_run_id,
                    code: error.code,
                    error: error.message.clone(),
                }),
            )?;
            return Err(error);
        }
    };
    settle_resumed(service, records, state, agent_run_id, &result)
}

/// Rejects the pending action of bridge run `run_id`: its agent run ends
/// `rejected` and the frozen action never runs; returns the new bridge state.
pub async fn reject(service: &Service, run_id: &str, reason: Option<String>) -> Result<BridgeState, ApiError> {
    let (mut records, mut state, agent_run_id) = open_waiting(service, run_id, BridgeStatus::WaitingApproval)?;
    let pending = state.pending_action.clone();
    let runner = Arc::clone(&service.adapters.agent);
    let id = agent_run_id.clone();
    let why = reason.clone();
    let result = blocking(move || runner.reject(&id, why)).await?.map_err(refused)?;
    records.event(
        service.now(),
        &BridgeEvent::ApprovalRejected(ApprovalRejected {
            agent_run_id,
            step_id: pending.as_ref().map(|pending| pending.step_id.clone()),
            fingerprint: pending.map(|pending| pending.fingerprint),
            reason,
        }),
    )?;
    bridge::apply_result(&mut state, &result);
    Ok(bridge::settle(service, &mut records, state, &result)?.state)
}

/// Records a person's `answer` (checked by the caller) to the question of
/// bridge run `run_id`'s agent run and continues it; returns the new bridge
/// state. A refusal (the run does not wait for an answer, its records or
/// files changed) changes nothing.
pub async fn answer(service: &Service, run_id: &str, answer: String) -> Result<BridgeState, ApiError> {
    let (mut records, state, agent_run_id) = open_waiting(service, run_id, BridgeStatus::WaitingInput)?;
    let asked = state.pending_question.clone();
    let answer_bytes = answer.len();
    let runner = Arc::clone(&service.adapters.agent);
    let id = agent_run_id.clone();
    let result = blocking(move || runner.answer(&id, answer)).await?.map_err(refused)?;
    records.event(
        service.now(),
        &BridgeEvent::AnswerGiven(AnswerGiven {
            agent_run_id: agent_run_id.clone(),
            step_id: asked.as_ref().map(|asked| asked.step_id.clone()).unwrap_or_default(),
            turn: asked.as_ref().map_or(0, |asked| asked.turn),
            answer_bytes,
        }),
    )?;
    settle_resumed(service, records, state, agent_run_id, &result)
}

/// Takes the result of the agent run's resume into bridge run `state`:
/// `run_resumed`, then `run_finished` or the next pause.
fn settle_resumed(
    service: &Service,
    mut records: RecordWriter,
    mut state: BridgeState,
    agent_run_id: String,
    result: &AdapterResult,
) -> Result<BridgeState, ApiError> {
    bridge::apply_result(&mut state, result);
    records.event(
        service.now(),
        &BridgeEvent::RunResumed(RunResumed {
            agent_run_id,
            exit_code: result.exit_code,
            agent_final_status: state.agent_final_status,
            response_len: result.response.chars().count(),
        }),
    )?;
    Ok(bridge::settle(service, &mut records, state, result)?.state)
}

/// Locks bridge run `run_id`, which must exist and be `waiting` (for
/// approval, or for an answer); returns its writer, its state and its agent
/// run id.
fn open_waiting(
    service: &Service,
    run_id: &str,
    waiting: BridgeStatus,
) -> Result<(RecordWriter, BridgeState, String), ApiError> {
    let (mut records, state) = bridge::open_records(service, run_id).map_err(|error| match error {
        StoreError::NotFound { .. } => ApiError::not_found("bridge run", run_id),
        error => error.into(),
    })?;
    let state = bridge::sync_with_agent(service, &mut records, state)?;
    let (what, paused_at) = if waiting == BridgeStatus::WaitingInput {
        ("an answer", ("question", state.pending_question.is_some()))
    } else {
        ("approval", ("pending action", state.pending_action.is_some()))
    };
    if state.status != waiting {
        let agent = match (&state.agent_run_id, state.agent_final_status) {
            (Some(agent_run_id), Some(status)) => format!("; its agent run `{agent_run_id}` is `{}`", status.as_str()),
            _ => String::new(),
        };
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "run_not_waiting",
            format!("bridge run `{run_id}` is not waiting for {what} (status `{}`{agent})", state.status.as_str()),
        ));
    }
    let agent_run_id = state.agent_run_id.clone().filter(|_| paused_at.1).ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "records_invalid",
            format!("bridge run `{run_id}` is waiting for {what} but names no agent run or {}", paused_at.0),
        )
    })?;
    Ok((records, state, agent_run_id))
}

/// Runs a control command on a blocking thread (they lock and write files).
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|error| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "run_crashed", format!("the decision task failed: {error}"))
    })
}

/// The answer to a control command the runtime refused.
///
/// | status | code | when |
/// |---|---|---|
/// | 409 | `approval_invalid` | fingerprint, scope or state version do not match the frozen action, or the approval expired |
/// | 409 | `refused` | the agent run is not waiting, or its plan or policy file changed |
/// | 409 | `run_locked` | another process holds the agent run (or wrote to it first) |
/// | 409 | `records_invalid` | the agent run's records are missing or fail verification |
/// | 409 | `plan_files_invalid` | the agent run's plan or policy files are invalid now |
/// | 409 | `agent_run_interrupted` | the agent run's start was interrupted before its first checkpoint (nothing ran; `planrun resume` or `cancel` on the command line) |
/// | 500 | `records_failed` | the records could not be read or written |
pub fn refused(error: OpsError) -> ApiError {
    let message = error.to_string();
    let OpsError::Control(control) = error else {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "records_failed", message);
    };
    let (status, code) = match control {
        ControlError::Refused(text) if text.starts_with("approval_invalid") => {
            (StatusCode::CONFLICT, "approval_invalid")
        }
        ControlError::Refused(_) => (StatusCode::CONFLICT, "refused"),
        // The agent run a waiting bridge run names is gone: its records
        // are invalid (not a 404: the bridge run exists).
        ControlError::Store(StoreError::NotFound { .. }) => (StatusCode::CONFLICT, "records_invalid"),
        // Its start was interrupted before its first checkpoint: nothing
        // ran; the command line starts it again or cancels it.
        ControlError::Store(StoreError::Interrupted { .. }) | ControlError::Interrupted(_) => {
            (StatusCode::CONFLICT, "agent_run_interrupted")
        }
        ControlError::Run(_) => (StatusCode::INTERNAL_SERVER_ERROR, "records_failed"),
        ControlError::Store(error) => return error.into(),
        ControlError::Files { .. } | ControlError::FilesMissing(_) => (StatusCode::CONFLICT, "plan_files_invalid"),
    };
    ApiError::new(status, code, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::approval::ApprovalInvalid;

    #[test]
    fn refusals_map_to_stable_codes() {
        let code = |error: ControlError| {
            let error = refused(OpsError::Control(error));
            (error.status.as_u16(), error.code)
        };
        assert_eq!(code(ApprovalInvalid("expired".into()).into()), (409, "approval_invalid"));
        assert_eq!(code(ControlError::Refused("run `x` is not waiting".into())), (409, "refused"));
        assert_eq!(code(StoreError::Locked { id: "x".into() }.into()), (409, "run_locked"));
        assert_eq!(code(StoreError::Tampered { id: "x".into(), reason: "r".into() }.into()), (409, "records_invalid"));
        let io = StoreError::Io { action: "read", path: "p".into(), source: std::io::Error::other("disk") };
        assert_eq!(code(io.into()), (500, "records_failed"));
    }
}
