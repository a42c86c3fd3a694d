//! `planrun export`: a run of a database store written as the file
//! store's folder, `<out>/runs/<run_id>/`, so that the file store's
//! verifier (`planrun verify --workspace <out>`), `show` and the snapshot
//! tests read it as they read any run.
//!
//! The folder is built as `runs/<run_id>~export/` and renamed into place
//! at the end, never over an existing run: an export that fails midway
//! leaves no folder that claims the id.

use std::fs;
use std::path::{Path, PathBuf};

use crate::store::error::io_error;
use crate::store::{StoreError, write_atomic};

/// The bytes of a run's four files.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub state: String,
    pub plan: String,
    pub history: String,
    pub audit: String,
}

/// Writes `files` as `<out>/runs/<run_id>/`; [`StoreError::RunExists`]
/// when that folder exists.
pub fn write_run_folder(out: &Path, run_id: &str, files: &RunFiles) -> Result<PathBuf, StoreError> {
    let runs = out.join("runs");
    let folder = runs.join(run_id);
    if folder.exists() {
        return Err(StoreError::RunExists { id: run_id.to_string(), path: runs });
    }
    let building = runs.join(format!("{run_id}~export"));
    if building.exists() {
        fs::remove_dir_all(&building).map_err(io_error("remove", &building))?;
    }
    fs::create_dir_all(&building).map_err(io_error("create", &building))?;
    for (name, text) in [
        ("plan.json", &files.plan),
        ("history.jsonl", &files.history),
        ("audit.jsonl", &files.audit),
        ("state.json", &files.state),
    ] {
        let path = building.join(name);
        write_atomic(&path, text.as_bytes()).map_err(io_error("write", &path))?;
    }
    if folder.exists() {
        return Err(StoreError::RunExists { id: run_id.to_string(), path: runs });
    }
    fs::rename(&building, &folder).map_err(io_error("publish", &folder))?;
    fs::File::open(&runs).and_then(|handle| handle.sync_all()).map_err(io_error("sync", &runs))?;
    Ok(folder)
}
