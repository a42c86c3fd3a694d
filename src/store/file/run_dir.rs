//! A run's folder: creating it (never over an existing run), checkpointing
//! with compare-and-set, and opening it again to continue. A [`RunDir`] is
//! the [`FileStore`](crate::store::FileStore)'s [`RunHandle`]; reading a
//! run back is `run_load.rs`.
//!
//! A new run is built in `runs/<id>~new/` (`~` is never part of a run id,
//! so the folder is never listed or opened as a run) and renamed to
//! `runs/<id>/` (without replacing anything) by its first checkpoint. So
//! `runs/<id>/` always holds a checkpoint: a run killed before its first
//! one left nothing that claims the id, ran nothing, and the id can be used
//! again (the stale folder is removed when it is).
//!
//! **One durable log.** `audit.jsonl` is the run's one durable record. A
//! checkpoint is one head line (see `head.rs`): the `state_saved` (or
//! `run_finished`) event the recorder appends just before it checkpoints is
//! held back, and the checkpoint writes it with the checkpoint, the step
//! records since the previous head and (on the first head) the plan in its
//! details, sealed, then makes the log durable with one `fdatasync`. The
//! views (`history.jsonl`, `plan.json`) are written as the records come,
//! without a sync; `state.json`, the compact head, only when the run pauses
//! or ends. Every one of them is checked against the log on reading.
//!
//! Syncs per run: one per checkpoint that covers something that ran, so a
//! run of N steps makes N. Each is the log's `fdatasync`, except the first,
//! which must also make the folder entries (the run folder and `runs/`)
//! durable: one `syncfs` covers the three. The first checkpoint of a new run (nothing has
//! run yet) is not synced: the first step's checkpoint makes it durable
//! with the same `fdatasync`, and losing it loses nothing that ran. Nor is
//! the checkpoint after a read of a run that goes on
//! ([`RunHandle::checkpoint_reads`]): the next sync covers it, which
//! [`RunHandle::make_durable`] makes before a step that may change the
//! world starts.
//!
//! Durability ([`Durability`]): per write (the command line) that sync is
//! the log's own `fdatasync` (a `syncfs` the first time); under
//! group commit (the service) it is one barrier shared with concurrent runs
//! (`group_commit.rs`), which covers the folder entries too.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::store::error::{io_error, serialize_error};
use crate::store::file::atomic::replace_unsynced;
use crate::store::file::folders::{append_event, append_log, create_folder, create_log, seal_bytes};
use crate::store::file::run_load::{creating_folder, load_run, runs_folder};
use crate::store::file::run_repair::{adopt_interrupted_start, repair_views, truncate_to};
use crate::store::records::head::{Links, PendingHead, full_payload, head_state, linked_payload, plan_bytes};
use crate::store::records::version::compare_version;
use crate::store::{
    AuditLog, ChildNoteFile, Durability, HistoryLog, Lease, LoadedRun, NewEvent, RunHandle, RunRecords, RunState,
    Sealer, SharedSync, StepRecord, StoreError,
};

/// An open run folder, locked for this process.
pub struct RunDir {
    /// Where the folder is now: `runs/<id>~new` until the first checkpoint
    /// renames it to `runs/<id>`.
    path: PathBuf,
    /// `runs/<id>`.
    final_path: PathBuf,
    /// The link of `plan.json`'s bytes, once written.
    plan_hash: Option<String>,
    audit: AuditLog,
    history: HistoryLog,
    run_id: String,
    state_buffer: Vec<u8>,
    sealer: Sealer,
    durability: Durability,
    /// The `state_version` of the checkpoint on disk. The lease makes this
    /// process the folder's only writer, so the copy kept here is the
    /// stored value and the compare-and-set needs no read-back.
    stored_version: u64,
    /// What the coming head line carries that the log does not hold yet.
    pending: PendingHead,
    /// Whether the folder entries of the run (its folder in `runs/`, its
    /// files in the folder) have been made durable by this process.
    names_durable: bool,
    /// Whether a checkpoint after a read waits for its sync
    /// ([`RunHandle::checkpoint_reads`]).
    unsynced: bool,
    /// Held for the life of the `RunDir`.
    _lease: Lease,
}

/// What [`RunDir::assemble`] builds an open run from: its folder (and
/// where it will be once published), its logs, the plan's link, the
/// stored version and the lock.
struct Parts {
    path: PathBuf,
    final_path: PathBuf,
    audit: AuditLog,
    history: HistoryLog,
    plan_hash: Option<String>,
    stored_version: u64,
    lease: Lease,
}

impl RunDir {
    /// Creates `<workspace>/runs/<run_id>/`. Fails with
    /// [`StoreError::RunExists`] when the folder exists.
    pub fn create(
        workspace: &Path,
        run_id: &str,
        sealer: Sealer,
        durability: Durability,
    ) -> Result<RunDir, StoreError> {
        let runs = runs_folder(workspace);
        let final_path = runs.join(run_id);
        let exists = || StoreError::RunExists { id: run_id.to_string(), path: runs.clone() };
        if final_path.exists() {
            return Err(exists());
        }
        let stale = creating_folder(workspace, run_id);
        let name = stale.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        if stale.is_dir() {
            // Another process creating the same id holds the lock: the id
            // is taken. A folder nobody holds is what a process killed
            // before its first checkpoint left: nothing ran from it.
            let lease = Lease::take(&stale, run_id).map_err(|_| exists())?;
            fs::remove_dir_all(&stale).map_err(io_error("remove", &stale))?;
            drop(lease);
        }
        let path = create_folder(&runs, &name).map_err(|_| exists())?;
        // Between the `mkdir` and the lock another creator may take the
        // folder for a stale one and remove it: it is theirs then.
        let lease = Lease::take(&path, run_id).map_err(|_| exists())?;
        let audit = AuditLog::new(create_log(&path, "audit.jsonl")?, sealer.clone());
        let history = HistoryLog::new(create_log(&path, "history.jsonl")?, None, sealer.clone());
        let parts = Parts { path, final_path, audit, history, plan_hash: None, stored_version: 0, lease };
        Ok(RunDir::assemble(run_id, parts, sealer, durability))
    }

    fn assemble(run_id: &str, parts: Parts, sealer: Sealer, durability: Durability) -> RunDir {
        let Parts { path, final_path, audit, history, plan_hash, stored_version, lease } = parts;
        RunDir {
            path,
            final_path,
            plan_hash,
            audit,
            history,
            run_id: run_id.to_string(),
            state_buffer: Vec::with_capacity(2048),
            sealer,
            durability,
            stored_version,
            pending: PendingHead::default(),
            names_durable: false,
            unsynced: false,
            _lease: lease,
        }
    }

    /// Opens an existing run to continue it: verifies it strictly (see
    /// [`load_run`]), locks it, drops lines written after the last
    /// checkpoint (an attempt the checkpoint does not cover did not happen
    /// as far as the run is concerned; keyed writes are reconciled through
    /// their receipts) and repairs views that are behind the log. A run of
    /// the previous layout continues in the log layout: its first head line
    /// will carry its plan and every step record before it.
    pub fn open(
        workspace: &Path,
        run_id: &str,
        sealer: Sealer,
        durability: Durability,
    ) -> Result<(RunDir, LoadedRun), StoreError> {
        let path = runs_folder(workspace).join(run_id);
        let lease = if path.is_dir() {
            Lease::take(&path, run_id)?
        } else {
            adopt_interrupted_start(workspace, run_id, &path, &sealer)?
        };
        let loaded = load_run(workspace, run_id, &sealer)?;
        // What lies past the head is a crash tail: cut it off, so that the
        // logs continue from the head and no later checkpoint vouches for it.
        // No sync: the next checkpoint's `fdatasync` makes the cut durable
        // with the lines that follow it, and a cut lost in a power cut only
        // brings back a tail that is still past the head.
        truncate_to(&path.join("audit.jsonl"), loaded.audit_tail.head_len)?;
        repair_views(&path, &loaded, &sealer)?;
        let audit = AuditLog::resume(append_log(&path, "audit.jsonl")?, &loaded.audit_tail, sealer.clone());
        let history =
            HistoryLog::new(append_log(&path, "history.jsonl")?, loaded.heads.history_hash.clone(), sealer.clone());
        let plan_hash = Some(loaded.heads.plan_hash.clone());
        let stored_version = loaded.state.state_version;
        let parts = Parts { path: path.clone(), final_path: path, audit, history, plan_hash, stored_version, lease };
        let mut dir = RunDir::assemble(run_id, parts, sealer, durability);
        if !loaded.heads.logged {
            dir.pending = PendingHead::carrying(loaded.history.clone(), loaded.plan.clone());
        }
        Ok((dir, loaded))
    }

    /// Stores the plan once, at the start of the run: the view `plan.json`
    /// now, the log's copy in its first head line.
    pub fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError> {
        let path = self.path.join("plan.json");
        let bytes = plan_bytes(plan).map_err(|error| serialize_error(&path, error))?;
        replace_unsynced(&path, &bytes, || Ok(())).map_err(io_error("write", &path))?;
        self.plan_hash = Some(self.sealer.link(&bytes));
        self.pending.plan(plan.clone());
        Ok(())
    }

    /// The checkpoint, if the stored `state_version` is `expected`: the
    /// held `state_saved`/`run_finished` event is written as the head line
    /// (see the module docs), the log made durable when the checkpoint
    /// covers anything that ran, and `state.json` replaced when the run
    /// pauses or ends. The state never claims more than the log holds.
    pub fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        self.checkpoint_then(state, expected, Sync::Now)
    }

    fn checkpoint_then(&mut self, state: &RunState, expected: u64, sync: Sync) -> Result<(), StoreError> {
        let audit_path = self.path.join("audit.jsonl");
        compare_version(&self.run_id, self.stored_version, expected)?;
        let Some(plan_hash) = self.plan_hash.clone() else {
            return Err(serialize_error(&audit_path, "a run's first checkpoint comes after its plan is stored"));
        };
        let links = Links { plan_hash: &plan_hash, history_hash: self.history.hash() };
        // The head line is written straight from the state; the checkpoint
        // as a map only for `state.json`, when the run pauses or ends.
        let head = self.pending.line_of(state, links).map_err(|error| serialize_error(&audit_path, error))?;
        let seq = self
            .audit
            .append_sealed(&head.held.ts, &self.run_id, head.columns(), &head.details)
            .map_err(io_error("append to", &audit_path))?;
        self.pending.written();
        if self.path != self.final_path {
            self.publish()?;
        }
        let paused_or_ended = state.status.is_paused() || state.status.is_terminal();
        // A checkpoint that covers nothing that ran (the first one of a
        // new run) is made durable by the next one's sync: lost, it loses
        // nothing.
        let ran = state.counters.history_records > 0 || state.counters.tool_calls > 0;
        if sync == Sync::WithNext && !paused_or_ended {
            // After a read: the next sync covers it (`make_durable`).
            self.unsynced = true;
        } else if ran || paused_or_ended {
            self.sync(&audit_path)?;
        }
        if paused_or_ended {
            // The compact head for readers. Not synced: the log is durable
            // already and is the record; a `state.json` lost or left older
            // in a power cut is read as "the log's head is newer".
            let hash = self.audit.last_hash().unwrap_or_default().to_string();
            let state_path = self.path.join("state.json");
            let links = Links { plan_hash: &plan_hash, history_hash: self.history.hash() };
            let checkpoint =
                linked_payload(state, links).map(head_state).map_err(|error| serialize_error(&state_path, error))?;
            let envelope = full_payload(&checkpoint, seq, &hash);
            let sealed = seal_bytes(&self.sealer, &state_path, Value::Object(envelope), &mut self.state_buffer)?;
            replace_unsynced(&state_path, sealed, || Ok(())).map_err(io_error("write", &state_path))?;
        }
        self.stored_version = state.state_version;
        Ok(())
    }

    /// Makes the log (and the folder entries) durable: the log's own sync
    /// on the command line, one shared barrier in the service.
    fn sync(&mut self, audit_path: &Path) -> Result<(), StoreError> {
        match &self.durability {
            Durability::PerWrite => self.sync_per_write(audit_path)?,
            // One barrier for the file system covers the log and the
            // folder entries, shared with the service's other runs.
            Durability::Group(commit) => commit.barrier().map_err(io_error("sync", audit_path))?,
        }
        self.unsynced = false;
        Ok(())
    }

    /// One sync per checkpoint, on its own (the command line): the log's
    /// `fdatasync`, except the first time, when the run's folder entries
    /// must become durable too (its files' names in its folder, the
    /// folder's name in `runs/`: an `fdatasync` of a file does not promise
    /// its name). That time one `syncfs` of the file system covers the log
    /// and both folders, where `fdatasync` + two `fsync`s would make three
    /// syncs: a run of N steps makes N syncs.
    fn sync_per_write(&mut self, audit_path: &Path) -> Result<(), StoreError> {
        if self.names_durable {
            return self.audit.sync().map_err(io_error("sync", audit_path));
        }
        let folder = self.path.as_path();
        fs::File::open(folder)
            .and_then(|folder| rustix::fs::syncfs(&folder).map_err(std::io::Error::from))
            .map_err(io_error("sync", folder))?;
        self.names_durable = true;
        Ok(())
    }

    /// Renames the folder a new run was built in to `runs/<id>/`, never
    /// over an existing folder ([`StoreError::RunExists`]).
    fn publish(&mut self) -> Result<(), StoreError> {
        let runs = self.final_path.parent().unwrap_or_else(|| Path::new("."));
        let exists = |error: rustix::io::Errno| {
            if error == rustix::io::Errno::EXIST || error == rustix::io::Errno::NOTEMPTY {
                StoreError::RunExists { id: self.run_id.clone(), path: runs.to_path_buf() }
            } else {
                StoreError::Io { action: "publish", path: self.final_path.clone(), source: error.into() }
            }
        };
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &self.path,
            rustix::fs::CWD,
            &self.final_path,
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(exists)?;
        // Made durable with the first synced checkpoint (`sync_per_write`).
        self.path = self.final_path.clone();
        Ok(())
    }
}

impl RunHandle for RunDir {
    fn run_id(&self) -> &str {
        &self.run_id
    }

    fn records(&self) -> RunRecords {
        // Where the run will be once it has a checkpoint (and is from then
        // on): the folder it is built in is not for messages.
        RunRecords::Folder(self.final_path.clone())
    }

    fn child_note(&self) -> Option<ChildNoteFile> {
        // A step runs after the run's first checkpoint, which publishes it.
        Some(ChildNoteFile::at(self.final_path.join(".child")))
    }

    fn shared_sync(&self) -> Option<SharedSync> {
        match &self.durability {
            Durability::PerWrite => None,
            Durability::Group(commit) => Some(commit.shared()),
        }
    }

    fn audit_seq(&self) -> u64 {
        self.pending.seq(self.audit.seq())
    }

    fn audit_hash(&self) -> Option<&str> {
        // The last line written; a held head line's link is known once the
        // checkpoint has written it.
        self.audit.last_hash()
    }

    fn stored_version(&self) -> u64 {
        self.stored_version
    }

    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError> {
        let path = self.path.join("audit.jsonl");
        let (audit, run_id) = (&mut self.audit, &self.run_id);
        self.pending.append(event, audit.seq(), |event| append_event(audit, run_id, event, &path))
    }

    fn append_history(&mut self, record: &StepRecord) -> Result<(), StoreError> {
        self.history.append(record).map_err(io_error("append to", &self.path.join("history.jsonl")))?;
        self.pending.record(record);
        Ok(())
    }

    fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError> {
        RunDir::write_plan(self, plan)
    }

    fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        RunDir::checkpoint(self, state, expected)
    }

    fn checkpoint_reads(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        self.checkpoint_then(state, expected, Sync::WithNext)
    }

    fn make_durable(&mut self) -> Result<(), StoreError> {
        if !self.unsynced {
            return Ok(());
        }
        let audit_path = self.path.join("audit.jsonl");
        self.sync(&audit_path)
    }
}

/// When a checkpoint is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sync {
    /// Before it returns (or, for the first checkpoint of a new run, which
    /// covers nothing that ran, with the next one).
    Now,
    /// With the next sync: the checkpoint after a read, of a run that goes
    /// on ([`RunHandle::checkpoint_reads`]).
    WithNext,
}
