//! Test support: the runs the store's tests write through `&dyn RunStore`
//! (the conformance suite in `conformance.rs` and the PostgreSQL store's
//! own tests in `pg/tests.rs`).

use serde_json::{Map, json};

use crate::store::{NewEvent, PlanRef, RunHandle, RunState, RunStore};

pub(crate) fn event(event_type: &str) -> NewEvent<'_> {
    NewEvent { ts: "2026-01-01T00:00:00Z".into(), event_type, step_id: None, status: Some("ok"), details: Map::new() }
}

pub(crate) fn state(run_id: &str, started_at: &str) -> RunState {
    let plan = PlanRef {
        id: "p".into(),
        path: "plans/p.toml".into(),
        sha256: "0".into(),
        policy: "default".into(),
        policy_path: "policies/default.toml".into(),
        policy_sha256: "0".into(),
        step_count: 1,
        plan_file: None,
        policy_file: None,
    };
    let mut state = RunState::started(run_id.into(), None, plan, started_at.into());
    state.state_version = 1;
    state
}

/// Creates run `run_id` with one event, its plan and its first checkpoint
/// (which, as every checkpoint, follows its `state_saved` event).
pub(crate) fn started(store: &dyn RunStore, run_id: &str, started_at: &str) {
    let mut run = store.create_run(run_id).expect("create");
    run.append_event(event("run_started")).expect("event");
    run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
    run.append_event(event("state_saved")).expect("event");
    let mut state = state(run_id, started_at);
    state.audit_seq = run.audit_seq();
    state.audit_hash = run.audit_hash().map(str::to_string);
    run.checkpoint(&state, 0).expect("checkpoint");
}

/// A step record for the history cases.
pub(crate) fn step_record(step_id: &str) -> crate::store::StepRecord {
    crate::store::StepRecord {
        step_id: step_id.into(),
        kind: "shell".into(),
        status: crate::store::StepRecordStatus::Done,
        attempt: 1,
        failure_class: None,
        action: None,
        output_text: format!("{step_id} ran"),
        output_json: None,
        stderr_text: None,
        error: None,
        details: crate::model::StepDetails::default(),
        started_at: "2026-01-01T00:00:00Z".into(),
        finished_at: "2026-01-01T00:00:00Z".into(),
        duration_ms: 0,
    }
}

/// Starts run `r1`, opens it, appends history record `a` and a
/// `state_saved` event and checkpoints them (state version 2); returns the
/// handle, still held.
pub(crate) fn one_step_checkpointed(store: &dyn RunStore) -> Box<dyn RunHandle> {
    started(store, "r1", "2026-01-01T00:00:00Z");
    let (mut run, loaded) = store.open_run("r1").expect("open");
    let mut next = loaded.state.clone();
    run.append_history(&step_record("a")).expect("history");
    next.counters.history_records = 1;
    run.append_event(event("state_saved")).expect("event");
    next.state_version = 2;
    next.audit_seq = run.audit_seq();
    next.audit_hash = run.audit_hash().map(str::to_string);
    run.checkpoint(&next, 1).expect("checkpoint");
    run
}
