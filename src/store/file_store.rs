//! [`FileStore`]: the [`RunStore`] over one workspace's folders, the layout
//! the README documents:
//!
//! | what | where |
//! |---|---|
//! | agent runs | `runs/<id>/{audit.jsonl,history.jsonl,plan.json,state.json,.lock}` (the log and its views) |
//! | bridge records | `bridge/runs/<id>/{state.json,audit.jsonl,.lock}` |
//! | controller records | `bridge/runs/<id>/{controller_state.json,controller_audit.jsonl,.lock}` |
//! | receipts | `.planrun/receipts/<sha256 of key>.json` (sealed; the ones a run's verified log names are checked on every read of the run) |

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use crate::store::error::io_error;
use crate::store::record_dir::{files, load_record, records_folder};
use crate::store::run_load::{load_run, run_started_at, runs_folder};
use crate::store::{
    LoadedRecord, LoadedRun, Receipt, ReceiptError, ReceiptStore, RecordDir, RecordHandle, RecordKind, RunDir,
    RunHandle, RunListing, RunStore, Sealer, StoreError, StoreFactory, validate_run_id,
};

/// The [`StoreFactory`] of [`FileStore`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileStores;

impl StoreFactory for FileStores {
    fn open(&self, workspace: &Path, sealer: &Sealer) -> Arc<dyn RunStore> {
        Arc::new(FileStore::new(workspace, sealer.clone()))
    }
}

/// The file store of one workspace.
#[derive(Debug, Clone)]
pub struct FileStore {
    workspace: PathBuf,
    sealer: Sealer,
    receipts: ReceiptStore,
}

impl FileStore {
    /// The store of `workspace` (folders are created on first write),
    /// sealing checkpoints with `sealer`.
    pub fn new(workspace: &Path, sealer: Sealer) -> Self {
        FileStore { workspace: workspace.to_path_buf(), receipts: ReceiptStore::new(workspace, sealer.clone()), sealer }
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
        Ok(Box::new(RunDir::create(&self.workspace, run_id, self.sealer.clone())?))
    }

    fn open_run(&self, run_id: &str) -> Result<(Box<dyn RunHandle>, LoadedRun), StoreError> {
        let (dir, loaded) = RunDir::open(&self.workspace, run_id, self.sealer.clone())?;
        // The receipts the verified log names are part of what it vouches for.
        self.receipts.check_references(run_id, &loaded.audit)?;
        Ok((Box::new(dir), loaded))
    }

    fn read_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        let loaded = load_run(&self.workspace, run_id, &self.sealer)?;
        self.receipts.check_references(run_id, &loaded.audit)?;
        Ok(loaded)
    }

    fn run_state_location(&self, run_id: &str) -> String {
        runs_folder(&self.workspace).join(run_id).join("state.json").display().to_string()
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
        Ok(Box::new(RecordDir::create(&self.workspace, kind, id, self.sealer.clone())?))
    }

    fn open_record(&self, kind: RecordKind, id: &str) -> Result<(Box<dyn RecordHandle>, LoadedRecord), StoreError> {
        let (dir, loaded) = RecordDir::open(&self.workspace, kind, id, self.sealer.clone())?;
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
