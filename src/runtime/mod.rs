//! The runtime: runs one plan under one policy and records everything.
//!
//! [`execute`] prepares a run (run id, workspace, run folder) and hands it
//! to the [`interpreter`], which executes steps one by one:
//! select → resolve templates → policy + tool → record → checkpoint.
//! Time and ids come from an injected [`Clock`] and [`IdGen`] so records are
//! reproducible in tests.
//!
//! - `request.rs`: [`execute`], a new run;
//! - `queued.rs`: [`submit`] a queued run, [`start_claimed`] one a worker
//!   claimed;
//! - `control/`: [`resume`], [`approve`], [`reject`], [`cancel`],
//!   [`reconcile`], one file
//!   per command, on existing runs;
//! - `interpreter/`: the step loop and its parts;
//! - `recorder.rs`: the `Recorder`, the only writer of a run's records;
//! - [`event`]: the audit events, one [`Event`] enum with typed details;
//! - [`approval`]: fingerprints and approval checks;
//! - `env.rs` and `progress.rs`: the injected environment and progress
//!   reports.

pub mod approval;
mod control;
mod env;
pub mod event;
pub mod interpreter;
mod progress;
mod queued;
mod recorder;
mod request;

pub use control::{
    ApproveOutcome, ControlError, HeldRun, ResumeRequest, StoryCheck, StoryPlans, approve, cancel, read_checked,
    read_checked_with, reconcile, reject, resume, resume_held,
};
pub use env::{
    Clock, CrashAt, CrashPoint, FixedClock, IdGen, IdKind, RuntimeEnv, SequentialIds, SystemClock, SystemIds,
    format_timestamp, process_var,
};
pub use event::Event;
pub use progress::{NoProgress, Progress};
pub use queued::{FileCopy, QueuedError, QueuedStart, start_claimed, submit};
pub use request::{RunError, RunOutcome, RunRequest, execute};
