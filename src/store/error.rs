//! [`StoreError`]: what can go wrong with run records, for every kind of
//! record (agent runs, bridge and controller records, receipts).

use std::io;
use std::path::{Path, PathBuf};

use crate::store::AuditEvent;

/// What can go wrong with run records.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run `{id}` already exists in `{}`: a run is never overwritten; pick another `--run-id`", path.display())]
    RunExists { id: String, path: PathBuf },
    #[error("no run `{id}` in `{}`", path.display())]
    NotFound { id: String, path: PathBuf },
    /// `export --out DIR` where `DIR/runs/<id>` is already there.
    #[error("`{}` already exists: an export never overwrites a folder; pick another `--out`", path.display())]
    ExportExists { path: PathBuf },
    /// A start under this id was killed before its first checkpoint: it
    /// ran nothing and the id is free. `events` are the whole lines of its
    /// log that verify (what it was started with, for `resume` to start
    /// it again and `cancel` to record it cancelled).
    #[error(
        "no run `{id}` in `{}`: its start was interrupted before its first checkpoint ({known}); nothing ran, and the id is free: `planrun resume {id}` starts it again from what its log names, `planrun cancel {id}` records it cancelled, or start a run with `--run-id {id}`",
        path.display()
    )]
    Interrupted { id: String, path: PathBuf, known: String, events: Vec<AuditEvent> },
    /// The run is queued: submitted and not started by a worker yet, so
    /// it has no records to read.
    #[error(
        "run `{id}` is queued: no worker has started it yet, so it has no records (`planrun show {id}` shows what it was submitted with, `planrun cancel {id}` withdraws it)"
    )]
    Queued { id: String },
    /// The workspace has no usable id for a shared store
    /// (`<workspace>/.planrun/id` cannot be read, created, or is not an id).
    #[error("{0}")]
    WorkspaceId(String),
    #[error("run `{id}` is in use: another planrun process holds it (its lock, or on a database store its lease)")]
    Locked { id: String },
    /// A database store's run of another workspace (another
    /// `<workspace>/.planrun/id`): its steps act on that workspace's files,
    /// so it is continued, decided or cancelled only there. Nothing was
    /// written.
    #[error(
        "run `{id}` belongs to another workspace (id `{owner}`; this workspace's id is `{this}`): continue, decide or cancel it with `--workspace` set to the workspace it was started in"
    )]
    OtherWorkspace { id: String, owner: String, this: String },
    /// A checkpoint was refused because the stored `state_version` is not
    /// the one the writer expected (compare-and-set): someone else wrote
    /// in between, or the writer lost track. Nothing was written.
    #[error("run `{id}`: checkpoint refused: expected stored state version {expected}, found {found}")]
    VersionConflict { id: String, expected: u64, found: u64 },
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` line {line} is not a valid record: {message}", path.display())]
    Corrupt { path: PathBuf, line: usize, message: String },
    /// The checkpoint or the log failed verification: edited, torn or
    /// inconsistent. Nothing runs from such a run.
    #[error("run `{id}` failed verification: {reason}")]
    Tampered { id: String, reason: String },
    /// The holder's lease on the run (or record) was taken over or has
    /// expired: another process owns the run now. Nothing was written.
    #[error(
        "run `{id}`: this process no longer holds the run's lease (it expired or another worker took the run over); nothing was written"
    )]
    LeaseLost { id: String },
    /// The store refused to let a step use the approval of its frozen
    /// action (expired in the store's time, used already, or recorded for
    /// another action). Nothing was written and nothing ran.
    #[error("run `{id}`: the approval cannot be used: {reason}")]
    ApprovalRefused { id: String, reason: String },
    /// The database store failed (a lost connection, a timeout, a refused
    /// statement).
    #[error("cannot {action} in the PostgreSQL store: {message}")]
    Database { action: &'static str, message: String },
    /// The database could not be reached, or the session was lost while a
    /// statement ran (a restart, a terminated session, a network fault).
    /// What that statement wrote is unknown: it is never assumed done or
    /// not done; a worker or the service reads the run again later and
    /// continues it through the usual recovery.
    #[error("cannot {action} in the PostgreSQL store: {message} (the database is unavailable; try again)")]
    Unavailable { action: &'static str, message: String },
    /// The store cannot do this (`export` from the file store, whose runs
    /// are files already).
    #[error("{0}")]
    Unsupported(&'static str),
    /// A record file exists but cannot be read (a folder in its place, an
    /// I/O error). Nothing runs from such a run.
    #[error("run `{id}`: cannot read `{}`: {source}", path.display())]
    Unreadable {
        id: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl StoreError {
    /// Whether this is about the records of a run as they are (unknown,
    /// unreadable, or failing verification) rather than about an attempt to
    /// write them: every command that reads a run gives the same exit status
    /// (2, bad input) for it.
    pub fn is_unusable_record(&self) -> bool {
        matches!(
            self,
            StoreError::NotFound { .. }
                | StoreError::OtherWorkspace { .. }
                | StoreError::Interrupted { .. }
                | StoreError::Queued { .. }
                | StoreError::Tampered { .. }
                | StoreError::Corrupt { .. }
                | StoreError::Unreadable { .. }
        )
    }

    /// Whether the store was unreachable: worth trying again later, and
    /// nothing may be assumed about what the failed call wrote.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}

/// Maps an I/O error on `path` to [`StoreError::Io`].
pub(crate) fn io_error<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> StoreError + 'p {
    move |source| StoreError::Io { action, path: path.to_path_buf(), source }
}

/// A value that cannot be serialised (a float in a checkpoint, say), as
/// [`StoreError::Io`] on the file it was meant for.
pub(crate) fn serialize_error(path: &Path, message: impl std::fmt::Display) -> StoreError {
    StoreError::Io { action: "serialize", path: path.to_path_buf(), source: io::Error::other(message.to_string()) }
}
