//! The file operations run and record folders share: a folder created with
//! one `mkdir`, log files created or opened for appending, a payload sealed
//! into its envelope's bytes, and an event appended to an audit log.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::store::error::{io_error, serialize_error};
use crate::store::{AuditLog, NewEvent, Sealer, StoreError};

/// Creates `folder` with one `mkdir`, so the check and the creation are
/// one step and two processes cannot both win; [`StoreError::RunExists`]
/// when it exists.
pub(crate) fn create_folder(parent: &Path, id: &str) -> Result<PathBuf, StoreError> {
    fs::create_dir_all(parent).map_err(io_error("create", parent))?;
    let path = parent.join(id);
    match fs::create_dir(&path) {
        Ok(()) => Ok(path),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            Err(StoreError::RunExists { id: id.to_string(), path })
        }
        Err(error) => Err(StoreError::Io { action: "create", path, source: error }),
    }
}

/// Creates `<folder>/<name>` for appending; it must not exist.
pub(crate) fn create_log(folder: &Path, name: &str) -> Result<fs::File, StoreError> {
    let path = folder.join(name);
    OpenOptions::new().append(true).create_new(true).open(&path).map_err(io_error("create", &path))
}

/// Opens the existing `<folder>/<name>` for appending.
pub(crate) fn append_log(folder: &Path, name: &str) -> Result<fs::File, StoreError> {
    let path = folder.join(name);
    OpenOptions::new().append(true).open(&path).map_err(io_error("open", &path))
}

/// `payload` sealed in its envelope, pretty-printed, in `buffer`.
pub(crate) fn seal_bytes<'b>(
    sealer: &Sealer,
    path: &Path,
    payload: Value,
    buffer: &'b mut Vec<u8>,
) -> Result<&'b [u8], StoreError> {
    let envelope = sealer.seal(payload).map_err(|error| serialize_error(path, error))?;
    buffer.clear();
    serde_json::to_writer_pretty(&mut *buffer, &envelope).map_err(|error| serialize_error(path, error))?;
    buffer.push(b'\n');
    Ok(buffer)
}

/// Appends `event` to `audit` for `id`, naming `path` on failure.
pub(crate) fn append_event(
    audit: &mut AuditLog,
    id: &str,
    event: NewEvent<'_>,
    path: &Path,
) -> Result<u64, StoreError> {
    audit
        .append(event.ts, id, event.event_type, event.step_id, event.status, event.details)
        .map_err(io_error("append to", path))
}
