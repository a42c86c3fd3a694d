//! `planrun export`: a run of a database store written as the file
//! store's folder, `<out>/runs/<run_id>/`, so that the file store's
//! verifier (`planrun verify --workspace <out>`), `show` and the snapshot
//! tests read it as they read any run.
//!
//! The receipts the run's log names (`receipt_link`) are written too, as
//! the file store keeps them (`.planrun/receipts/`, sealed), so that the
//! file store's check of those references holds; one that is there already
//! must be the same receipt.
//!
//! The folder is built as `runs/<run_id>~export/` and renamed into place
//! at the end, after the receipts, never over an existing run: an export
//! that fails midway leaves no folder that claims the id.

use std::fs;
use std::path::{Path, PathBuf};

use crate::store::error::io_error;
use crate::store::file::receipts::ReceiptStore;
use crate::store::{Receipt, Sealer, StoreError, write_atomic};

/// The bytes of a run's files.
#[derive(Debug, Clone)]
pub struct RunFiles {
    /// `state.json`, the compact head: only for a run that paused or
    /// ended (the file store writes it then).
    pub state: Option<String>,
    pub plan: String,
    pub history: String,
    pub audit: String,
    /// The receipts the log names, verified.
    pub receipts: Vec<Receipt>,
}

/// Writes `files` as `<out>/runs/<run_id>/` and its receipts in
/// `<out>/.planrun/receipts/`, sealed with `sealer`;
/// [`StoreError::ExportExists`] when that folder exists.
pub fn write_run_folder(out: &Path, run_id: &str, files: &RunFiles, sealer: &Sealer) -> Result<PathBuf, StoreError> {
    let runs = out.join("runs");
    let folder = runs.join(run_id);
    if folder.exists() {
        return Err(StoreError::ExportExists { path: folder });
    }
    let building = runs.join(format!("{run_id}~export"));
    if building.exists() {
        fs::remove_dir_all(&building).map_err(io_error("remove", &building))?;
    }
    fs::create_dir_all(&building).map_err(io_error("create", &building))?;
    for (name, text) in [
        ("plan.json", Some(&files.plan)),
        ("history.jsonl", Some(&files.history)),
        ("audit.jsonl", Some(&files.audit)),
        ("state.json", files.state.as_ref()),
    ] {
        let Some(text) = text else { continue };
        let path = building.join(name);
        write_atomic(&path, text.as_bytes()).map_err(io_error("write", &path))?;
    }
    write_receipts(out, &files.receipts, sealer)?;
    if folder.exists() {
        return Err(StoreError::ExportExists { path: folder });
    }
    fs::rename(&building, &folder).map_err(io_error("publish", &folder))?;
    fs::File::open(&runs).and_then(|handle| handle.sync_all()).map_err(io_error("sync", &runs))?;
    Ok(folder)
}

/// Writes `receipts` into `<out>`'s receipt folder; one that is there
/// already must be the same receipt (another run's records may rely on it).
fn write_receipts(out: &Path, receipts: &[Receipt], sealer: &Sealer) -> Result<(), StoreError> {
    let store = ReceiptStore::new(out, sealer.clone());
    let folder = out.join(".planrun").join("receipts");
    for receipt in receipts {
        match store.get(&receipt.key) {
            Ok(None) => store.put(receipt).map_err(io_error("write", &folder))?,
            Ok(Some(there)) if there == *receipt => {}
            Ok(Some(_)) | Err(_) => {
                let message = format!("another receipt for key `{}` is there already", receipt.key);
                return Err(StoreError::Io { action: "write", path: folder, source: std::io::Error::other(message) });
            }
        }
    }
    Ok(())
}
