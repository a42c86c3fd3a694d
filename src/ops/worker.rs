//! `planrun worker`: takes up the runs of its workspace that a database
//! store holds for nobody — interrupted ones (their process died and its
//! lease expired), approved ones waiting to be resumed, and queued ones
//! (below) — and drives each
//! as `resume` does: claiming its lease (a new fencing token), verifying
//! its records, recovering from receipts, and giving the lease back at the
//! end or at the next approval gate.
//!
//! Each run is tried once per checkpoint: a run the worker could not
//! continue (an expired approval, changed files) is not tried again until
//! its `state_version` moves. A run another worker (or another of this
//! worker's `--concurrency` loops) claimed first is skipped: the claim is
//! one guarded statement, so two loops never drive one run. Between passes
//! a loop waits for the store's wake-up (`LISTEN/NOTIFY` in PostgreSQL) or
//! `poll`, whichever comes first.
//!
//! After each pass a loop takes up the queued runs (`--queue`, `POST
//! /runs` with `"wait": false`): it claims the oldest nobody is starting
//! (one guarded `FOR UPDATE SKIP LOCKED` statement, a new fencing token)
//! and starts it as `planrun --plan` would, until none is left; a claimer
//! that dies before the run's first checkpoint leaves it queued, and it is
//! claimed again once that lease expires (see docs/scale-out.md).
//!
//! A database that goes away ([`StoreError::Unavailable`]: restarting,
//! unreachable, a session terminated) makes a loop wait and try again,
//! with jittered exponential backoff ([`Backoff`]), instead of ending: a
//! listing that failed is made again; a run whose drive failed is neither
//! reported nor marked tried, its lease is given back (or expires), and
//! the next pass takes it up again through the usual recovery: what the
//! interrupted call wrote is read back, never assumed (a keyed effect is
//! decided by its receipt). `--once` fails instead (exit 2).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::ops::{ControlError, ResumeRequest};
use crate::ops::{OpsError, RunOutcome};
use crate::runtime::{NoProgress, QueuedError, RunError, RuntimeEnv, start_claimed};
use crate::store::backoff::Backoff;
use crate::store::{RunId, RunStore, Runnable, StoreError};

/// What the worker is asked to do.
#[derive(Debug, Clone)]
pub struct WorkerInput {
    pub workspace: PathBuf,
    /// One pass over the runnable runs, then return.
    pub once: bool,
    /// How long to wait between passes.
    pub poll: Duration,
    /// How many runs are driven at once (one loop each).
    pub concurrency: usize,
    /// Set to stop: each loop ends after the run it is driving (the
    /// service's worker, stopped at shutdown).
    pub stop: Option<Arc<AtomicBool>>,
}

impl WorkerInput {
    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|stop| stop.load(Ordering::SeqCst))
    }

    /// Sleeps `delay`, in slices, so that a stop is seen within 50 ms.
    fn back_off(&self, delay: Duration) {
        let slice = Duration::from_millis(50);
        let mut slept = Duration::ZERO;
        while slept < delay && !self.stopped() {
            std::thread::sleep(slice.min(delay - slept));
            slept += slice;
        }
    }

    /// Waits up to `poll` for a wake-up from `store`, in slices, so that a
    /// stop is seen within 50 ms.
    fn pause(&self, store: &dyn RunStore) {
        let slice = Duration::from_millis(50);
        let mut waited = Duration::ZERO;
        while waited < self.poll && !self.stopped() {
            if store.wait_for_runnable(slice.min(self.poll - waited)) {
                return;
            }
            waited += slice;
        }
    }
}

/// One run the worker took up, and how it went.
#[derive(Debug)]
pub struct WorkedRun {
    pub run_id: String,
    pub outcome: Result<RunOutcome, OpsError>,
}

/// Whether `error` says another process holds the run now.
fn taken_by_another(error: &OpsError) -> bool {
    matches!(
        error,
        OpsError::Control(ControlError::Store(StoreError::Locked { .. } | StoreError::LeaseLost { .. }))
            | OpsError::Records(StoreError::Locked { .. } | StoreError::LeaseLost { .. })
    )
}

/// Whether `error` says the store could not be reached (or the session was
/// lost mid-call): the run is taken up again once it answers.
fn store_unavailable(error: &OpsError) -> bool {
    let store = match error {
        OpsError::Records(error)
        | OpsError::Control(ControlError::Store(error))
        | OpsError::Run(RunError::Records(error) | RunError::Start(error))
        | OpsError::Control(ControlError::Run(RunError::Records(error) | RunError::Start(error))) => error,
        _ => return false,
    };
    store.is_unavailable()
}

/// Whether run `runnable` has been checkpointed since it was listed.
fn moved_on(store: &dyn RunStore, runnable: &Runnable) -> bool {
    store.read_run(&runnable.run_id).is_ok_and(|run| run.state.state_version != runnable.state_version)
}

/// Works runs until stopped (or after one pass with `once`) in
/// `concurrency` loops, calling `report` for each run taken up; returns how
/// many were. The first store error of any loop ends the call.
pub fn work(input: &WorkerInput, env: &RuntimeEnv, report: &(dyn Fn(&WorkedRun) + Sync)) -> Result<usize, OpsError> {
    let loops = input.concurrency.max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..loops).map(|_| scope.spawn(|| work_loop(input, env, report))).collect();
        let mut worked = 0;
        let mut first_error = None;
        for handle in handles {
            match handle.join() {
                Ok(Ok(count)) => worked += count,
                Ok(Err(error)) => first_error = first_error.or(Some(error)),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        first_error.map_or(Ok(worked), Err)
    })
}

/// One loop: pass over the runnable runs, take up each it has not tried at
/// this checkpoint, wait, again.
fn work_loop(input: &WorkerInput, env: &RuntimeEnv, report: &(dyn Fn(&WorkedRun) + Sync)) -> Result<usize, OpsError> {
    let store = env.store(&input.workspace);
    let mut tried: HashSet<(String, u64)> = HashSet::new();
    // Queued runs this loop claimed and could not start (their request is
    // not one this planrun reads): left queued, not claimed again.
    let mut refused: Vec<String> = Vec::new();
    let mut worked = 0;
    let mut backoff = Backoff::default();
    loop {
        let runnables = match store.runnable_runs() {
            Ok(runnables) => runnables,
            Err(error) if error.is_unavailable() && !input.once => {
                input.back_off(backoff.next_delay());
                if input.stopped() {
                    return Ok(worked);
                }
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        let mut lost = false;
        for runnable in runnables {
            if input.stopped() {
                return Ok(worked);
            }
            if !tried.insert((runnable.run_id.clone(), runnable.state_version)) {
                continue;
            }
            let outcome = RunId::parse(&runnable.run_id).map_err(OpsError::from).and_then(|run_id| {
                let request = ResumeRequest {
                    workspace: input.workspace.clone(),
                    run_id,
                    allow_changed_files: false,
                    // Runs in a database always have a checkpoint: no
                    // interrupted start to begin again from a policy file.
                    policies: None,
                    answer: None,
                };
                crate::ops::resume(request, env, &mut NoProgress)
            });
            if !input.once && outcome.as_ref().is_err_and(store_unavailable) {
                // Not this checkpoint's verdict: the run is tried again once
                // the database answers.
                tried.remove(&(runnable.run_id.clone(), runnable.state_version));
                lost = true;
                break;
            }
            // The listing is a hint: between it and the claim another loop
            // may have driven the run (it then refuses to continue, or is
            // held). That is not this loop's run to report.
            if outcome.as_ref().is_err_and(|error| taken_by_another(error) || moved_on(store.as_ref(), &runnable)) {
                continue;
            }
            worked += 1;
            report(&WorkedRun { run_id: runnable.run_id, outcome });
        }
        worked += start_queued(input, env, store.as_ref(), &mut refused, report)?;
        if input.once || input.stopped() {
            return Ok(worked);
        }
        if lost {
            input.back_off(backoff.next_delay());
            continue;
        }
        backoff.reset();
        input.pause(store.as_ref());
    }
}

/// Claims queued runs, oldest first, and starts each, until none is left
/// (or the loop is stopped); returns how many were taken up. A run whose
/// start is refused before anything ran is remembered in `refused`.
fn start_queued(
    input: &WorkerInput,
    env: &RuntimeEnv,
    store: &dyn RunStore,
    refused: &mut Vec<String>,
    report: &(dyn Fn(&WorkedRun) + Sync),
) -> Result<usize, OpsError> {
    let mut worked = 0;
    while !input.stopped() {
        let Some(claim) = store.claim_queued(refused)? else { break };
        let run_id = claim.handle.run_id().to_string();
        let outcome = match start_claimed(claim, &input.workspace, env, &mut NoProgress) {
            Ok(outcome) => Ok(outcome),
            Err(QueuedError::Run(error)) => Err(OpsError::Run(error)),
            Err(error @ QueuedError::Request { .. }) => {
                refused.push(run_id.clone());
                Err(OpsError::Usage(error.to_string()))
            }
        };
        worked += 1;
        report(&WorkedRun { run_id, outcome });
    }
    Ok(worked)
}
