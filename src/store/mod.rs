//! Run records: everything a run leaves in `<workspace>/runs/<run_id>/`.
//!
//! | file | written | holds |
//! |---|---|---|
//! | `plan.json` | once, at start | the validated plan exactly as it ran |
//! | `state.json` | replaced atomically after every step | the compact checkpoint: status, cursor, counters |
//! | `history.jsonl` | appended, one line per step attempt | step results (output, failure class, attempt) |
//! | `audit.jsonl` | appended, one line per event | the event log (`seq`, `ts`, `event_type`, …) |
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
mod envelope;
mod history;
mod receipts;
mod run_dir;
mod run_id;
mod state;

pub use atomic::write_atomic;
pub use audit::{AuditError, AuditEvent, AuditLog, AuditTail, verify_audit};
pub use envelope::{EnvelopeError, SCHEMA_VERSION, Sealer};
pub use history::{HistoryLog, StepRecord, StepRecordStatus};
pub use receipts::{Receipt, ReceiptError, ReceiptState, ReceiptStore};
pub use run_dir::{LoadedRun, RunDir, StoreError, full_state, load_run};
pub use run_id::{RunIdError, validate_run_id};
pub use state::{Approval, Counters, Cursor, Evidence, PendingAction, PlanRef, Reconciliation, RunState};
