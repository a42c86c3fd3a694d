//! What opening a run's folder repairs before the run goes on: a start
//! killed before its folder was published, a crash tail past the last
//! head, and views (`history.jsonl`, `plan.json`) behind the log.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde_json::Value;

use crate::store::error::{io_error, serialize_error};
use crate::store::file::atomic::replace_unsynced;
use crate::store::file::folders::{append_log, seal_bytes};
use crate::store::file::run_load::{creating_folder, has_checkpoint, missing_run};
use crate::store::records::head::{Links, linked_payload, plan_bytes};
use crate::store::{Lease, LoadedRun, Sealer, StoreError};

/// A start killed between its first checkpoint line and the folder's
/// publication left a log with a plan and a head (nothing ran yet):
/// publishes it as `runs/<id>/` under its lock (a creator still alive
/// holds the lock: [`StoreError::Locked`]), so the run is opened like any
/// other. Anything less is no run ([`missing_run`]).
pub(crate) fn adopt_interrupted_start(
    workspace: &Path,
    run_id: &str,
    path: &Path,
    sealer: &Sealer,
) -> Result<Lease, StoreError> {
    let creating = creating_folder(workspace, run_id);
    if !creating.is_dir() {
        return Err(missing_run(workspace, run_id, sealer));
    }
    // The lock is on the folder itself, so it moves with it.
    let lease = Lease::take(&creating, run_id)?;
    if !has_checkpoint(&creating) {
        return Err(missing_run(workspace, run_id, sealer));
    }
    rustix::fs::renameat_with(rustix::fs::CWD, &creating, rustix::fs::CWD, path, rustix::fs::RenameFlags::NOREPLACE)
        .map_err(|error| StoreError::Io { action: "publish", path: path.to_path_buf(), source: error.into() })?;
    Ok(lease)
}

/// Cuts `path` to its first `len` bytes (a crash tail past the head), if
/// it is longer (not synced: see [`RunDir::open`]).
pub(crate) fn truncate_to(path: &Path, len: usize) -> Result<(), StoreError> {
    let file = OpenOptions::new().write(true).open(path).map_err(io_error("open", path))?;
    let size = file.metadata().map_err(io_error("read", path))?.len();
    if size > len as u64 {
        file.set_len(len as u64).map_err(io_error("truncate", path))?;
    }
    Ok(())
}

/// Brings the views of an opened run up to the log: `history.jsonl` cut
/// to the covered records it holds (a crash tail past them dropped) and
/// the ones it lacks appended; a missing `plan.json` written again. Not
/// synced: the log is the record, and the views are checked against it on
/// every read.
pub(crate) fn repair_views(path: &Path, loaded: &LoadedRun, sealer: &Sealer) -> Result<(), StoreError> {
    let history_path = path.join("history.jsonl");
    if !history_path.exists() {
        fs::File::create(&history_path).map_err(io_error("create", &history_path))?;
    }
    truncate_to(&history_path, loaded.heads.history_len)?;
    let missing = &loaded.history[loaded.history.len() - loaded.heads.history_behind..];
    if !missing.is_empty() {
        let mut bytes = Vec::new();
        for record in missing {
            serde_json::to_writer(&mut bytes, record).map_err(|error| serialize_error(&history_path, error))?;
            bytes.push(b'\n');
        }
        let mut file = append_log(path, "history.jsonl")?;
        file.write_all(&bytes).map_err(io_error("append to", &history_path))?;
    }
    if loaded.heads.plan_behind {
        let plan_path = path.join("plan.json");
        let bytes = plan_bytes(&loaded.plan).map_err(|error| serialize_error(&plan_path, error))?;
        replace_unsynced(&plan_path, &bytes, || Ok(())).map_err(io_error("write", &plan_path))?;
    }
    if loaded.heads.state_behind {
        let state_path = path.join("state.json");
        let payload = linked_payload(
            &loaded.state,
            Links { plan_hash: &loaded.heads.plan_hash, history_hash: loaded.heads.history_hash.as_deref() },
        )
        .map_err(|error| serialize_error(&state_path, error))?;
        let sealed = seal_bytes(sealer, &state_path, Value::Object(payload), &mut Vec::new())?.to_vec();
        replace_unsynced(&state_path, &sealed, || Ok(())).map_err(io_error("write", &state_path))?;
    }
    Ok(())
}
