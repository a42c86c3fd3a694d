//! List the runs of a workspace (`planrun runs`), newest first.
//!
//! Every run folder is listed. A run is read back strictly, as `show` reads
//! it (story checks included); a run whose records fail verification is listed as unreadable with
//! the reason (never hidden, never a crash), whatever the status filter,
//! because its recorded status cannot be trusted. A queued run (database
//! store) is listed as `queued` until a worker starts it. A run recorded
//! as `running` says who drives it: the holder of its lock (file store) or
//! lease (database store), or nobody: it was interrupted.

use std::path::Path;

use jiff::Timestamp;

use crate::model::RunStatus;
use crate::ops::QueuedSummary;
use crate::ops::queue::queued_in;
use crate::ops::{ExitStatus, OpsError};
use crate::runtime::{RuntimeEnv, StoryPlans, read_checked_with};
use crate::store::{Holder, LoadedRun, RunStore, RunsPlace, StoreError};

/// Which runs to list.
pub struct RunsInput<'a> {
    pub workspace: &'a Path,
    /// Only runs with this status (unreadable runs are always listed).
    pub status: Option<StatusFilter>,
}

/// A status to list runs by: as shown, so an interrupted run is not
/// `running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    /// Runs with this status; `running` leaves out the interrupted ones.
    Is(RunStatus),
    /// Runs recorded as `running` that no process drives.
    Interrupted,
}

impl StatusFilter {
    /// `interrupted`, or a status as `state.json` spells it.
    pub fn parse(name: &str) -> Option<StatusFilter> {
        if name == "interrupted" {
            return Some(StatusFilter::Interrupted);
        }
        RunStatus::parse(name).map(StatusFilter::Is)
    }

    /// As the command line spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusFilter::Is(status) => status.as_str(),
            StatusFilter::Interrupted => "interrupted",
        }
    }

    /// Whether `run` is listed under this filter.
    fn keeps(self, run: &RunSummary) -> bool {
        match self {
            StatusFilter::Is(status) => run.status == status && !run.interrupted(),
            StatusFilter::Interrupted => run.interrupted(),
        }
    }
}

/// One readable run, as the list shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    pub run_id: String,
    pub plan: String,
    pub status: RunStatus,
    pub stop_reason: Option<String>,
    /// Steps that failed with `on_failure = "continue"` (empty for most runs).
    pub failed_steps: Vec<String>,
    pub steps: u64,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// From `started_at` to `finished_at`; `None` while the run has not ended.
    pub duration_ms: Option<u64>,
    /// Who drives a run recorded as `running` ([`Holder::Nobody`]: it was
    /// interrupted); `None` for any other status, or when it cannot be told.
    pub holder: Option<Holder>,
}

impl RunSummary {
    /// Recorded as `running`, and no process drives it: its process died.
    pub fn interrupted(&self) -> bool {
        self.holder == Some(Holder::Nobody)
    }
}

/// One entry of the list: the run, or why its records could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListedRun {
    Readable(RunSummary),
    /// Submitted and not started by a worker yet: no records to read.
    Queued(QueuedSummary),
    Unreadable {
        run_id: String,
        error: String,
    },
}

/// The runs, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunsOutcome {
    pub runs: Vec<ListedRun>,
    /// Where the store keeps them (what an empty list names).
    pub place: RunsPlace,
}

impl RunsOutcome {
    /// 0 when every listed run verified; 2 when one failed verification (as
    /// `show` exits for it).
    pub fn exit_status(&self) -> ExitStatus {
        if self.runs.iter().any(|run| matches!(run, ListedRun::Unreadable { .. })) {
            ExitStatus::InvalidInput
        } else {
            ExitStatus::Done
        }
    }
}

/// Lists the runs of `input.workspace` (an empty list when it has none).
pub fn runs(input: RunsInput<'_>, env: &RuntimeEnv) -> Result<RunsOutcome, OpsError> {
    let store = env.store(input.workspace);
    let mut runs = Vec::new();
    let mut plans = StoryPlans::default();
    for listing in store.list_runs()? {
        let listed = match read_checked_with(store.as_ref(), &listing.run_id, input.workspace, &mut plans)
            .and_then(|(run, _)| driven(store.as_ref(), run))
        {
            Ok((run, holder)) => ListedRun::Readable(summarize(&run, holder)),
            Err(StoreError::Queued { .. }) => match queued_in(store.as_ref(), &listing.run_id)? {
                Some(queued) => ListedRun::Queued(queued),
                // Started between the two reads: listed as it is now.
                None => match read_checked_with(store.as_ref(), &listing.run_id, input.workspace, &mut plans)
                    .and_then(|(run, _)| driven(store.as_ref(), run))
                {
                    Ok((run, holder)) => ListedRun::Readable(summarize(&run, holder)),
                    Err(error) => ListedRun::Unreadable { run_id: listing.run_id, error: error.to_string() },
                },
            },
            Err(error) => ListedRun::Unreadable { run_id: listing.run_id, error: error.to_string() },
        };
        let wanted = match (&listed, input.status) {
            (ListedRun::Readable(summary), Some(filter)) => filter.keeps(summary),
            // Not a run status yet: listed only when no status is asked for.
            (ListedRun::Queued(_), Some(_)) => false,
            _ => true,
        };
        if wanted {
            runs.push(listed);
        }
    }
    Ok(RunsOutcome { runs, place: store.runs_place() })
}

/// Run `run` as read, with who drives it when it is recorded as `running`
/// (see [`RunSummary::holder`]). The holder is seen after the read: a run
/// that no one holds is read again, since it may have ended in between.
pub(crate) fn driven(store: &dyn RunStore, run: LoadedRun) -> Result<(LoadedRun, Option<Holder>), StoreError> {
    if run.state.status != RunStatus::Running {
        return Ok((run, None));
    }
    match store.holder(&run.state.run_id) {
        Ok(Holder::Nobody) => {
            let again = store.read_run(&run.state.run_id)?;
            let holder = (again.state.status == RunStatus::Running).then_some(Holder::Nobody);
            Ok((again, holder))
        }
        Ok(holder) => Ok((run, Some(holder))),
        Err(_) => Ok((run, None)),
    }
}

fn summarize(run: &LoadedRun, holder: Option<Holder>) -> RunSummary {
    let state = &run.state;
    let instant = |text: &str| text.parse::<Timestamp>().ok();
    let duration_ms = state
        .finished_at
        .as_deref()
        .and_then(instant)
        .zip(instant(&state.started_at))
        .and_then(|(finished, started)| u64::try_from(finished.as_millisecond() - started.as_millisecond()).ok());
    RunSummary {
        run_id: state.run_id.clone(),
        plan: state.plan.id.clone(),
        status: state.status,
        stop_reason: state.stop_reason.as_ref().map(ToString::to_string),
        failed_steps: state.failed_steps.clone(),
        steps: state.counters.steps,
        started_at: state.started_at.clone(),
        finished_at: state.finished_at.clone(),
        duration_ms,
        holder,
    }
}
