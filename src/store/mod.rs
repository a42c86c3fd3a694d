//! Run records, behind one seam: [`RunStore`] (`run_store.rs`,
//! `record_handle.rs`), implemented by [`FileStore`] (the default,
//! `file/`) and, with the `postgres` feature, by `pg::PgStore`
//! (`--store postgres://…`, `pg/`). [`open`] (`open.rs`) is the one place a
//! `--store` value picks its backend (`backend.rs`: each parses
//! its own location and options). Both backends write the same record
//! format, and check it over its bytes with the same code (`records/`).
//! Everything a run writes goes through it: agent runs
//! (`<workspace>/runs/<run_id>/`), bridge and controller records
//! (`<workspace>/bridge/runs/<id>/`, see `file/record_dir.rs`) and idempotency
//! receipts (`<workspace>/.planrun/receipts/`). No code outside this module
//! opens, renames, syncs or lists files there.
//!
//! An agent run's folder:
//!
//! | file | written | holds |
//! |---|---|---|
//! | `audit.jsonl` | appended, one line per event, at most one `fdatasync` per step (none of its own after a read) | the run's one durable log, hash-chained; each checkpoint is a sealed head line carrying the state, the step records since the previous one and (first) the plan |
//! | `history.jsonl` | appended, one line per step attempt, not synced | a view of the step records in the log |
//! | `plan.json` | once, at start, not synced | a view of the plan in the log (linked by `plan_hash`) |
//! | `state.json` | replaced atomically when the run pauses or ends, not synced | the compact head: the checkpoint of the log's last head line |
//!
//! Links are SHA-256, or HMAC-SHA256 under `PLANRUN_HMAC_KEY`
//! ([`Sealer::link`]); a checkpoint is written after the lines it covers,
//! and lines past the last one are a crash tail, never returned (see
//! `file/run_dir.rs`, `records/head.rs`, `records/run_log.rs` and
//! `records/audit.rs`). Runs recorded
//! before the log held the checkpoints (`state.json` after every step) are
//! still read, and continue in this layout (`file/run_load.rs`).
//!
//! Durability: the command line syncs its own log at every checkpoint;
//! the service's store shares one barrier between concurrent writers
//! (group commit, see `file/group_commit.rs`), and there a bridge or controller
//! record's state file is written at its first and its last checkpoint of
//! a request only (see `file/record_dir.rs`).
//!
//! Why this shape: rewriting one file that holds the whole history after
//! every step makes a run quadratic in its length. Here every step appends
//! a few lines of constant size, so a step costs the same at step 10 000 as
//! at step 1, and its durability one `fdatasync`.
//! `planrun show <run_id> --json` joins the files back into the full
//! state (see [`full_state`]).

mod approval_decision;
mod backend;
pub mod backoff;
#[cfg(test)]
mod conformance;
mod error;
#[cfg(feature = "postgres")]
mod export;
mod file;
mod holder;
mod open;
#[cfg(feature = "postgres")]
pub mod pg;
mod record_handle;
mod records;
mod run_id;
mod run_store;
#[cfg(test)]
mod test_runs;
#[cfg(feature = "postgres")]
mod workspace_id;

// The file store's parts stay inside this module: everything else reaches
// records through `RunStore`.
use file::atomic::write_atomic;
use file::audit_log::AuditLog;
use file::history_log::HistoryLog;
use file::lease::Lease;
use file::receipts::ReceiptStore;
use file::record_dir::RecordDir;
use file::run_dir::RunDir;

pub use approval_decision::{ApprovalDecision, ApprovalUse, Verdict};
pub use backend::{LocationError, Migration, OnWait, OpenError, StoreOptions};
pub use error::StoreError;
pub use file::child_note::ChildNoteFile;
pub use file::file_store::{FileStore, FileStores, GroupFileStores};
pub use file::group_commit::{Durability, GroupCommit, SharedSync};
pub use holder::Holder;
pub use open::{migrate, open};
pub use record_handle::{LoadedRecord, RecordEvent, RecordHandle, RecordKind, RecordWriter};
pub use records::agent::{
    AgentProgress, AgentTurn, MAX_OBSERVATION_BYTES, MAX_RAW_ANSWER_BYTES, ModelAnswer, Observation, capped,
};
pub use records::audit::{AuditError, AuditEvent, AuditTail, verify_audit};
pub use records::canonical;
pub use records::envelope::{EnvelopeError, SCHEMA_VERSION, Sealer};
pub use records::history::{StepRecord, StepRecordStatus};
pub use records::receipts::{RECEIPT_LINK, Receipt, ReceiptError, ReceiptState};
pub use records::run_log::{LoadedRun, full_state};
pub use records::state::{
    Approval, ArgumentSource, Counters, Cursor, Evidence, PendingAction, PlanRef, Reconciliation, RunState,
};
pub use run_id::{RunId, RunIdError, validate_run_id};
pub use run_store::{
    CREATE_ATTEMPTS, ClaimsExhausted, NewEvent, QueuedClaim, QueuedRun, RunHandle, RunListing, RunRecords, RunStore,
    Runnable, RunsPlace, StoreFactory, create_unique,
};
#[cfg(feature = "postgres")]
pub use workspace_id::{WorkspaceIdError, workspace_id_path};
