//! The use cases on existing runs, one file per command: [`resume`],
//! [`approve`], [`reject`], [`cancel`] and [`reconcile`], each with its
//! input and its outcome.
//!
//! Each opens the run through `open.rs`, which verifies the checkpoint
//! envelope, the audit chain and their agreement, and locks the run; a run
//! that fails verification is refused before anything changes. Every record
//! is then written through the runtime's [`crate::runtime::Recorder`].
//! A start interrupted before its first checkpoint (`interrupted.rs`) is
//! started again by `resume` and recorded cancelled by `cancel`.
//! `approve` hands the run back still held ([`HeldRun`]) for
//! [`resume_held`] to continue it in the same request (the service).
//! A new command gets a file of its own and a re-export here.

mod approve;
mod cancel;
mod error;
mod held_run;
mod interrupted;
mod open;
mod reconcile;
mod reject;
mod resume;

pub use approve::{ApproveInput, Approved, approve};
pub use cancel::{CancelInput, cancel};
pub use error::ControlError;
pub use held_run::HeldRun;
pub use reconcile::{ReconcileInput, Reconciled, reconcile};
pub use reject::reject;
pub use resume::{ResumeRequest, check_answer, resume, resume_held};
