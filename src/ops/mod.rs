//! Use cases: what a person or a service asks planrun to do, each taking
//! typed inputs and returning a typed outcome (or an [`OpsError`]) that
//! knows its one [`ExitStatus`].
//!
//! The front ends parse their input, call one function here and present its
//! outcome: `cli/*.rs` for the command line, the service's handlers and its
//! agent adapter for HTTP. No front end wires "load → route → run →
//! records → exit status" by hand.
//!
//! | use case | function | outcome |
//! |---|---|---|
//! | run a plan file or a goal | [`run`] | [`RunOutcome`] |
//! | continue a run | [`resume`] | [`RunOutcome`] |
//! | approve a frozen action | [`approve`] | [`Approved`] |
//! | reject / cancel a run | [`reject`], [`cancel`] | [`EndedRun`] |
//! | settle an uncertain write | [`reconcile`] | [`Reconciled`] |
//! | list runs, newest first | [`runs`] | [`RunsOutcome`] |
//! | read a run back (`latest`: the newest) | [`show`], [`full_state_json`] | [`LoadedRun`](crate::store::LoadedRun) |
//! | explain routing | [`route`] | [`Routed`] |
//! | preview a run | [`preview`] | [`Preview`](crate::preview::Preview) |
//! | ask a policy about a command line | [`policy_check`] | [`PolicyVerdict`] |
//! | ask the egress policy about a request | [`policy_check_url`] | [`HttpVerdict`] |
//! | validate files | [`check`] | [`CheckOutcome`] |
//! | run declared scenarios against golden snapshots | `test` (one: [`run_scenario`]) | [`TestOutcome`] |
//! | check a run's records end to end | [`verify`] | [`Verification`] |
//! | decide a recorded run again under today's plans and policies | [`replay`] | [`ReplayReport`] |
//! | write a database run as files | [`export`] | [`Exported`] |
//! | create or update a database store's schema | [`migrate`] | [`Migrated`] |
//! | queue a run for a worker (database store) | [`queue`] | [`Queued`] |
//! | take up the runnable and queued runs of a database store | [`work`] | [`WorkedRun`]s |
//!
//! The commands on existing runs (`resume`, `approve`, `reject`, `cancel`,
//! `reconcile`) are in `control/`, one file each. The service's own use
//! cases (feature `server`: bridge runs, accepted runs, the controller loop,
//! adapters and decision backends) are in [`service`], which knows no HTTP:
//! `server` is its front end, and the command line could drive it alike.
//!
//! Adding a use case: one file here with its input, outcome and function,
//! re-exported below; then a thin `cli/` command and, if the service offers
//! it, a handler.

mod catalog;
mod check;
mod control;
mod ended_run;
mod error;
mod exit_status;
mod export;
mod mcp_pin;
mod policy_check;
mod preview;
mod queue;
mod replay;
mod route;
mod run;
mod runs;
mod scenario_git;
mod scenario_run;
mod scenario_sandbox;
mod scripted_model;
#[cfg(feature = "server")]
pub mod service;
mod show;
mod store_admin;
mod test;
mod test_summary;
mod verify;
mod worker;

pub use catalog::{load_catalog, load_plan_file};
pub use check::{CheckInput, CheckOutcome, check};
pub use control::{
    ApproveInput, Approved, CancelInput, ControlError, HeldRun, ReconcileInput, Reconciled, ResumeRequest, approve,
    cancel, check_answer, reconcile, reject, resume, resume_held,
};
pub use ended_run::EndedRun;
pub use error::OpsError;
pub use exit_status::ExitStatus;
pub use export::{Exported, export};
pub use mcp_pin::{McpPinInput, McpPinOutcome, ReviewedTool, mcp_pin};
pub use policy_check::{HttpVerdict, PolicyCheckInput, PolicyUrlInput, PolicyVerdict, policy_check, policy_check_url};
pub use preview::{PreviewTarget, preview};
pub use queue::{Queued, QueuedSummary, queue, queued_run};
pub use replay::{ReplayInput, ReplayReport, RouteReplay, replay};
pub use route::{Routed, route};
pub use run::{RunInput, RunOutcome, RunTarget, given_inputs, run};
pub use runs::{ListedRun, RunSummary, RunsInput, RunsOutcome, StatusFilter, runs};
pub use scenario_run::{Captured, ScenarioContext, ScenarioRun, run_scenario};
pub use scenario_sandbox::SandboxError;
pub use scripted_model::{SCRIPTED_TOKENS_IN, SCRIPTED_TOKENS_OUT, ScriptedModel};
pub use show::{LATEST, driven_run, full_state_json, show};
pub use store_admin::{Migrated, migrate};
pub use test::{
    ScenarioChange, ScenarioProblems, SnapshotResult, SnapshotState, TestInput, TestOutcome, accept_snapshot,
    reject_snapshot, test,
};
pub use verify::{Verification, VerifiedRun, verify};
pub use worker::{WorkedRun, WorkerInput, work};
