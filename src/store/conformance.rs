//! Conformance tests of the [`RunStore`](crate::store::RunStore) seam, run against [`FileStore`]
//! through `&dyn RunStore` only, so that another implementation can be
//! held to the same list.

use std::fs;

use serde_json::{Map, Value, json};

use crate::store::{
    Durability, FileStore, GroupCommit, NewEvent, PlanRef, RecordKind, RunState, RunStore, Sealer, StoreError,
};

fn event(event_type: &str) -> NewEvent<'_> {
    NewEvent { ts: "2026-01-01T00:00:00Z".into(), event_type, step_id: None, status: Some("ok"), details: Map::new() }
}

/// A run's first state (`state_version` 1).
pub(crate) fn state(run_id: &str, started_at: &str) -> RunState {
    let plan = PlanRef {
        id: "p".into(),
        path: "plans/p.toml".into(),
        sha256: "0".into(),
        policy: "default".into(),
        policy_path: "policies/default.toml".into(),
        policy_sha256: "0".into(),
        step_count: 1,
    };
    let mut state = RunState::started(run_id.into(), None, plan, started_at.into());
    state.state_version = 1;
    state
}

/// Creates run `run_id` with one event, its plan and its first checkpoint.
fn started(store: &dyn RunStore, run_id: &str, started_at: &str) {
    let mut run = store.create_run(run_id).expect("create");
    run.append_event(event("run_started")).expect("event");
    run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
    let mut state = state(run_id, started_at);
    state.audit_seq = run.audit_seq();
    state.audit_hash = run.audit_hash().map(str::to_string);
    run.checkpoint(&state, 0).expect("checkpoint");
}

/// A file store per durability: every write durable on its own (the
/// command line), and under group commit (the service), which must keep
/// the same contract.
fn file_stores() -> Vec<(tempfile::TempDir, FileStore)> {
    let per_write = tempfile::tempdir().expect("temp dir");
    let per_write_store = FileStore::new(per_write.path(), Sealer::plain());
    let grouped = tempfile::tempdir().expect("temp dir");
    let commit = GroupCommit::new(grouped.path()).expect("committer");
    let grouped_store = FileStore::with_durability(grouped.path(), Sealer::plain(), Durability::Group(commit));
    vec![(per_write, per_write_store), (grouped, grouped_store)]
}

#[test]
fn a_run_is_never_created_twice() {
    for (_dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        started(store, "r1", "2026-01-01T00:00:00Z");
        assert!(matches!(store.create_run("r1"), Err(StoreError::RunExists { .. })));
        assert_eq!(store.read_run("r1").expect("the first run is intact").state.state_version, 1);
        let record = store.create_record(RecordKind::Bridge, "br-1").expect("create record");
        drop(record);
        assert!(matches!(store.create_record(RecordKind::Bridge, "br-1"), Err(StoreError::RunExists { .. })));
    }
}

#[test]
fn a_checkpoint_with_a_wrong_expected_version_is_refused_and_changes_nothing() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        started(store, "r1", "2026-01-01T00:00:00Z");
        let state_path = dir.path().join("runs/r1/state.json");
        let before = fs::read(&state_path).expect("state");
        let (mut run, loaded) = store.open_run("r1").expect("open");
        let mut next = loaded.state.clone();
        next.state_version = 2;
        next.audit_seq = run.audit_seq();
        next.audit_hash = run.audit_hash().map(str::to_string);
        for wrong in [0, 2, 7] {
            let refused = run.checkpoint(&next, wrong);
            assert!(
                matches!(refused, Err(StoreError::VersionConflict { expected, found: 1, .. }) if expected == wrong),
                "{refused:?}"
            );
            assert_eq!(fs::read(&state_path).expect("state"), before, "nothing written");
        }
        run.checkpoint(&next, 1).expect("the right version is accepted");
        assert!(matches!(run.checkpoint(&next, 1), Err(StoreError::VersionConflict { found: 2, .. })));

        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("record");
        let version = record.checkpoint(&json!({"run_id": "br-1", "status": "created"}), 0).expect("first");
        assert_eq!(version, 1);
        let record_path = dir.path().join("bridge/runs/br-1/state.json");
        let before = fs::read(&record_path).expect("record state");
        assert!(matches!(
            record.checkpoint(&json!({"run_id": "br-1", "status": "done"}), 0),
            Err(StoreError::VersionConflict { expected: 0, found: 1, .. })
        ));
        assert_eq!(fs::read(&record_path).expect("record state"), before);
    }
}

#[test]
fn a_held_run_cannot_be_opened_again_until_released() {
    for (_dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        started(store, "r1", "2026-01-01T00:00:00Z");
        let (held, _) = store.open_run("r1").expect("open");
        assert!(matches!(store.open_run("r1"), Err(StoreError::Locked { .. })));
        held.release().expect("release");
        let (held, _) = store.open_run("r1").expect("released explicitly");
        drop(held);
        assert!(store.open_run("r1").is_ok(), "released with the handle");

        let mut record = store.create_record(RecordKind::Controller, "ctrl-1").expect("record");
        record.checkpoint(&json!({"controller_run_id": "ctrl-1"}), 0).expect("checkpoint");
        assert!(matches!(store.open_record(RecordKind::Controller, "ctrl-1"), Err(StoreError::Locked { .. })));
        drop(record);
        let (_, loaded) = store.open_record(RecordKind::Controller, "ctrl-1").expect("open");
        assert_eq!(loaded.state, json!({"controller_run_id": "ctrl-1"}), "the store's fields are stripped");
        assert_eq!(loaded.state_version, 1);
    }
}

#[test]
fn runs_are_listed_newest_first() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        assert!(store.list_runs().expect("list").is_empty(), "no runs folder yet");
        started(store, "b-middle", "2026-01-02T00:00:00Z");
        started(store, "c-oldest", "2026-01-01T00:00:00Z");
        started(store, "a-newest", "2026-01-02T00:00:00.500Z");
        fs::create_dir(dir.path().join("runs/broken")).expect("a run without a checkpoint");
        fs::write(dir.path().join("runs/.stray.tmp"), "").expect("a stray file");
        let listed: Vec<(String, Option<String>)> =
            store.list_runs().expect("list").into_iter().map(|listing| (listing.run_id, listing.started_at)).collect();
        let ids: Vec<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a-newest", "b-middle", "c-oldest", "broken"]);
        assert_eq!(listed[3].1, None);
    }
}

#[test]
fn a_tampered_bridge_record_is_refused_on_reading() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("record");
        record.append_event(event("run_created")).expect("event");
        record.checkpoint(&json!({"run_id": "br-1", "status": "done"}), 0).expect("checkpoint");
        record.append_event(event("run_finished")).expect("event");
        drop(record);
        let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("intact");
        assert_eq!((loaded.state["status"].as_str(), loaded.audit.len()), (Some("done"), 2));

        let state_path = dir.path().join("bridge/runs/br-1/state.json");
        let audit_path = dir.path().join("bridge/runs/br-1/audit.jsonl");
        let (state_text, audit_text) =
            (fs::read_to_string(&state_path).expect("state"), fs::read_to_string(&audit_path).expect("audit"));
        let tamper = |path: &std::path::Path, text: String| {
            fs::write(path, text).expect("tamper");
            let refused = store.read_record(RecordKind::Bridge, "br-1");
            assert!(matches!(refused, Err(StoreError::Tampered { .. })), "{refused:?}");
        };
        tamper(&state_path, state_text.replace("\"done\"", "\"failed\""));
        fs::write(&state_path, &state_text).expect("restore");
        tamper(&audit_path, audit_text.replace("run_created", "run_CREATED"));
        let first_line_only: String = audit_text.lines().skip(1).map(|line| format!("{line}\n")).collect();
        tamper(&audit_path, first_line_only);
        fs::write(&audit_path, &audit_text).expect("restore");
        let other: Value = json!({"run_id": "br-2", "status": "done"});
        let sealed = Sealer::plain().seal(other).expect("seal");
        tamper(&state_path, serde_json::to_string(&sealed).expect("text"));
        assert!(matches!(store.read_record(RecordKind::Bridge, "br-404"), Err(StoreError::NotFound { .. })));
    }
}

#[test]
fn receipts_round_trip_through_the_store() {
    for (_dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        let receipt = crate::store::Receipt {
            key: "k".into(),
            intent_digest: "d".into(),
            state: crate::store::ReceiptState::Started,
            run_id: "r".into(),
            step_id: "s".into(),
            action: json!({}),
            result: None,
            started_at: "2026-01-01T00:00:00Z".into(),
            completed_at: None,
        };
        assert_eq!(store.get_receipt("k").expect("get"), None);
        store.put_receipt(&receipt).expect("put");
        assert_eq!(store.get_receipt("k").expect("get"), Some(receipt));
        store.remove_receipt("k").expect("remove");
        store.remove_receipt("k").expect("removing twice is fine");
        assert_eq!(store.get_receipt("k").expect("get"), None);
    }
}

#[test]
fn a_record_checkpoint_must_be_its_own_object_without_the_store_fields() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("record");
        for bad in [
            json!(["not", "an", "object"]),
            json!({"run_id": "br-2"}),
            json!({"controller_run_id": "br-1"}),
            json!({"run_id": "br-1", "state_version": 7}),
            json!({"run_id": "br-1", "audit_hash": null}),
        ] {
            assert!(matches!(record.checkpoint(&bad, 0), Err(StoreError::Io { .. })), "{bad}");
        }
        assert!(!dir.path().join("bridge/runs/br-1/state.json").exists(), "nothing was written");
        assert_eq!(record.stored_version(), 0);
        let mut writer = crate::store::RecordWriter::new(record);
        for status in ["created", "running"] {
            writer.save(&json!({"run_id": "br-1", "status": status})).expect("save");
        }
        // A store may keep a later checkpoint until the request commits it;
        // a new record's first one is readable at once.
        let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("read");
        assert!(matches!(loaded.state["status"].as_str(), Some("created" | "running")), "{:?}", loaded.state);
        writer.save_last(&json!({"run_id": "br-1", "status": "done"})).expect("save the last");
        let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("read");
        assert_eq!((loaded.state_version, loaded.state["status"].as_str()), (3, Some("done")));
    }
}

#[test]
fn records_are_listed_newest_first_by_kind() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        assert!(store.list_records(RecordKind::Bridge).expect("list").is_empty(), "no records folder yet");
        for (id, created_at) in
            [("br-b", "2026-01-02T00:00:00Z"), ("br-c", "2026-01-01T00:00:00Z"), ("br-a", "2026-01-03T00:00:00Z")]
        {
            let mut record = store.create_record(RecordKind::Bridge, id).expect("record");
            record.checkpoint(&json!({"run_id": id, "created_at": created_at}), 0).expect("checkpoint");
        }
        let mut controller = store.create_record(RecordKind::Controller, "ctrl-1").expect("record");
        controller
            .checkpoint(&json!({"controller_run_id": "ctrl-1", "created_at": "2026-01-09T00:00:00Z"}), 0)
            .expect("c");
        drop(controller);
        store.create_record(RecordKind::Bridge, "br-empty").expect("a record without a checkpoint yet");
        fs::write(dir.path().join("bridge/runs/br-b/state.json"), "not an envelope").expect("break one");
        let ids = |kind| -> Vec<String> {
            store.list_records(kind).expect("list").into_iter().map(|listing| listing.run_id).collect()
        };
        assert_eq!(ids(RecordKind::Bridge), ["br-a", "br-c", "br-b"], "the broken one last, listed all the same");
        assert_eq!(ids(RecordKind::Controller), ["ctrl-1"]);
    }
}

/// A step record for the history tests.
fn step_record(step_id: &str) -> crate::store::StepRecord {
    crate::store::StepRecord {
        step_id: step_id.into(),
        kind: "shell".into(),
        status: crate::store::StepRecordStatus::Done,
        attempt: 1,
        failure_class: None,
        action: None,
        output_text: format!("{step_id} ran"),
        output_json: None,
        error: None,
        details: Map::new(),
        started_at: "2026-01-01T00:00:00Z".into(),
        finished_at: "2026-01-01T00:00:00Z".into(),
        duration_ms: 0,
    }
}

#[test]
fn the_checkpoint_is_the_head_and_what_lies_past_it_is_never_returned() {
    for sealer in [Sealer::plain(), Sealer::keyed(b"k".to_vec())] {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FileStore::new(dir.path(), sealer.clone());
        let store: &dyn RunStore = &store;
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
        // A crash tail: an event and an attempt the head does not cover.
        run.append_event(event("step_started")).expect("event");
        run.append_history(&step_record("b")).expect("history");
        drop(run);

        let read = store.read_run("r1").expect("verifies");
        assert_eq!((read.audit.len(), read.history.len()), (2, 1), "{sealer:?}: only what the head covers");
        assert_eq!((read.discarded_events, read.discarded_history), (1, 1), "{sealer:?}: the tail is counted");
        let (run, opened) = store.open_run("r1").expect("open cuts the tail");
        drop(run);
        assert_eq!((opened.discarded_events, opened.discarded_history), (1, 1));
        let again = store.read_run("r1").expect("verifies");
        assert_eq!((again.discarded_events, again.discarded_history), (0, 0), "{sealer:?}: the tail is gone");

        // The covered history and the plan copy are vouched for by the head.
        let history = dir.path().join("runs/r1/history.jsonl");
        let text = fs::read_to_string(&history).expect("history");
        fs::write(&history, text.replace("a ran", "A ran")).expect("write");
        assert!(matches!(store.read_run("r1"), Err(StoreError::Tampered { .. })), "{sealer:?}: history edit");
        fs::write(&history, text).expect("write");
        let plan = dir.path().join("runs/r1/plan.json");
        let text = fs::read_to_string(&plan).expect("plan");
        fs::write(&plan, text.replace("\"p\"", "\"q\"")).expect("write");
        assert!(matches!(store.read_run("r1"), Err(StoreError::Tampered { .. })), "{sealer:?}: plan edit");
    }
}

#[test]
fn a_run_without_a_checkpoint_does_not_exist_and_its_id_stays_free() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        let mut run = store.create_run("r1").expect("create");
        run.append_event(event("run_started")).expect("event");
        run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
        assert!(matches!(store.create_run("r1"), Err(StoreError::RunExists { .. })), "taken while being created");
        assert!(matches!(store.read_run("r1"), Err(StoreError::NotFound { .. })));
        assert!(store.list_runs().expect("list").is_empty(), "not listed before its first checkpoint");
        drop(run); // the process is gone before its first checkpoint
        assert!(matches!(store.open_run("r1"), Err(StoreError::NotFound { .. })));
        started(store, "r1", "2026-01-01T00:00:00Z");
        assert_eq!(store.read_run("r1").expect("the id was free").state.state_version, 1);
        let names: Vec<_> =
            fs::read_dir(dir.path().join("runs")).expect("runs").flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["r1"], "the interrupted start was cleared");
    }
}
