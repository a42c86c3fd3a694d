//! The two ways the runtime writes records, shared by the interpreter and
//! the control commands (`approve`, `reject`): append an audit event, and
//! take a durable checkpoint followed by `state_saved`.

use serde_json::{Map, Value, json};

use crate::model::RunStatus;
use crate::runtime::{Clock, EventType, format_timestamp};
use crate::store::{RunDir, RunState, StoreError};

/// Appends one event to the run's audit log.
pub fn emit(
    run_dir: &mut RunDir,
    clock: &dyn Clock,
    run_id: &str,
    event: EventType,
    step_id: Option<&str>,
    status: Option<&str>,
    details: Map<String, Value>,
) -> Result<(), StoreError> {
    let ts = format_timestamp(clock.now());
    run_dir
        .audit
        .append(ts, run_id, event.as_str(), step_id, status, details)
        .map(|_| ())
        .map_err(|source| StoreError::Io { action: "append to", path: run_dir.path.join("audit.jsonl"), source })
}

/// One durable checkpoint: a new `state_version` that records the audit
/// line it has seen, written atomically, then `state_saved`.
pub fn checkpoint(run_dir: &mut RunDir, clock: &dyn Clock, state: &mut RunState) -> Result<(), StoreError> {
    let expected = state.state_version;
    state.state_version += 1;
    state.audit_seq = run_dir.audit.seq();
    state.audit_hash = run_dir.audit.last_hash().map(str::to_string);
    state.updated_at = format_timestamp(clock.now());
    run_dir.checkpoint(state, expected)?;
    let mut details = Map::new();
    details.insert("state_version".into(), json!(state.state_version));
    let step_id = state.current_step_id.clone();
    emit(run_dir, clock, &state.run_id, EventType::StateSaved, step_id.as_deref(), Some("ok"), details)
}

/// `run_finished` with the run's outcome and counters.
pub fn run_finished(run_dir: &mut RunDir, clock: &dyn Clock, state: &RunState) -> Result<(), StoreError> {
    let mut details = Map::new();
    details.insert("status".into(), json!(state.status));
    details.insert("stop_reason".into(), json!(state.stop_reason));
    details.insert("steps".into(), json!(state.counters.steps));
    details.insert("tool_calls".into(), json!(state.counters.tool_calls));
    if let Some(error) = &state.error {
        details.insert("error".into(), json!(error));
    }
    let status = state.status.as_str();
    emit(run_dir, clock, &state.run_id, EventType::RunFinished, None, Some(status), details)
}

/// Ends a paused or interrupted run on a person's word (`reject`,
/// `cancel`): nothing more runs; checkpoint, then `run_finished`.
pub fn end_by_person(
    run_dir: &mut RunDir,
    clock: &dyn Clock,
    state: &mut RunState,
    status: RunStatus,
    error: String,
) -> Result<(), StoreError> {
    state.status = status;
    state.stop_reason = Some(status.as_str().to_string());
    state.error = Some(error);
    state.pending_action = None;
    state.approval = None;
    state.current_step_id = None;
    state.finished_at = Some(format_timestamp(clock.now()));
    checkpoint(run_dir, clock, state)?;
    run_finished(run_dir, clock, state)
}
