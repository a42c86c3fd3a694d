//! [`FileStore`]: the [`RunStore`] over one workspace's folders, the layout
//! the README documents:
//!
//! | what | where |
//! |---|---|
//! | agent runs | `runs/<id>/{audit.jsonl,history.jsonl,plan.json,state.json}` (the log and its views) |
//! | bridge records | `bridge/runs/<id>/{state.json,audit.jsonl}` |
//! | controller records | `bridge/runs/<id>/{controller_state.json,controller_audit.jsonl}` |
//! | receipts | `.planrun/receipts/<sha256 of key>.json` (sealed; the ones a run's verified log names are checked on every read of the run) |
//!
//! A file store makes its writes durable per write (the command line) or
//! under group commit (the service: [`GroupFileStores`], see
//! `group_commit.rs`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use crate::store::error::io_error;
use crate::store::file::record_dir::{RecordOptions, files, load_record, records_folder};
use crate::store::file::run_load::{load_run, run_started_at, runs_folder};
use crate::store::{
    Durability, GroupCommit, Holder, Lease, LoadedRecord, LoadedRun, Receipt, ReceiptError, ReceiptStore, RecordDir,
    RecordHandle, RecordKind, RunDir, RunHandle, RunListing, RunStore, RunsPlace, Sealer, StoreError, StoreFactory,
    validate_run_id,
};

/// The [`StoreFactory`] of [`FileStore`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStores;

impl StoreFactory for FileStores {
    fn open(&self, workspace: &Path, sealer: &Sealer) -> Arc<dyn RunStore> {
        Arc::new(FileStore::new(workspace, sealer.clone()))
    }

    fn group_commit(&self, workspace: &Path) -> io::Result<Option<Box<dyn StoreFactory>>> {
        Ok(Some(Box::new(GroupFileStores::new(workspace)?)))
    }
}

/// The [`StoreFactory`] of the service: [`FileStore`]s of its workspace
/// sharing one [`GroupCommit`] (any other workspace gets per-write
/// durability: the committer's barrier covers only its file system).
#[derive(Debug, Clone)]
pub struct GroupFileStores {
    workspace: PathBuf,
    commit: GroupCommit,
}

impl GroupFileStores {
    /// The stores of `workspace` (an existing folder), under one committer.
    pub fn new(workspace: &Path) -> io::Result<GroupFileStores> {
        Ok(GroupFileStores { workspace: workspace.to_path_buf(), commit: GroupCommit::new(workspace)? })
    }
}

impl StoreFactory for GroupFileStores {
    fn open(&self, workspace: &Path, sealer: &Sealer) -> Arc<dyn RunStore> {
        let durability =
            if workspace == self.workspace { Durability::Group(self.commit.clone()) } else { Durability::PerWrite };
        Arc::new(FileStore::with_durability(workspace, sealer.clone(), durability))
    }
}

/// The file store of one workspace.
#[derive(Debug, Clone)]
pub struct FileStore {
    workspace: PathBuf,
    sealer: Sealer,
    durability: Durability,
    receipts: ReceiptStore,
}

impl FileStore {
    /// The store of `workspace` (folders are created on first write),
    /// sealing checkpoints with `sealer`; every write durable on its own.
    pub fn new(workspace: &Path, sealer: Sealer) -> Self {
        FileStore::with_durability(workspace, sealer, Durability::PerWrite)
    }

    /// As [`FileStore::new`], making writes durable as `durability` says.
    pub fn with_durability(workspace: &Path, sealer: Sealer, durability: Durability) -> Self {
        FileStore {
            workspace: workspace.to_path_buf(),
            durability,
            receipts: ReceiptStore::new(workspace, sealer.clone()),
            sealer,
        }
    }

    fn record_options(&self, kind: RecordKind) -> RecordOptions {
        RecordOptions { kind, sealer: self.sealer.clone(), durability: self.durability.clone() }
    }

    fn receipts_folder(&self) -> PathBuf {
        self.workspace.join(".planrun").join("receipts")
    }

    /// The time `field` of the checkpoint at `state_path`, if it can be read.
    fn started_at(&self, state_path: &Path, field: &str) -> Option<String> {
        let text = fs::read_to_string(state_path).ok()?;
        let payload = self.sealer.open(&text).ok()?;
        payload.get(field).and_then(Value::as_str).map(str::to_string)
    }
}

impl RunStore for FileStore {
    fn create_run(&self, run_id: &str) -> Result<Box<dyn RunHandle>, StoreError> {
        Ok(Box::new(RunDir::create(&self.workspace, run_id, self.sealer.clone(), self.durability.clone())?))
    }

    fn open_run(&self, run_id: &str) -> Result<(Box<dyn RunHandle>, LoadedRun), StoreError> {
        let (dir, loaded) = RunDir::open(&self.workspace, run_id, self.sealer.clone(), self.durability.clone())?;
        // The receipts the verified log names are part of what it vouches for.
        self.receipts.check_references(run_id, &loaded.audit)?;
        Ok((Box::new(dir), loaded))
    }

    fn read_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        let loaded = load_run(&self.workspace, run_id, &self.sealer)?;
        self.receipts.check_references(run_id, &loaded.audit)?;
        Ok(loaded)
    }

    fn holder(&self, run_id: &str) -> Result<Holder, StoreError> {
        let folder = runs_folder(&self.workspace).join(run_id);
        Lease::holder(&folder).map_err(io_error("open", &folder))
    }

    fn record_holder(&self, _kind: RecordKind, id: &str) -> Result<Holder, StoreError> {
        let folder = records_folder(&self.workspace).join(id);
        Lease::holder(&folder).map_err(io_error("open", &folder))
    }

    fn run_state_location(&self, run_id: &str) -> String {
        runs_folder(&self.workspace).join(run_id).join("state.json").display().to_string()
    }

    fn runs_place(&self) -> RunsPlace {
        RunsPlace::Folder(runs_folder(&self.workspace))
    }

    fn list_runs(&self) -> Result<Vec<RunListing>, StoreError> {
        list_newest_first(&runs_folder(&self.workspace), None, |folder| run_started_at(folder, &self.sealer))
    }

    fn list_records(&self, kind: RecordKind) -> Result<Vec<RunListing>, StoreError> {
        let state = files(kind).state;
        list_newest_first(&records_folder(&self.workspace), Some(state), |folder| {
            self.started_at(&folder.join(state), "created_at")
        })
    }

    fn create_record(&self, kind: RecordKind, id: &str) -> Result<Box<dyn RecordHandle>, StoreError> {
        Ok(Box::new(RecordDir::create(&self.workspace, id, self.record_options(kind))?))
    }

    fn open_record(&self, kind: RecordKind, id: &str) -> Result<(Box<dyn RecordHandle>, LoadedRecord), StoreError> {
        let (dir, loaded) = RecordDir::open(&self.workspace, id, self.record_options(kind))?;
        Ok((Box::new(dir), loaded))
    }

    fn read_record(&self, kind: RecordKind, id: &str) -> Result<LoadedRecord, StoreError> {
        load_record(&self.workspace, kind, id, &self.sealer)
    }

    fn get_receipt(&self, key: &str) -> Result<Option<Receipt>, ReceiptError> {
        self.receipts.get(key)
    }

    fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        self.receipts.put(receipt).map_err(io_error("write receipt in", &self.receipts_folder()))
    }

    fn remove_receipt(&self, key: &str) -> Result<(), StoreError> {
        self.receipts.remove(key).map_err(io_error("remove receipt in", &self.receipts_folder()))
    }

    fn make_durable(&self) -> Result<(), StoreError> {
        match &self.durability {
            Durability::PerWrite => Ok(()),
            Durability::Group(commit) => commit.barrier().map_err(io_error("make durable", &self.workspace)),
        }
    }
}

/// The folders of `parent` named like ids (holding `required` when given),
/// newest first by `started_at`; entries without a readable time last; ties
/// by id. A missing `parent` is an empty list.
fn list_newest_first(
    parent: &Path,
    required: Option<&str>,
    started_at: impl Fn(&Path) -> Option<String>,
) -> Result<Vec<RunListing>, StoreError> {
    let entries = match fs::read_dir(parent) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::Io { action: "list", path: parent.to_path_buf(), source }),
    };
    let mut listed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error("list", parent))?;
        let Some(run_id) = entry.file_name().to_str().map(str::to_string) else { continue };
        let folder = entry.path();
        // Only folders named like ids are runs (temp files, stray entries
        // are not); a record folder of another kind lacks `required`.
        if validate_run_id(&run_id).is_err()
            || !folder.is_dir()
            || required.is_some_and(|name| !folder.join(name).is_file())
        {
            continue;
        }
        listed.push(RunListing { started_at: started_at(&folder), run_id });
    }
    let instant = |listing: &RunListing| listing.started_at.as_deref().and_then(|text| text.parse::<Timestamp>().ok());
    listed.sort_by(|a, b| instant(b).cmp(&instant(a)).then_with(|| b.run_id.cmp(&a.run_id)));
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::store::NewEvent;

    /// A temp workspace and its file store under group commit, with the
    /// committer (to count its barriers).
    fn grouped() -> (tempfile::TempDir, GroupCommit, FileStore) {
        let dir = tempfile::tempdir().expect("temp dir");
        let commit = GroupCommit::new(dir.path()).expect("committer");
        let store = FileStore::with_durability(dir.path(), Sealer::plain(), Durability::Group(commit.clone()));
        (dir, commit, store)
    }

    fn event() -> NewEvent<'static> {
        NewEvent {
            ts: "2026-01-01T00:00:00Z".into(),
            event_type: "run_created",
            step_id: None,
            status: None,
            details: Map::new(),
        }
    }

    /// The barriers a bridge record costs under group commit: none at its
    /// first checkpoint (written at once, so it is listed while it runs,
    /// and before its first event, so it names no log line), none at later
    /// ones (kept in memory), one when the request commits the last one
    /// (the request is answered after it). A first checkpoint that names
    /// log lines waits for one; `make_durable` is one more.
    #[test]
    fn under_group_commit_a_record_writes_its_first_and_its_last_checkpoint_only() {
        let (dir, commit, store) = grouped();
        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("create");
        let status = || store.read_record(RecordKind::Bridge, "br-1").expect("readable").state["status"].clone();
        assert_eq!(record.checkpoint(&json!({"run_id": "br-1", "status": "created"}), 0).expect("first"), 1);
        assert_eq!((commit.barriers(), status()), (0, json!("created")), "it names no log line");
        record.append_event(event()).expect("event");
        assert_eq!(record.checkpoint(&json!({"run_id": "br-1", "status": "running"}), 1).expect("second"), 2);
        record.append_event(event()).expect("event");
        assert_eq!(record.checkpoint(&json!({"run_id": "br-1", "status": "done"}), 2).expect("third"), 3);
        assert_eq!((commit.barriers(), status()), (0, json!("created")), "later checkpoints wait for the commit");
        record.commit().expect("commit");
        assert_eq!((commit.barriers(), status()), (1, json!("done")));
        record.commit().expect("nothing pending");
        assert_eq!(commit.barriers(), 1);
        store.make_durable().expect("barrier");
        assert_eq!(commit.barriers(), 2);
        let mut named = store.create_record(RecordKind::Bridge, "br-2").expect("create");
        named.append_event(event()).expect("event");
        named.checkpoint(&json!({"run_id": "br-2", "status": "created"}), 0).expect("first");
        assert_eq!(commit.barriers(), 3, "a first checkpoint that names a log line waits for it");
        let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("readable");
        assert_eq!((loaded.state_version, loaded.audit.len()), (3, 2));
        // A pending checkpoint is written when the handle goes (an error path).
        record.checkpoint(&json!({"run_id": "br-1", "status": "failed"}), 3).expect("fourth");
        drop(record);
        assert_eq!(status(), json!("failed"));
        let per_write = FileStore::new(dir.path(), Sealer::plain());
        per_write.make_durable().expect("nothing to do");
    }

    /// A record done wholly in memory holds even its first checkpoint under
    /// group commit: until the commit nothing is on disk but its log (no
    /// state file: not listed, not readable), then one state file is
    /// written, its last, after one barrier. Per write it is written at once.
    #[test]
    fn under_group_commit_a_record_done_in_memory_writes_its_last_checkpoint_only() {
        let (dir, commit, store) = grouped();
        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("create");
        let state_file = dir.path().join("bridge/runs/br-1/state.json");
        assert_eq!(record.checkpoint_held(&json!({"run_id": "br-1", "status": "created"}), 0).expect("first"), 1);
        record.append_event(event()).expect("event");
        assert_eq!(record.checkpoint(&json!({"run_id": "br-1", "status": "running"}), 1).expect("second"), 2);
        record.append_event(event()).expect("event");
        assert_eq!(record.checkpoint(&json!({"run_id": "br-1", "status": "done"}), 2).expect("third"), 3);
        assert!(!state_file.exists(), "no state is written before the commit");
        assert!(matches!(store.read_record(RecordKind::Bridge, "br-1"), Err(StoreError::NotFound { .. })));
        assert!(store.list_records(RecordKind::Bridge).expect("list").is_empty());
        assert_eq!(commit.barriers(), 0);
        record.commit().expect("commit");
        let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("readable");
        assert_eq!((commit.barriers(), loaded.state["status"].clone()), (1, json!("done")));
        assert_eq!((loaded.state_version, loaded.audit.len()), (3, 2));
        let names: Vec<_> = fs::read_dir(state_file.parent().expect("folder"))
            .expect("folder")
            .map(|entry| entry.expect("entry").file_name().into_string().expect("name"))
            .collect();
        assert_eq!(names.len(), 2, "the log and one state file, no temp file: {names:?}");
        drop(record);

        let per_write = FileStore::new(dir.path(), Sealer::plain());
        let mut record = per_write.create_record(RecordKind::Bridge, "br-2").expect("create");
        record.checkpoint_held(&json!({"run_id": "br-2", "status": "created"}), 0).expect("first");
        let loaded = per_write.read_record(RecordKind::Bridge, "br-2").expect("written at once per write");
        assert_eq!(loaded.state["status"], json!("created"));
    }

    /// A crash that loses only a last checkpoint's rename (the barrier
    /// before it synced the temp file): the record reads as the temp file's
    /// newer state, and the next writer renames it into place before it
    /// reuses the name. A temp file that is torn, not newer, or names log
    /// lines the log does not hold is a write that never completed and is
    /// ignored; a tampered state file is refused all the same.
    #[test]
    fn a_synced_temp_file_whose_rename_was_lost_is_the_newer_state() {
        let (dir, _, store) = grouped();
        let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("create");
        record.checkpoint(&json!({"run_id": "br-1", "status": "created"}), 0).expect("first");
        let folder = dir.path().join("bridge/runs/br-1");
        let (state_path, temp, log) =
            (folder.join("state.json"), folder.join(".state.json.tmp"), folder.join("audit.jsonl"));
        let first = fs::read(&state_path).expect("first state");
        record.append_event(event()).expect("event");
        record.checkpoint(&json!({"run_id": "br-1", "status": "done"}), 1).expect("last");
        record.commit().expect("commit");
        drop(record);
        let last = fs::read(&state_path).expect("last state");
        assert!(!temp.exists(), "renamed");
        let read = || {
            let loaded = store.read_record(RecordKind::Bridge, "br-1").expect("readable");
            (loaded.state["status"].as_str().map(str::to_owned), loaded.state_version)
        };
        let (done, created) = ((Some("done".to_string()), 2), (Some("created".to_string()), 1));
        let lose_rename = || {
            fs::write(&temp, &last).expect("temp");
            fs::write(&state_path, &first).expect("older state");
        };
        lose_rename();
        assert_eq!(read(), done, "the synced temp file is the answered state");
        fs::write(&temp, &last[..last.len() / 2]).expect("torn");
        assert_eq!(read(), created, "a torn temp file is ignored");
        fs::write(&temp, &first).expect("not newer");
        assert_eq!(read(), created, "a temp file no newer than the state file is ignored");
        lose_rename();
        let lines = fs::read(&log).expect("log");
        fs::write(&log, b"").expect("the log lost its line");
        assert_eq!(read(), created, "a temp file naming lines the log lacks is ignored");
        fs::write(&log, &lines).expect("log back");
        fs::write(&state_path, b"{}").expect("tampered");
        assert!(matches!(store.read_record(RecordKind::Bridge, "br-1"), Err(StoreError::Tampered { .. })));
        lose_rename();
        let (mut reopened, loaded) = store.open_record(RecordKind::Bridge, "br-1").expect("open");
        assert_eq!(loaded.state_version, 2);
        assert_eq!((temp.exists(), fs::read(&state_path).expect("state")), (false, last), "adopted");
        reopened.append_event(event()).expect("event");
        reopened.checkpoint(&json!({"run_id": "br-1", "status": "failed"}), 2).expect("next");
        reopened.commit().expect("commit");
        drop(reopened);
        assert_eq!(read(), (Some("failed".to_string()), 3));
    }

    /// An agent run's checkpoint under group commit: the first one (nothing
    /// has run) waits for none, every later one for one barrier shared with
    /// the service's other runs (it covers the log and the folder entries);
    /// no sync of its own.
    #[test]
    fn under_group_commit_a_run_checkpoint_waits_for_one_barrier() {
        let (_dir, commit, store) = grouped();
        let mut run = store.create_run("r1").expect("create");
        run.append_event(event()).expect("event");
        run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
        assert_eq!(commit.barriers(), 0, "the plan copy waits for the first checkpoint");
        let saved = || NewEvent { event_type: "state_saved", ..event() };
        run.append_event(saved()).expect("event");
        let mut state = crate::store::test_runs::state("r1", "2026-01-01T00:00:00Z");
        run.checkpoint(&state, 0).expect("checkpoint");
        assert_eq!(commit.barriers(), 0, "the first checkpoint covers nothing that ran");
        assert_eq!(store.read_run("r1").expect("published and readable").state.state_version, 1);
        run.append_event(saved()).expect("event");
        state.state_version = 2;
        state.counters.tool_calls = 1;
        run.checkpoint(&state, 1).expect("checkpoint");
        assert_eq!(commit.barriers(), 1);
        assert_eq!(store.read_run("r1").expect("readable").state.state_version, 2);
    }

    /// The checkpoint after a read waits for no barrier of its own: the
    /// next checkpoint's, or `make_durable` before a step that may change
    /// the world, covers it (once; nothing left, no barrier).
    #[test]
    fn under_group_commit_a_checkpoint_after_a_read_waits_for_the_next_barrier() {
        let (_dir, commit, store) = grouped();
        let mut run = store.create_run("r1").expect("create");
        run.write_plan(&json!({"id": "p", "steps": []})).expect("plan");
        let saved = || NewEvent { event_type: "state_saved", ..event() };
        let mut state = crate::store::test_runs::state("r1", "2026-01-01T00:00:00Z");
        run.append_event(saved()).expect("event");
        run.checkpoint(&state, 0).expect("first");
        for version in [2, 3] {
            state.state_version = version;
            state.counters.tool_calls = version;
            run.append_event(saved()).expect("event");
            run.checkpoint_reads(&state, version - 1).expect("after a read");
            assert_eq!(store.read_run("r1").expect("written").state.state_version, version);
        }
        assert_eq!(commit.barriers(), 0, "reads wait for the next barrier");
        run.make_durable().expect("before an effect");
        assert_eq!(commit.barriers(), 1, "one barrier covers both");
        run.make_durable().expect("nothing left");
        assert_eq!(commit.barriers(), 1);
        state.state_version = 4;
        run.append_event(saved()).expect("event");
        run.checkpoint(&state, 3).expect("after an effect");
        assert_eq!(commit.barriers(), 2);
    }

    #[test]
    fn the_service_factory_groups_its_own_workspace_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        let other = tempfile::tempdir().expect("temp dir");
        assert!(FileStores.group_commit(dir.path()).expect("committer").is_some(), "the file store groups");
        let stores = GroupFileStores::new(dir.path()).expect("committer");
        for (workspace, barriers) in [(dir.path(), 1), (other.path(), 1)] {
            let store = stores.open(workspace, &Sealer::plain());
            let mut record = store.create_record(RecordKind::Bridge, "br-1").expect("create");
            record.append_event(event()).expect("event");
            record.checkpoint(&json!({"run_id": "br-1"}), 0).expect("first");
            assert_eq!(stores.commit.barriers(), barriers, "{}", workspace.display());
        }
    }
}
