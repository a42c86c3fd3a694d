//! Run records, behind one seam: [`RunStore`], implemented by
//! [`FileStore`] (the default) and, with the `postgres` feature, by
//! `pg::PgStore` (`--store postgres://…`, see `pg/mod.rs` and `location.rs`).
//! Everything a run writes goes through it: agent runs
//! (`<workspace>/runs/<run_id>/`), bridge and controller records
//! (`<workspace>/bridge/runs/<id>/`, see `record_dir.rs`) and idempotency
//! receipts (`<workspace>/.planrun/receipts/`). No code outside this module
//! opens, renames, syncs or lists files there.
//!
//! An agent run's folder:
//!
//! | file | written | holds |
//! |---|---|---|
//! | `plan.json` | once, at start | the validated plan exactly as it ran (linked by the checkpoint's `plan_hash`) |
//! | `state.json` | replaced atomically after every step | the compact checkpoint, the sealed head of the logs |
//! | `history.jsonl` | appended, one line per step attempt | step results, hash-chained (`history_hash`) |
//! | `audit.jsonl` | appended, one line per event | the event log, hash-chained (`audit_seq`, `audit_hash`) |
//!
//! Links are SHA-256, or HMAC-SHA256 under `PLANRUN_HMAC_KEY`
//! ([`Sealer::link`]); the checkpoint is written after the last line it
//! covers, and lines past it are a crash tail, never returned (see
//! `run_dir.rs` and `audit.rs`).
//!
//! Why the split: rewriting one file that holds the whole history after every
//! step makes a run quadratic in its length. Here every step appends one
//! history line and a few audit lines and rewrites a `state.json` of constant
//! size, so a step costs the same at step 10 000 as at step 1.
//! `planrun show <run_id> --json` joins the files back into the seed-shaped
//! state (see [`full_state`]).

mod atomic;
mod audit;
pub mod canonical;
#[cfg(test)]
mod conformance;
mod envelope;
mod error;
#[cfg(feature = "postgres")]
mod export;
mod file_store;
mod history;
mod lease;
pub mod location;
#[cfg(feature = "postgres")]
pub mod pg;
mod receipts;
mod record_dir;
mod run_dir;
mod run_id;
mod run_store;
mod state;
#[cfg(test)]
mod test_runs;

// The file store's parts stay inside this module: everything else reaches
// records through `RunStore`.
use atomic::write_atomic;
use audit::AuditLog;
use history::HistoryLog;
use lease::Lease;
use receipts::ReceiptStore;
use record_dir::RecordDir;
use run_dir::RunDir;

pub use audit::{AuditError, AuditEvent, AuditTail, verify_audit};
pub use envelope::{EnvelopeError, SCHEMA_VERSION, Sealer};
pub use error::StoreError;
pub use file_store::{FileStore, FileStores};
pub use history::{StepRecord, StepRecordStatus};
pub use location::{LocationError, StoreLocation};
pub use receipts::{Receipt, ReceiptError, ReceiptState};
pub use run_dir::{LoadedRun, full_state};
pub use run_id::{RunIdError, validate_run_id};
pub use run_store::{
    CREATE_ATTEMPTS, LoadedRecord, NewEvent, RecordEvent, RecordHandle, RecordKind, RecordWriter, RunHandle,
    RunListing, RunStore, Runnable, StoreFactory, create_unique,
};
pub use state::{Approval, Counters, Cursor, Evidence, PendingAction, PlanRef, Reconciliation, RunState};
