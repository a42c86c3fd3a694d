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
//! - `run_files.rs`: the plan and policy files a run started with, found
//!   again and loaded ([`load_files`]); `story.rs`: a run read back and its
//!   story checked against that plan ([`read_checked`]). The commands on
//!   existing runs (`resume`, `approve`, …) are use cases: `ops/control/`;
//! - `interpreter/`: the step loop and its parts;
//! - `recorder.rs`: the [`Recorder`], the only writer of a run's records;
//! - [`event`]: the audit events, one [`Event`] enum with typed details;
//! - [`approval`]: fingerprints and approval checks;
//! - `secrets.rs`: the secret values a run uses ([`RunSecrets`]), read
//!   when it starts or resumes, never stored;
//! - `env.rs` and `progress.rs`: the injected environment and progress
//!   reports.

pub mod approval;
mod env;
pub mod event;
pub mod interpreter;
mod progress;
mod queued;
mod recorder;
mod request;
mod run_files;
mod secrets;
mod story;

pub use env::{
    Clock, CrashAt, CrashPoint, FixedClock, IdGen, IdKind, RuntimeEnv, SequentialIds, SystemClock, SystemIds,
    format_timestamp, process_var,
};
pub use event::Event;
pub use progress::{NoProgress, Progress};
pub use queued::{FileCopy, QueuedError, QueuedStart, cancel_queued, start_claimed, submit};
pub use recorder::Recorder;
pub use request::{RunError, RunOutcome, RunRequest, execute, execute_cancelled};
pub use run_files::{ChangedFiles, RunFilesError, load_files};
pub use secrets::{RunSecrets, SecretError};
pub use story::{StoryCheck, StoryPlans, read_checked, read_checked_with};
