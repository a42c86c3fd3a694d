//! [`FileStore`]: the [`RunStore`] over one workspace's folders, the layout
//! the README documents:
//!
//! | what | where |
//! |---|---|
//! | agent runs | `runs/<id>/{plan.json,state.json,history.jsonl,audit.jsonl,.lock}` |
//! | bridge records | `bridge/runs/<id>/{state.json,audit.jsonl,.lock}` |
//! | controller records | `bridge/runs/<id>/{controller_state.json,controller_audit.jsonl,.lock}` |
//! | receipts | `.planrun/receipts/<sha256 of key>.json` |

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use serde_json::Value;

use crate::store::error::io_error;
use crate::store::record_dir::load_record;
use crate::store::run_dir::{load_run, runs_folder};
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
        FileStore { workspace: workspace.to_path_buf(), sealer, receipts: ReceiptStore::new(workspace) }
    }

    fn receipts_folder(&self) -> PathBuf {
        self.workspace.join(".planrun").join("receipts")
    }

    /// The `started_at` of a run's checkpoint, if it can be read.
    fn started_at(&self, run_id: &str) -> Option<String> {
        let text = fs::read_to_string(runs_folder(&self.workspace).join(run_id).join("state.json")).ok()?;
        let payload = self.sealer.open(&text).ok()?;
        payload.get("started_at").and_then(Value::as_str).map(str::to_string)
    }
}

impl RunStore for FileStore {
    fn create_run(&self, run_id: &str) -> Result<Box<dyn RunHandle>, StoreError> {
        Ok(Box::new(RunDir::create(&self.workspace, run_id, self.sealer.clone())?))
    }

    fn open_run(&self, run_id: &str) -> Result<(Box<dyn RunHandle>, LoadedRun), StoreError> {
        let (dir, loaded) = RunDir::open(&self.workspace, run_id, self.sealer.clone())?;
        Ok((Box::new(dir), loaded))
    }

    fn read_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        load_run(&self.workspace, run_id, &self.sealer)
    }

    fn run_state_location(&self, run_id: &str) -> String {
        runs_folder(&self.workspace).join(run_id).join("state.json").display().to_string()
    }

    fn list_runs(&self) -> Result<Vec<RunListing>, StoreError> {
        let folder = runs_folder(&self.workspace);
        let entries = match fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(StoreError::Io { action: "list", path: folder, source }),
        };
        let mut runs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error("list", &folder))?;
            let Some(run_id) = entry.file_name().to_str().map(str::to_string) else { continue };
            // Only folders named like run ids are runs (temp files, stray
            // entries are not).
            if validate_run_id(&run_id).is_err() || !entry.path().is_dir() {
                continue;
            }
            let started_at = self.started_at(&run_id);
            runs.push(RunListing { run_id, started_at });
        }
        let instant =
            |listing: &RunListing| listing.started_at.as_deref().and_then(|text| text.parse::<Timestamp>().ok());
        // Newest first; runs without a readable start time last; ties by id.
        runs.sort_by(|a, b| instant(b).cmp(&instant(a)).then_with(|| b.run_id.cmp(&a.run_id)));
        Ok(runs)
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
