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

/// Creates run `run_id` with one event, its plan and its first checkpoint
/// (which, as every checkpoint, follows its `state_saved` event).
fn started(store: &dyn RunStore, run_id: &str, started_at: &str) {
    let mut run = store.create_run(run_id).expect("create");
    run.append_event(event("run_started")).expect("event");
    run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
    run.append_event(event("state_saved")).expect("event");
    let mut state = state(run_id, started_at);
    state.audit_seq = run.audit_seq();
    state.audit_hash = run.audit_hash().map(str::to_string);
    run.checkpoint(&state, 0).expect("checkpoint");
}

/// The file store per write (the command line) and under group commit
/// (the service): the contract holds for both.
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
        let log_path = dir.path().join("runs/r1/audit.jsonl");
        let before = fs::read(&log_path).expect("log");
        let (mut run, loaded) = store.open_run("r1").expect("open");
        let mut next = loaded.state.clone();
        next.state_version = 2;
        run.append_event(event("state_saved")).expect("event");
        let before_held = fs::read(&log_path).expect("log");
        assert_eq!(before_held, before, "the event a checkpoint ends with waits for it");
        next.audit_seq = run.audit_seq();
        next.audit_hash = run.audit_hash().map(str::to_string);
        for wrong in [0, 2, 7] {
            let refused = run.checkpoint(&next, wrong);
            assert!(
                matches!(refused, Err(StoreError::VersionConflict { expected, found: 1, .. }) if expected == wrong),
                "{refused:?}"
            );
            assert_eq!(fs::read(&log_path).expect("log"), before, "nothing written");
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

/// The receipt of key `k` in `state` (with an empty result once done).
fn receipt(state: crate::store::ReceiptState) -> crate::store::Receipt {
    let done = state == crate::store::ReceiptState::Done;
    crate::store::Receipt {
        key: "k".into(),
        intent_digest: "d".into(),
        state,
        run_id: "r".into(),
        step_id: "s".into(),
        action: json!({}),
        result: done.then(|| json!({"output_text": "", "output_json": null})),
        started_at: "2026-01-01T00:00:00Z".into(),
        completed_at: None,
    }
}

#[test]
fn receipts_round_trip_through_the_store() {
    for (_dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        let receipt = receipt(crate::store::ReceiptState::Started);
        assert_eq!(store.get_receipt("k").expect("get"), None);
        store.put_receipt(&receipt).expect("put");
        assert_eq!(store.get_receipt("k").expect("get"), Some(receipt));
        store.remove_receipt("k").expect("remove");
        store.remove_receipt("k").expect("removing twice is fine");
        assert_eq!(store.get_receipt("k").expect("get"), None);
    }
}

#[test]
fn a_receipt_the_log_names_must_stay_the_one_it_used() {
    for (_dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        let receipt = receipt(crate::store::ReceiptState::Done);
        store.put_receipt(&receipt).expect("put");
        let mut run = store.create_run("r").expect("create");
        let mut details = Map::new();
        details.insert("idempotency_key".into(), json!("k"));
        details.insert(crate::store::RECEIPT_LINK.into(), json!(receipt.link(&Sealer::plain())));
        run.append_event(NewEvent { details, ..event("receipt_recorded") }).expect("event");
        run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
        run.append_event(event("state_saved")).expect("event");
        let mut state = state("r", "2026-01-01T00:00:00Z");
        state.audit_seq = run.audit_seq();
        state.audit_hash = run.audit_hash().map(str::to_string);
        run.checkpoint(&state, 0).expect("checkpoint");
        drop(run);
        store.read_run("r").expect("the receipt it used");
        let swapped = crate::store::Receipt { completed_at: Some("2026-01-02T00:00:00Z".into()), ..receipt };
        store.put_receipt(&swapped).expect("put");
        assert!(matches!(store.read_run("r"), Err(StoreError::Tampered { .. })));
        assert!(matches!(store.open_run("r"), Err(StoreError::Tampered { .. })));
        store.remove_receipt("k").expect("remove");
        assert!(matches!(store.read_run("r"), Err(StoreError::Tampered { .. })));
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
        assert_eq!((read.audit.len(), read.history.len()), (3, 1), "{sealer:?}: only what the head covers");
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
        assert!(matches!(store.read_run("r1"), Err(StoreError::Interrupted { .. })));
        assert!(store.list_runs().expect("list").is_empty(), "not listed before its first checkpoint");
        drop(run); // the process is gone before its first checkpoint
        let refused = store.open_run("r1").err().map(|error| error.to_string()).unwrap_or_default();
        assert!(refused.contains("its log holds run_started") && refused.contains("the id is free"), "{refused}");
        assert!(matches!(store.read_run("r2"), Err(StoreError::NotFound { .. })), "no start at all");
        started(store, "r1", "2026-01-01T00:00:00Z");
        assert_eq!(store.read_run("r1").expect("the id was free").state.state_version, 1);
        let names: Vec<_> =
            fs::read_dir(dir.path().join("runs")).expect("runs").flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["r1"], "the interrupted start was cleared");
    }
}

/// Opens `r1` (made by [`started`]), appends one step record and
/// checkpoints version 2 with `status`; returns the lines of its log.
fn one_step(store: &dyn RunStore, dir: &std::path::Path, status: crate::model::RunStatus) -> Vec<String> {
    let (mut run, loaded) = store.open_run("r1").expect("open");
    let mut next = loaded.state.clone();
    run.append_history(&step_record("a")).expect("history");
    next.counters.history_records = 1;
    next.counters.tool_calls = 1;
    next.state_version = 2;
    run.append_event(event("state_saved")).expect("event");
    if status.is_terminal() {
        next.status = status;
        next.stop_reason = Some("finish_step".into());
        next.finished_at = Some("2026-01-01T00:00:09Z".into());
        run.append_event(event("run_finished")).expect("event");
    }
    next.audit_seq = run.audit_seq();
    run.checkpoint(&next, 1).expect("checkpoint");
    drop(run);
    fs::read_to_string(dir.join("runs/r1/audit.jsonl")).expect("log").lines().map(str::to_string).collect()
}

#[test]
fn a_checkpoint_is_one_sealed_head_line_of_the_log_and_the_views_follow_it() {
    for sealer in [Sealer::plain(), Sealer::keyed(b"k".to_vec())] {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FileStore::new(dir.path(), sealer.clone());
        let store: &dyn RunStore = &store;
        started(store, "r1", "2026-01-01T00:00:00Z");
        let lines = one_step(store, dir.path(), crate::model::RunStatus::Running);
        assert_eq!(lines.len(), 3, "{sealer:?}: run_started, the first head, the step's head");
        let head: Value = serde_json::from_str(&lines[2]).expect("JSON");
        assert_eq!(head["event_type"], "state_saved");
        assert_eq!(head["details"]["checkpoint"]["state"]["state_version"], 2);
        assert_eq!(
            head["details"]["checkpoint"]["history"][0]["output_text"], "a ran",
            "the step record is in the log"
        );
        assert!(head["details"]["checkpoint"].get("plan").is_none(), "only the first head carries the plan");
        let first: Value = serde_json::from_str(&lines[1]).expect("JSON");
        assert_eq!(first["details"]["checkpoint"]["plan"]["id"], "p");
        assert!(!dir.path().join("runs/r1/state.json").exists(), "{sealer:?}: no compact head while running");
        let read = store.read_run("r1").expect("reads from the log");
        assert_eq!((read.state.state_version, read.history.len()), (2, 1));
        assert_eq!(read.state.audit_seq, 3);
        assert!(read.views_behind().is_empty());

        // Views lost in a power cut: reported, not an error, repaired on open.
        let history = dir.path().join("runs/r1/history.jsonl");
        let plan = dir.path().join("runs/r1/plan.json");
        let (history_text, plan_text) = (fs::read(&history).expect("view"), fs::read(&plan).expect("view"));
        fs::write(&history, "").expect("empty");
        fs::remove_file(&plan).expect("remove");
        let behind = store.read_run("r1").expect("behind is not tampered");
        assert_eq!(behind.history.len(), 1, "{sealer:?}: the log holds the history");
        assert_eq!(behind.views_behind().len(), 2, "{:?}", behind.views_behind());
        let (run, _) = store.open_run("r1").expect("open repairs");
        drop(run);
        assert_eq!(fs::read(&history).expect("view"), history_text, "{sealer:?}: history repaired");
        assert_eq!(fs::read(&plan).expect("view"), plan_text, "{sealer:?}: plan repaired");
        assert!(store.read_run("r1").expect("reads").views_behind().is_empty());
    }
}

#[test]
fn a_view_or_a_head_line_that_differs_from_the_log_is_refused() {
    for sealer in [Sealer::plain(), Sealer::keyed(b"k".to_vec())] {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FileStore::new(dir.path(), sealer.clone());
        let store: &dyn RunStore = &store;
        started(store, "r1", "2026-01-01T00:00:00Z");
        one_step(store, dir.path(), crate::model::RunStatus::Running);
        let tampered = |file: &str, edit: &dyn Fn(String) -> String| {
            let path = dir.path().join("runs/r1").join(file);
            let text = fs::read_to_string(&path).expect("record");
            fs::write(&path, edit(text.clone())).expect("tamper");
            let refused = store.read_run("r1");
            assert!(matches!(refused, Err(StoreError::Tampered { .. })), "{sealer:?} {file}: {:?}", refused.err());
            assert!(matches!(store.open_run("r1"), Err(StoreError::Tampered { .. })), "{sealer:?} {file}");
            fs::write(&path, text).expect("restore");
        };
        tampered("history.jsonl", &|text| text.replace("a ran", "A ran"));
        tampered("history.jsonl", &|text| format!("X\n{text}"));
        tampered("plan.json", &|text| text.replace("\"p\"", "\"q\""));
        // The last line has no successor whose `prev_hash` protects it:
        // its own seal does.
        tampered("audit.jsonl", &|text| text.replace("a ran", "A ran"));
        tampered("audit.jsonl", &|text| text.replace("\"tool_calls\":1", "\"tool_calls\":0"));
        assert!(store.read_run("r1").is_ok(), "{sealer:?}: restored");
    }
}

#[test]
fn the_compact_head_of_an_ended_run_agrees_with_the_log_and_is_not_needed() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        started(store, "r1", "2026-01-01T00:00:00Z");
        let lines = one_step(store, dir.path(), crate::model::RunStatus::Done);
        let last: Value = serde_json::from_str(&lines[lines.len() - 1]).expect("JSON");
        assert_eq!(last["event_type"], "run_finished", "an ended run's head line is `run_finished`");
        let state_path = dir.path().join("runs/r1/state.json");
        let envelope: Value = serde_json::from_str(&fs::read_to_string(&state_path).expect("state")).expect("JSON");
        assert_eq!(envelope["payload"]["audit_seq"], json!(lines.len()));
        assert_eq!(envelope["payload"]["status"], "done");
        let read = store.read_run("r1").expect("reads");
        assert_eq!(read.state.status, crate::model::RunStatus::Done);
        let text = fs::read_to_string(&state_path).expect("state");

        // Lost or emptied (it is written without a sync): the log's head is the head.
        fs::write(&state_path, "").expect("empty");
        assert_eq!(store.read_run("r1").expect("reads").state, read.state);
        fs::remove_file(&state_path).expect("remove");
        assert_eq!(store.read_run("r1").expect("reads").state, read.state);

        // A compact head that names more than the log holds, or re-sealed with
        // another story, is refused.
        fs::write(&state_path, &text).expect("restore");
        let log = dir.path().join("runs/r1/audit.jsonl");
        let full = fs::read_to_string(&log).expect("log");
        let shorter: String = lines[..lines.len() - 1].iter().map(|line| format!("{line}\n")).collect();
        fs::write(&log, shorter).expect("drop the head line");
        assert!(matches!(store.read_run("r1"), Err(StoreError::Tampered { .. })), "the log was cut");
        fs::write(&log, full).expect("restore");
        let mut payload = envelope["payload"].clone();
        payload["evidence"] = json!([{"kind": "verify", "step_id": null, "passed": true, "detail": {}}]);
        let resealed = Sealer::plain().seal(payload).expect("seal");
        fs::write(&state_path, serde_json::to_string_pretty(&resealed).expect("text")).expect("reseal");
        let refused = store.read_run("r1");
        assert!(
            matches!(&refused, Err(StoreError::Tampered { reason, .. }) if reason.contains("state.json")),
            "{:?}",
            refused.err()
        );
    }
}

#[test]
fn a_start_killed_after_its_first_checkpoint_line_is_opened_and_published() {
    for (dir, store) in file_stores() {
        let store: &dyn RunStore = &store;
        started(store, "r1", "2026-01-01T00:00:00Z");
        // As if killed between the first checkpoint line and the publication.
        fs::rename(dir.path().join("runs/r1"), dir.path().join("runs/r1~new")).expect("unpublish");
        assert_eq!(store.read_run("r1").expect("read from its log").state.state_version, 1);
        assert!(store.list_runs().expect("list").is_empty(), "not listed until published");
        let (run, loaded) = store.open_run("r1").expect("opening publishes it");
        assert_eq!(loaded.state.state_version, 1);
        drop(run);
        assert!(dir.path().join("runs/r1/audit.jsonl").is_file() && !dir.path().join("runs/r1~new").exists());
        assert_eq!(store.list_runs().expect("list").len(), 1);
    }
}
