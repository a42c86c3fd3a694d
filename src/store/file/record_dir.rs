//! Bridge and controller records in `<workspace>/bridge/runs/<id>/`, with
//! the guarantees of agent runs: the folder is created with one `mkdir`
//! (never over an existing record), held under a [`Lease`] while written,
//! its state file (`state.json`, `controller_state.json`) is a sealed
//! checkpoint envelope replaced atomically with compare-and-set, and its
//! audit log (`audit.jsonl`, `controller_audit.jsonl`) is the same
//! hash-chained log as an agent run's.
//!
//! The checkpoint's payload is the record's own state (a JSON object the
//! service defines) plus three fields the store adds and strips again on
//! reading: `state_version`, `audit_seq` and `audit_hash`, which tie the
//! checkpoint to the log line it has seen.
//!
//! Durability ([`Durability`]): per write, a checkpoint syncs the log, the
//! new state file and the folder (3 syncs) before it returns. Under group
//! commit (the service) the state file is written twice per request at
//! most: a new record's first checkpoint at once (so that it is listed
//! while it runs), and the last checkpoint when the request ends or pauses
//! ([`RecordHandle::commit`]); checkpoints in between are kept in memory
//! only. A new record's first checkpoint is taken before its first event:
//! it names no log line and waits for nothing (lost in a crash, the record
//! has no state file: not listed, its id not reused). A record whose whole
//! work is done in memory (a bridge run whose adapter does not really
//! execute) holds even its first checkpoint ([`RecordHandle::checkpoint_held`])
//! and writes one state file, its last: no state file is replaced, so the
//! file system frees no inode per request. The last one waits
//! for one shared barrier between writing the temp file and renaming it
//! into place: the barrier makes the log lines it names and the temp file
//! durable, so the state file never claims a log line or content the disk
//! does not hold, and the request can be answered at once. A crash that
//! loses only the rename leaves the state file one checkpoint behind and
//! the whole, synced temp file beside it: reading takes the temp file when
//! it is a sealed checkpoint of the record, newer than the state file and
//! agreeing with the log (see [`load_record`]); the next writer renames it
//! into place first. A crash before the barrier leaves the record as its
//! last written checkpoint (its log may hold more lines, a crash tail),
//! never torn.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::store::error::{io_error, serialize_error};
use crate::store::file::atomic::{replace_unsynced, temp_path};
use crate::store::file::folders::{append_event, append_log, create_folder, create_log};
use crate::store::records::audit::{LogFiles, verify_checkpointed_log};
use crate::store::records::record_checkpoint::{CHECKPOINT_FIELDS, Checkpoint, read_checkpoint};
use crate::store::records::version::compare_version;
use crate::store::{
    AuditLog, Durability, Lease, LoadedRecord, NewEvent, RecordHandle, RecordKind, Sealer, StoreError, write_atomic,
};

/// `<workspace>/bridge/runs`.
pub(crate) fn records_folder(workspace: &Path) -> PathBuf {
    workspace.join("bridge").join("runs")
}

/// The state and audit file names of `kind`.
pub(crate) fn files(kind: RecordKind) -> LogFiles {
    match kind {
        RecordKind::Bridge => LogFiles { state: "state.json", audit: "audit.jsonl" },
        RecordKind::Controller => LogFiles { state: "controller_state.json", audit: "controller_audit.jsonl" },
    }
}

/// An open record folder, locked for this process.
pub struct RecordDir {
    id: String,
    kind: RecordKind,
    audit: AuditLog,
    audit_path: PathBuf,
    state_path: PathBuf,
    state_buffer: Vec<u8>,
    sealer: Sealer,
    durability: Durability,
    /// The `state_version` of the last checkpoint taken (the lease makes
    /// this the only writer): on disk, or pending.
    stored_version: u64,
    /// Group commit: the state buffer holds a checkpoint not yet written.
    pending: bool,
    _lease: Lease,
}

/// What [`RecordDir::create`] and [`RecordDir::open`] need besides the id.
pub struct RecordOptions {
    pub kind: RecordKind,
    pub sealer: Sealer,
    pub durability: Durability,
}

impl RecordDir {
    /// Creates `<workspace>/bridge/runs/<id>/` with an empty audit log;
    /// [`StoreError::RunExists`] when the folder exists.
    pub fn create(workspace: &Path, id: &str, options: RecordOptions) -> Result<RecordDir, StoreError> {
        let path = create_folder(&records_folder(workspace), id)?;
        let lease = Lease::take(&path, id)?;
        let audit = AuditLog::new(create_log(&path, files(options.kind).audit)?, options.sealer.clone());
        Ok(RecordDir::assemble(&path, id, audit, options, 0, lease))
    }

    /// Locks an existing record, reads it back strictly (see
    /// [`load_record`]) and continues its audit log.
    pub fn open(workspace: &Path, id: &str, options: RecordOptions) -> Result<(RecordDir, LoadedRecord), StoreError> {
        let path = records_folder(workspace).join(id);
        if !path.is_dir() {
            return Err(StoreError::NotFound { id: id.to_string(), path: records_folder(workspace) });
        }
        let lease = Lease::take(&path, id)?;
        let kind = options.kind;
        let (loaded, source) = load_newest(workspace, kind, id, &options.sealer)?;
        if source == Source::TempFile {
            adopt_temp(&path.join(files(kind).state))?;
        }
        let log = append_log(&path, files(kind).audit)?;
        let audit = AuditLog::resume(log, &loaded.audit_tail, options.sealer.clone());
        let version = loaded.state_version;
        Ok((RecordDir::assemble(&path, id, audit, options, version, lease), loaded))
    }

    fn assemble(
        path: &Path,
        id: &str,
        audit: AuditLog,
        options: RecordOptions,
        stored_version: u64,
        lease: Lease,
    ) -> RecordDir {
        let RecordOptions { kind, sealer, durability } = options;
        RecordDir {
            id: id.to_string(),
            kind,
            audit,
            audit_path: path.join(files(kind).audit),
            state_path: path.join(files(kind).state),
            state_buffer: Vec::with_capacity(2048),
            sealer,
            durability,
            stored_version,
            pending: false,
            _lease: lease,
        }
    }

    /// Writes the sealed state in the buffer: at once per write, or after a
    /// shared barrier (group commit) that makes the log lines it names and
    /// the new file durable before it is renamed into place.
    fn write_state(&mut self) -> Result<(), StoreError> {
        let written = match &self.durability {
            Durability::PerWrite => {
                self.audit.sync().map_err(io_error("sync", &self.audit_path))?;
                write_atomic(&self.state_path, &self.state_buffer)
            }
            // A state that names no log line (a new record's first,
            // written before its first event) has nothing to wait for: lost
            // in a crash, the record has no state file (not listed, its id
            // kept); kept, it names an empty log.
            Durability::Group(_) if self.audit.seq() == 0 => {
                replace_unsynced(&self.state_path, &self.state_buffer, || Ok(()))
            }
            Durability::Group(commit) => replace_unsynced(&self.state_path, &self.state_buffer, || commit.barrier()),
        };
        written.map_err(io_error("write", &self.state_path))?;
        self.pending = false;
        Ok(())
    }

    /// Seals `state` as the next checkpoint; under group commit it is held
    /// for `commit` unless `write_now` (per write, it is always written).
    fn take_checkpoint(&mut self, state: &Value, expected: u64, write_now: bool) -> Result<u64, StoreError> {
        compare_version(&self.id, self.stored_version, expected)?;
        let refuse = |message: String| serialize_error(&self.state_path, message);
        let Value::Object(state) = state else {
            return Err(refuse("a record's state must be a JSON object".to_string()));
        };
        if let Some(field) = CHECKPOINT_FIELDS.iter().find(|field| state.contains_key(**field)) {
            return Err(refuse(format!("a record's state may not hold `{field}`: the store writes it")));
        }
        let id_field = self.kind.id_field();
        if state.get(id_field).and_then(Value::as_str) != Some(self.id.as_str()) {
            return Err(refuse(format!("the state's `{id_field}` is not `{}`", self.id)));
        }
        let version = self.stored_version + 1;
        let mut payload: Map<String, Value> = state.clone();
        payload.insert("state_version".into(), json!(version));
        payload.insert("audit_seq".into(), json!(self.audit.seq()));
        payload.insert("audit_hash".into(), json!(self.audit.last_hash()));
        self.sealer.seal_into(&self.state_path, Value::Object(payload), &mut self.state_buffer)?;
        if matches!(self.durability, Durability::Group(_)) && !write_now {
            self.pending = true;
        } else {
            self.write_state()?;
        }
        self.stored_version = version;
        Ok(version)
    }
}

impl RecordHandle for RecordDir {
    fn id(&self) -> &str {
        &self.id
    }

    fn kind(&self) -> RecordKind {
        self.kind
    }

    fn stored_version(&self) -> u64 {
        self.stored_version
    }

    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError> {
        append_event(&mut self.audit, &self.id, event, &self.audit_path)
    }

    fn checkpoint(&mut self, state: &Value, expected: u64) -> Result<u64, StoreError> {
        // Under group commit only a new record's first checkpoint is
        // written at once; later ones wait for `commit` (module notes).
        let first = self.stored_version == 0;
        self.take_checkpoint(state, expected, first)
    }

    fn checkpoint_held(&mut self, state: &Value, expected: u64) -> Result<u64, StoreError> {
        self.take_checkpoint(state, expected, false)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if self.pending { self.write_state() } else { Ok(()) }
    }
}

impl Drop for RecordDir {
    /// A checkpoint still pending (a request that ended on an error before
    /// committing) is written all the same, so the record shows how far it
    /// got; nothing can be reported from here.
    fn drop(&mut self) {
        if self.pending {
            let _ = self.write_state();
        }
    }
}

/// Reads and verifies record `id` of `kind`: the envelope's digest (or
/// HMAC), strict JSON, the record's id, the audit log's sequence and hash
/// chain, and that checkpoint and log agree. A record without a checkpoint
/// yet is [`StoreError::NotFound`].
///
/// The state is the newer of the state file and its temp file: a
/// checkpoint's temp file is whole and durable once the barrier before its
/// rename has passed, so a crash that lost only the rename (the state file
/// still the older checkpoint) leaves the answered checkpoint there. A temp
/// file counts only when it is a sealed checkpoint of this record, newer
/// than the state file, and agrees with the log; anything else in it is a
/// write that never completed (torn, or naming lines the disk lost) and is
/// ignored.
pub fn load_record(workspace: &Path, kind: RecordKind, id: &str, sealer: &Sealer) -> Result<LoadedRecord, StoreError> {
    load_newest(workspace, kind, id, sealer).map(|(loaded, _)| loaded)
}

/// After a crash that lost a last checkpoint's rename: renames its synced
/// temp file into place, durably (a rare path: the folder's own `fsync`),
/// before the next checkpoint reuses the temp file's name.
fn adopt_temp(state_path: &Path) -> Result<(), StoreError> {
    let temp = temp_path(state_path);
    fs::rename(&temp, state_path).map_err(io_error("rename", &temp))?;
    let folder = state_path.parent().unwrap_or_else(|| Path::new("."));
    fs::File::open(folder).and_then(|folder| folder.sync_all()).map_err(io_error("sync", folder))
}

/// Which file [`load_newest`] took the checkpoint from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    StateFile,
    TempFile,
}

fn load_newest(
    workspace: &Path,
    kind: RecordKind,
    id: &str,
    sealer: &Sealer,
) -> Result<(LoadedRecord, Source), StoreError> {
    let folder = records_folder(workspace);
    let dir = folder.join(id);
    let names = files(kind);
    let tampered = |reason: String| StoreError::Tampered { id: id.to_string(), reason };
    let state_path = dir.join(names.state);
    let stored = match read_optional(&state_path)? {
        Some(text) => Some(read_checkpoint(&text, kind, id, names.state, sealer).map_err(tampered)?),
        None => None,
    };
    // Unreadable or not a checkpoint of this record: an incomplete write.
    let newer = read_optional(&temp_path(&state_path))
        .ok()
        .flatten()
        .and_then(|text| read_checkpoint(&text, kind, id, names.state, sealer).ok())
        .filter(|temp| stored.as_ref().is_none_or(|stored| temp.state_version > stored.state_version));
    if stored.is_none() && newer.is_none() {
        return Err(StoreError::NotFound { id: id.to_string(), path: folder });
    }
    let audit_path = dir.join(names.audit);
    let audit_text = fs::read_to_string(&audit_path).map_err(io_error("read", &audit_path))?;
    let verify = |checkpoint: Checkpoint| {
        let seen = (checkpoint.audit_seq, checkpoint.audit_hash.as_deref());
        let (audit, audit_tail) = verify_checkpointed_log(&audit_text, id, names, seen, sealer, false)?;
        let state = Value::Object(checkpoint.state);
        Ok::<_, String>(LoadedRecord { state, state_version: checkpoint.state_version, audit, audit_tail })
    };
    if let Some(loaded) = newer.and_then(|temp| verify(temp).ok()) {
        return Ok((loaded, Source::TempFile));
    }
    match stored {
        Some(stored) => Ok((verify(stored).map_err(tampered)?, Source::StateFile)),
        None => Err(StoreError::NotFound { id: id.to_string(), path: folder }),
    }
}

/// The file's text, `None` when it does not exist.
fn read_optional(path: &Path) -> Result<Option<String>, StoreError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Io { action: "read", path: path.to_path_buf(), source }),
    }
}
