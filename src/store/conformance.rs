//! Conformance tests of the [`RunStore`](crate::store::RunStore) seam: one
//! list of cases, each written against `&dyn RunStore` and a [`Tamper`]
//! (how to edit the stored bytes behind the store's back), run on every
//! store: `file::` on [`FileStore`] in a temporary workspace, `postgres::`
//! on [`crate::store::pg::PgStore`] in a fresh schema of the server named
//! by `PLANRUN_TEST_PG` (see `pg/test_db.rs`; skipped with one line
//! without it, failing under `PLANRUN_REQUIRE_PG=1`).

use std::any::Any;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::store::test_runs::{event, one_step_checkpointed, started, step_record};
use crate::store::{FileStore, Holder, RecordKind, RunStore, Sealer, StoreError};

/// Which record a [`Tamper`] edits: an agent run (`None`) or a record.
pub(crate) type Kind = Option<RecordKind>;

/// Edits a store's bytes behind its back, as someone with write access to
/// the files or the tables could.
pub(crate) trait Tamper {
    /// Replaces the stored checkpoint text of `id` with `edit(text)`.
    fn edit_state(&self, kind: Kind, id: &str, edit: &dyn Fn(&str) -> String);
    /// Replaces audit event `seq` (1-based) of `id` with `edit(line)`.
    fn edit_event(&self, kind: Kind, id: &str, seq: u64, edit: &dyn Fn(&str) -> String);
    /// Removes audit event `seq` of `id`.
    fn delete_event(&self, kind: Kind, id: &str, seq: u64);
    /// Swaps the contents of audit events `a` and `b` of `id`.
    fn swap_events(&self, kind: Kind, id: &str, a: u64, b: u64);
    /// Replaces history record `number` (1-based) of agent run `id`.
    fn edit_history(&self, id: &str, number: u64, edit: &dyn Fn(&str) -> String);
    /// Replaces the stored plan text of agent run `id`.
    fn edit_plan(&self, id: &str, edit: &dyn Fn(&str) -> String);
    /// Leaves an agent run `id` whose checkpoint cannot be read, so that
    /// it is listed without a start time.
    fn add_unreadable_run(&self, id: &str);
}

/// One fresh, empty store and how to tamper with it; `_guard` keeps its
/// folder or schema alive.
pub(crate) struct Fresh {
    pub store: Box<dyn RunStore>,
    pub tamper: Box<dyn Tamper>,
    pub _guard: Box<dyn Any>,
}

fn assert_tampered(result: Result<impl std::fmt::Debug, StoreError>, what: &str) {
    assert!(matches!(result, Err(StoreError::Tampered { .. })), "{what}: {result:?}");
}

/// Receipt `k` of run `r` in `state`.
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

/// The cases, each on one fresh store.
mod cases {
    use super::*;

    pub fn a_run_is_never_created_twice(fresh: &Fresh) {
        let store = fresh.store.as_ref();
        started(store, "r1", "2026-01-01T00:00:00Z");
        assert!(matches!(store.create_run("r1"), Err(StoreError::RunExists { .. })));
        assert_eq!(store.read_run("r1").expect("the first run is intact").state.state_version, 1);
        let record = store.create_record(RecordKind::Bridge, "br-1").expect("create record");
        drop(record);
        assert!(matches!(store.create_record(RecordKind::Bridge, "br-1"), Err(StoreError::RunExists { .. })));
    }

    pub fn a_checkpoint_with_a_wrong_expected_version_is_refused_and_changes_nothing(fresh: &Fresh) {
        let store = fresh.store.as_ref();
        started(store, "r1", "2026-01-01T00:00:00Z");
        let before = store.read_run("r1").expect("read");
        let (mut run, loaded) = store.open_run("r1").expect("open");
        let mut next = loaded.state.clone();
        next.state_version = 2;
        run.append_event(event("state_saved")).expect("event");
        next.audit_seq = run.audit_seq();
        next.audit_hash = run.audit_hash().map(str::to_string);
        for wrong in [0, 2, 7] {
            let refused = run.checkpoint(&next, wrong);
            assert!(
                matches!(refused, Err(StoreError::VersionConflict { expected, found: 1, .. }) if expected == wrong),
                "{refused:?}"
            );
            let now = store.read_run("r1").expect("read");
            assert_eq!((now.state, now.audit.len()), (before.state.clone(), before.audit.len()), "nothing written");
        }
        run.checkpoint(&next, 1).expect("the right version is accepted");
        assert!(matches!(run.checkpoint(&next, 1), Err(StoreError::VersionConflict { found: 2, .. })));
        assert_eq!(store.read_run("r1").expect("read").state.state_version, 2);

        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("record");
        let version = record.checkpoint(&json!({"run_id": "br-1", "status": "created"}), 0).expect("first");
        assert_eq!(version, 1);
        assert!(matches!(
            record.checkpoint(&json!({"run_id": "br-1", "status": "done"}), 0),
            Err(StoreError::VersionConflict { expected: 0, found: 1, .. })
        ));
        let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("read");
        assert_eq!((loaded.state_version, loaded.state["status"].as_str()), (1, Some("created")));
    }

    pub fn a_held_run_cannot_be_opened_again_until_released(fresh: &Fresh) {
        let store = fresh.store.as_ref();
        started(store, "r1", "2026-01-01T00:00:00Z");
        assert_eq!(store.holder("r1").expect("holder"), Holder::Nobody);
        let (held, _) = store.open_run("r1").expect("open");
        assert_ne!(store.holder("r1").expect("holder"), Holder::Nobody, "seen held");
        assert!(matches!(store.open_run("r1"), Err(StoreError::Locked { .. })), "looking took nothing");
        held.release().expect("release");
        assert_eq!(store.holder("r1").expect("holder"), Holder::Nobody);
        let (held, _) = store.open_run("r1").expect("released explicitly");
        drop(held);
        assert!(store.open_run("r1").is_ok(), "released with the handle");

        let mut record = store.create_record(RecordKind::Controller, "ctrl-1").expect("record");
        record.checkpoint(&json!({"controller_run_id": "ctrl-1"}), 0).expect("checkpoint");
        assert_ne!(store.record_holder(RecordKind::Controller, "ctrl-1").expect("holder"), Holder::Nobody);
        assert!(matches!(store.open_record(RecordKind::Controller, "ctrl-1"), Err(StoreError::Locked { .. })));
        drop(record);
        assert_eq!(store.record_holder(RecordKind::Controller, "ctrl-1").expect("holder"), Holder::Nobody);
        let (_, loaded) = store.open_record(RecordKind::Controller, "ctrl-1").expect("open");
        assert_eq!(loaded.state, json!({"controller_run_id": "ctrl-1"}), "the store's fields are stripped");
        assert_eq!(loaded.state_version, 1);
    }

    pub fn runs_are_listed_newest_first(fresh: &Fresh) {
        let store = fresh.store.as_ref();
        assert!(store.list_runs().expect("list").is_empty(), "no runs yet");
        started(store, "b-middle", "2026-01-02T00:00:00Z");
        started(store, "c-oldest", "2026-01-01T00:00:00Z");
        started(store, "a-newest", "2026-01-02T00:00:00.500Z");
        fresh.tamper.add_unreadable_run("broken");
        let listed: Vec<(String, Option<String>)> =
            store.list_runs().expect("list").into_iter().map(|listing| (listing.run_id, listing.started_at)).collect();
        let ids: Vec<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["a-newest", "b-middle", "c-oldest", "broken"]);
        assert_eq!(listed[3].1, None);
    }

    pub fn a_tampered_bridge_record_is_refused_on_reading(fresh: &Fresh) {
        let (store, tamper) = (fresh.store.as_ref(), fresh.tamper.as_ref());
        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("record");
        record.append_event(event("run_created")).expect("event");
        record.checkpoint(&json!({"run_id": "br-1", "status": "done"}), 0).expect("checkpoint");
        record.append_event(event("run_finished")).expect("event");
        drop(record);
        let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("intact");
        assert_eq!((loaded.state["status"].as_str(), loaded.audit.len()), (Some("done"), 2));

        let bridge = Some(RecordKind::Bridge);
        let read = || store.read_record(RecordKind::Bridge, "br-1");
        tamper.edit_state(bridge, "br-1", &|text| text.replace("\"done\"", "\"failed\""));
        assert_tampered(read(), "edited state");
        tamper.edit_state(bridge, "br-1", &|text| text.replace("\"failed\"", "\"done\""));
        assert!(read().is_ok(), "restored");
        tamper.edit_event(bridge, "br-1", 1, &|line| line.replace("run_created", "run_CREATED"));
        assert_tampered(read(), "edited event");
        tamper.edit_event(bridge, "br-1", 1, &|line| line.replace("run_CREATED", "run_created"));
        tamper.swap_events(bridge, "br-1", 1, 2);
        assert_tampered(read(), "re-ordered events");
        tamper.swap_events(bridge, "br-1", 1, 2);
        assert!(read().is_ok(), "restored");
        tamper.delete_event(bridge, "br-1", 1);
        assert_tampered(read(), "deleted event");
        let sealed = Sealer::plain().seal(json!({"run_id": "br-2", "status": "done"})).expect("seal");
        let other = serde_json::to_string(&sealed).expect("text");
        tamper.edit_state(bridge, "br-1", &|_| other.clone());
        assert_tampered(read(), "another record's state");
        assert!(matches!(store.read_record(RecordKind::Bridge, "br-404"), Err(StoreError::NotFound { .. })));
    }

    pub fn receipts_round_trip_through_the_store(fresh: &Fresh) {
        let store = fresh.store.as_ref();
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
        assert_eq!(store.get_receipt("k").expect("get"), Some(receipt.clone()));
        let done = crate::store::Receipt {
            state: crate::store::ReceiptState::Done,
            result: Some(json!({"output_text": "ok"})),
            completed_at: Some("2026-01-01T00:00:01Z".into()),
            ..receipt
        };
        store.put_receipt(&done).expect("complete");
        assert_eq!(store.get_receipt("k").expect("get"), Some(done));
        store.remove_receipt("k").expect("remove");
        store.remove_receipt("k").expect("removing twice is fine");
        assert_eq!(store.get_receipt("k").expect("get"), None);
    }

    pub fn a_record_checkpoint_must_be_its_own_object_without_the_store_fields(fresh: &Fresh) {
        let store = fresh.store.as_ref();
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
        assert!(matches!(store.read_record(RecordKind::Bridge, "br-1"), Err(StoreError::NotFound { .. })));
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

    pub fn records_are_listed_newest_first_by_kind(fresh: &Fresh) {
        let store = fresh.store.as_ref();
        assert!(store.list_records(RecordKind::Bridge).expect("list").is_empty(), "no records yet");
        for (id, created_at) in
            [("br-b", "2026-01-02T00:00:00Z"), ("br-c", "2026-01-01T00:00:00Z"), ("br-a", "2026-01-03T00:00:00Z")]
        {
            let mut record = store.create_record(RecordKind::Bridge, id).expect("record");
            record.checkpoint(&json!({"run_id": id, "created_at": created_at}), 0).expect("checkpoint");
        }
        let mut controller = store.create_record(RecordKind::Controller, "ctrl-1").expect("record");
        let ctrl = json!({"controller_run_id": "ctrl-1", "created_at": "2026-01-09T00:00:00Z"});
        controller.checkpoint(&ctrl, 0).expect("c");
        drop(controller);
        store.create_record(RecordKind::Bridge, "br-empty").expect("a record without a checkpoint yet");
        fresh.tamper.edit_state(Some(RecordKind::Bridge), "br-b", &|_| "not an envelope".to_string());
        let ids = |kind| -> Vec<String> {
            store.list_records(kind).expect("list").into_iter().map(|listing| listing.run_id).collect()
        };
        assert_eq!(ids(RecordKind::Bridge), ["br-a", "br-c", "br-b"], "the broken one last, listed all the same");
        assert_eq!(ids(RecordKind::Controller), ["ctrl-1"]);
    }

    /// What a checkpoint covers is vouched for (history, plan, events); the
    /// file store's crash tail is checked in `file_crash_tail` below.
    pub fn the_checkpoint_vouches_for_history_plan_and_events(fresh: &Fresh) {
        let (store, tamper) = (fresh.store.as_ref(), fresh.tamper.as_ref());
        drop(one_step_checkpointed(store));
        let read = store.read_run("r1").expect("verifies");
        assert_eq!((read.audit.len(), read.history.len()), (3, 1));
        assert_eq!(read.history[0].output_text, "a ran");

        let check = || store.read_run("r1").map(|run| run.state);
        tamper.edit_history("r1", 1, &|line| line.replace("a ran", "A ran"));
        assert_tampered(check(), "history edit");
        tamper.edit_history("r1", 1, &|line| line.replace("A ran", "a ran"));
        tamper.edit_plan("r1", &|text| text.replace("\"p\"", "\"q\""));
        assert_tampered(check(), "plan edit");
        tamper.edit_plan("r1", &|text| text.replace("\"q\"", "\"p\""));
        // A token the checkpoint holds once, so that the edit can be undone.
        tamper.edit_state(None, "r1", &|text| text.replace("\"running\"", "\"RUNNING\""));
        assert_tampered(check(), "state edit");
        tamper.edit_state(None, "r1", &|text| text.replace("\"RUNNING\"", "\"running\""));
        assert!(check().is_ok(), "restored");
        tamper.swap_events(None, "r1", 1, 2);
        assert_tampered(check(), "re-ordered events");
        tamper.swap_events(None, "r1", 1, 2);
        tamper.edit_event(None, "r1", 2, &|line| line.replace("state_saved", "state_SAVED"));
        assert_tampered(check(), "edited event");
        tamper.edit_event(None, "r1", 2, &|line| line.replace("state_SAVED", "state_saved"));
        assert!(check().is_ok(), "restored");
        tamper.delete_event(None, "r1", 2);
        assert_tampered(check(), "deleted event");
        assert_tampered(store.open_run("r1").map(|(_, loaded)| loaded.state), "a tampered run is not opened");
    }

    pub fn a_run_without_a_checkpoint_does_not_exist_and_its_id_stays_free(fresh: &Fresh) {
        let store = fresh.store.as_ref();
        let mut run = store.create_run("r1").expect("create");
        run.append_event(event("run_started")).expect("event");
        run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
        assert!(matches!(store.create_run("r1"), Err(StoreError::RunExists { .. })), "taken while being created");
        // No run: `NotFound`, or `Interrupted` where the store can tell
        // what its start left (the file store's log).
        let no_run = |result: Result<_, StoreError>| {
            matches!(result, Err(StoreError::NotFound { .. } | StoreError::Interrupted { .. }))
        };
        assert!(no_run(store.read_run("r1").map(|run| run.state)));
        assert!(store.list_runs().expect("list").is_empty(), "not listed before its first checkpoint");
        drop(run); // the process is gone before its first checkpoint
        assert!(no_run(store.open_run("r1").map(|(_, loaded)| loaded.state)));
        started(store, "r1", "2026-01-01T00:00:00Z");
        assert_eq!(store.read_run("r1").expect("the id was free").state.state_version, 1);
    }

    /// The receipts a run's log names (`receipt_link`) are part of what it
    /// vouches for: one changed, swapped or removed since is refused.
    pub fn a_receipt_the_log_names_must_stay_the_one_it_used(fresh: &Fresh) {
        let store = fresh.store.as_ref();
        let receipt = receipt(crate::store::ReceiptState::Done);
        store.put_receipt(&receipt).expect("put");
        let mut run = store.create_run("r").expect("create");
        let mut details = serde_json::Map::new();
        details.insert("idempotency_key".into(), json!("k"));
        details.insert(crate::store::RECEIPT_LINK.into(), json!(receipt.link(&Sealer::plain())));
        run.append_event(crate::store::NewEvent { details, ..event("receipt_recorded") }).expect("event");
        run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
        run.append_event(event("state_saved")).expect("event");
        let mut state = crate::store::test_runs::state("r", "2026-01-01T00:00:00Z");
        state.audit_seq = run.audit_seq();
        state.audit_hash = run.audit_hash().map(str::to_string);
        run.checkpoint(&state, 0).expect("checkpoint");
        run.release().expect("release");
        store.read_run("r").expect("the receipt it used");
        let swapped = crate::store::Receipt { completed_at: Some("2026-01-02T00:00:00Z".into()), ..receipt };
        store.put_receipt(&swapped).expect("put");
        assert_tampered(store.read_run("r").map(|run| run.state), "a swapped receipt");
        assert_tampered(store.open_run("r").map(|(_, loaded)| loaded.state), "a swapped receipt is not opened");
        store.remove_receipt("k").expect("remove");
        assert_tampered(store.read_run("r").map(|run| run.state), "a removed receipt");
    }

    pub fn keyed_seals_are_refused_without_the_key(fresh: &Fresh, plain: &dyn RunStore) {
        let store = fresh.store.as_ref();
        started(store, "r1", "2026-01-01T00:00:00Z");
        assert!(store.read_run("r1").is_ok());
        assert_tampered(plain.read_run("r1").map(|run| run.state), "a keyed run read without the key");
    }
}

/// Generates one `#[test]` per case for a backend whose `$fresh(sealer)`
/// gives an empty store (or `None`: skipped) and whose
/// `$plain_twin(&fresh)` is the same store read without a key.
macro_rules! conformance_suite {
    ($fresh:ident, $plain_twin:ident) => {
        conformance_suite!(@plain $fresh;
            a_run_is_never_created_twice,
            a_checkpoint_with_a_wrong_expected_version_is_refused_and_changes_nothing,
            a_held_run_cannot_be_opened_again_until_released,
            runs_are_listed_newest_first,
            a_tampered_bridge_record_is_refused_on_reading,
            receipts_round_trip_through_the_store,
            a_record_checkpoint_must_be_its_own_object_without_the_store_fields,
            records_are_listed_newest_first_by_kind,
            a_run_without_a_checkpoint_does_not_exist_and_its_id_stays_free,
            a_receipt_the_log_names_must_stay_the_one_it_used
        );

        #[test]
        fn the_checkpoint_vouches_for_history_plan_and_events() {
            for sealer in [Sealer::plain(), Sealer::keyed(b"k".to_vec())] {
                if let Some(fresh) = $fresh(sealer) {
                    cases::the_checkpoint_vouches_for_history_plan_and_events(&fresh);
                }
            }
        }

        #[test]
        fn keyed_seals_are_refused_without_the_key() {
            if let Some(fresh) = $fresh(Sealer::keyed(b"k".to_vec())) {
                let plain = $plain_twin(&fresh);
                cases::keyed_seals_are_refused_without_the_key(&fresh, plain.as_ref());
            }
        }
    };
    (@plain $fresh:ident; $($case:ident),+) => {
        $(
            #[test]
            fn $case() {
                if let Some(fresh) = $fresh(Sealer::plain()) {
                    cases::$case(&fresh);
                }
            }
        )+
    };
}

/// The file store in a temporary workspace.
mod file {
    use super::*;

    struct FileTamper {
        root: PathBuf,
    }

    impl FileTamper {
        fn files(&self, kind: Kind, id: &str) -> (PathBuf, PathBuf) {
            match kind {
                None => (
                    self.root.join("runs").join(id).join("state.json"),
                    self.root.join("runs").join(id).join("audit.jsonl"),
                ),
                Some(RecordKind::Bridge) => {
                    let folder = self.root.join("bridge/runs").join(id);
                    (folder.join("state.json"), folder.join("audit.jsonl"))
                }
                Some(RecordKind::Controller) => {
                    let folder = self.root.join("bridge/runs").join(id);
                    (folder.join("controller_state.json"), folder.join("controller_audit.jsonl"))
                }
            }
        }

        fn edit_file(path: &Path, edit: &dyn Fn(&str) -> String) {
            let text = fs::read_to_string(path).expect("read");
            fs::write(path, edit(&text)).expect("write");
        }

        fn edit_lines(path: &Path, edit: &dyn Fn(&mut Vec<String>)) {
            let text = fs::read_to_string(path).expect("read");
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            edit(&mut lines);
            fs::write(path, lines.iter().map(|line| format!("{line}\n")).collect::<String>()).expect("write");
        }
    }

    impl Tamper for FileTamper {
        fn edit_state(&self, kind: Kind, id: &str, edit: &dyn Fn(&str) -> String) {
            let (state, log) = self.files(kind, id);
            if kind.is_none() && !state.exists() {
                // A running agent run's checkpoint is its log's last line.
                Self::edit_lines(&log, &|lines| {
                    let last = lines.len() - 1;
                    lines[last] = edit(&lines[last]);
                });
            } else {
                Self::edit_file(&state, edit);
            }
        }

        fn edit_event(&self, kind: Kind, id: &str, seq: u64, edit: &dyn Fn(&str) -> String) {
            let index = seq as usize - 1;
            Self::edit_lines(&self.files(kind, id).1, &|lines| lines[index] = edit(&lines[index]));
        }

        fn delete_event(&self, kind: Kind, id: &str, seq: u64) {
            Self::edit_lines(&self.files(kind, id).1, &|lines| {
                lines.remove(seq as usize - 1);
            });
        }

        fn swap_events(&self, kind: Kind, id: &str, a: u64, b: u64) {
            Self::edit_lines(&self.files(kind, id).1, &|lines| lines.swap(a as usize - 1, b as usize - 1));
        }

        fn edit_history(&self, id: &str, number: u64, edit: &dyn Fn(&str) -> String) {
            let index = number as usize - 1;
            let path = self.root.join("runs").join(id).join("history.jsonl");
            Self::edit_lines(&path, &|lines| lines[index] = edit(&lines[index]));
        }

        fn edit_plan(&self, id: &str, edit: &dyn Fn(&str) -> String) {
            Self::edit_file(&self.root.join("runs").join(id).join("plan.json"), edit);
        }

        fn add_unreadable_run(&self, id: &str) {
            fs::create_dir_all(self.root.join("runs").join(id)).expect("a run without a checkpoint");
            fs::write(self.root.join("runs/.stray.tmp"), "").expect("a stray file");
        }
    }

    /// A file store in a new temporary workspace, durable as `durability` says.
    fn fresh_with(sealer: Sealer, durability: impl FnOnce(&Path) -> crate::store::Durability) -> Option<Fresh> {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = FileStore::with_durability(dir.path(), sealer, durability(dir.path()));
        let tamper = FileTamper { root: dir.path().to_path_buf() };
        Some(Fresh { store: Box::new(store), tamper: Box::new(tamper), _guard: Box::new(dir) })
    }

    fn fresh(sealer: Sealer) -> Option<Fresh> {
        fresh_with(sealer, |_| crate::store::Durability::PerWrite)
    }

    fn plain_twin(fresh: &Fresh) -> Box<dyn RunStore> {
        let dir = fresh._guard.downcast_ref::<tempfile::TempDir>().expect("the workspace");
        Box::new(FileStore::new(dir.path(), Sealer::plain()))
    }

    conformance_suite!(fresh, plain_twin);

    /// The same cases on the file store under group commit (the service's).
    mod grouped {
        use super::*;
        use crate::store::{Durability, GroupCommit};

        fn fresh(sealer: Sealer) -> Option<Fresh> {
            fresh_with(sealer, |workspace| Durability::Group(GroupCommit::new(workspace).expect("committer")))
        }

        conformance_suite!(fresh, plain_twin);
    }

    /// The file store's own: lines past the head are a crash tail, counted
    /// and never returned, and cut off when the run is opened for writing.
    #[test]
    fn file_crash_tail() {
        for sealer in [Sealer::plain(), Sealer::keyed(b"k".to_vec())] {
            let fresh = fresh(sealer.clone()).expect("a file store");
            let store = fresh.store.as_ref();
            let mut run = one_step_checkpointed(store);
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
        }
    }

    /// The file store's own: an interrupted start leaves no folder behind.
    #[test]
    fn file_interrupted_start_is_cleared() {
        let fresh = fresh(Sealer::plain()).expect("a file store");
        let dir = fresh._guard.downcast_ref::<tempfile::TempDir>().expect("the workspace");
        let run = fresh.store.create_run("r1").expect("create");
        drop(run);
        started(fresh.store.as_ref(), "r1", "2026-01-01T00:00:00Z");
        let names: Vec<_> =
            fs::read_dir(dir.path().join("runs")).expect("runs").flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["r1"], "the interrupted start was cleared");
    }
}

/// PostgreSQL, one fresh schema per test.
#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use crate::store::pg::test_db::{TestSchema, literal, psql};

    fn fresh(sealer: Sealer) -> Option<Fresh> {
        let schema = TestSchema::create()?;
        let store = schema.store(&sealer);
        let tamper = PgTamper { conninfo: schema.conninfo.clone() };
        Some(Fresh { store: Box::new(store), tamper: Box::new(tamper), _guard: Box::new(schema) })
    }

    fn plain_twin(fresh: &Fresh) -> Box<dyn RunStore> {
        let schema = fresh._guard.downcast_ref::<TestSchema>().expect("the schema");
        Box::new(schema.store(&Sealer::plain()))
    }

    conformance_suite!(fresh, plain_twin);

    /// Tampers with the tables through `psql` (the append-only triggers
    /// switched off for the edit, as a superuser could).
    pub struct PgTamper {
        conninfo: String,
    }

    fn kind_text(kind: Kind) -> &'static str {
        match kind {
            None => "agent",
            Some(RecordKind::Bridge) => "bridge",
            Some(RecordKind::Controller) => "controller",
        }
    }

    impl PgTamper {
        fn sql(&self, sql: &str) -> String {
            psql(&self.conninfo, sql).unwrap_or_else(|error| panic!("{sql}: {error}"))
        }

        /// Runs `sql` with the append-only triggers off.
        fn unguarded(&self, sql: &str) {
            self.sql(&format!(
                "ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only; \
                 ALTER TABLE history DISABLE TRIGGER history_append_only; {sql}; \
                 ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only; \
                 ALTER TABLE history ENABLE TRIGGER history_append_only"
            ));
        }

        fn event_where(kind: Kind, id: &str, seq: u64) -> String {
            format!("kind = '{}' AND run_id = {} AND seq = {seq}", kind_text(kind), literal(id))
        }
    }

    impl Tamper for PgTamper {
        fn edit_state(&self, kind: Kind, id: &str, edit: &dyn Fn(&str) -> String) {
            let key = format!("kind = '{}' AND run_id = {}", kind_text(kind), literal(id));
            let text = self.sql(&format!("SELECT state FROM runs WHERE {key}"));
            self.sql(&format!("UPDATE runs SET state = {} WHERE {key}", literal(&edit(&text))));
        }

        fn edit_event(&self, kind: Kind, id: &str, seq: u64, edit: &dyn Fn(&str) -> String) {
            let key = Self::event_where(kind, id, seq);
            let line = self.sql(&format!("SELECT line FROM audit_events WHERE {key}"));
            self.unguarded(&format!("UPDATE audit_events SET line = {} WHERE {key}", literal(&edit(&line))));
        }

        fn delete_event(&self, kind: Kind, id: &str, seq: u64) {
            self.unguarded(&format!("DELETE FROM audit_events WHERE {}", Self::event_where(kind, id, seq)));
        }

        fn swap_events(&self, kind: Kind, id: &str, a: u64, b: u64) {
            let run = format!("e.kind = '{}' AND e.run_id = {}", kind_text(kind), literal(id));
            self.unguarded(&format!(
                "UPDATE audit_events AS e SET line = o.line, hash = o.hash FROM audit_events AS o \
                 WHERE {run} AND o.kind = e.kind AND o.run_id = e.run_id \
                     AND ((e.seq = {a} AND o.seq = {b}) OR (e.seq = {b} AND o.seq = {a}))"
            ));
        }

        fn edit_history(&self, id: &str, number: u64, edit: &dyn Fn(&str) -> String) {
            let key = format!("run_id = {} AND record_no = {number}", literal(id));
            let line = self.sql(&format!("SELECT line FROM history WHERE {key}"));
            self.unguarded(&format!("UPDATE history SET line = {} WHERE {key}", literal(&edit(&line))));
        }

        fn edit_plan(&self, id: &str, edit: &dyn Fn(&str) -> String) {
            let key = format!("run_id = {}", literal(id));
            let text = self.sql(&format!("SELECT plan FROM run_plans WHERE {key}"));
            self.sql(&format!("UPDATE run_plans SET plan = {} WHERE {key}", literal(&edit(&text))));
        }

        fn add_unreadable_run(&self, id: &str) {
            self.sql(&format!(
                "INSERT INTO runs (kind, run_id, workspace_id, state, state_version) \
                 VALUES ('agent', {}, 'test-workspace', 'not an envelope', 1)",
                literal(id)
            ));
        }
    }
}

/// The file store's own cases: the log's head lines, its views, the
/// receipts its log names.
mod file_layout {
    use std::fs;

    use serde_json::{Value, json};

    use crate::store::test_runs::{event, started, step_record};
    use crate::store::{Durability, FileStore, GroupCommit, RunStore, Sealer, StoreError};

    /// The file store per write (the command line) and under group commit
    /// (the service).
    fn file_stores() -> Vec<(tempfile::TempDir, FileStore)> {
        let per_write = tempfile::tempdir().expect("temp dir");
        let per_write_store = FileStore::new(per_write.path(), Sealer::plain());
        let grouped = tempfile::tempdir().expect("temp dir");
        let commit = GroupCommit::new(grouped.path()).expect("committer");
        let grouped_store = FileStore::with_durability(grouped.path(), Sealer::plain(), Durability::Group(commit));
        vec![(per_write, per_write_store), (grouped, grouped_store)]
    }

    #[test]
    fn an_interrupted_start_says_what_its_log_holds_and_its_id_stays_free() {
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
}
