//! The [`Recorder`]: the one place the runtime writes a run's records.
//!
//! It owns the run's handle from the run store ([`RunHandle`], which holds
//! the run's lock or lease) and the clock that stamps the records. The interpreter and the control commands (`approve`, `reject`,
//! `cancel`) both write through it: append an audit event, append a history
//! record, take a durable checkpoint followed by `state_saved`, and end a
//! run with `run_finished`. Nothing else in the runtime writes a run's
//! records, and it writes them only through the [`RunHandle`] seam.
//!
//! The checkpoint is the sealed head of the run's log, so it is written
//! after the last line it covers: `state_saved` (and, when the run has
//! ended, `run_finished`) is appended first, then the head that names it
//! (a store may write that event and the head as one record: the file
//! store's head line, whose link it knows only once written, which is why
//! the head's `audit_hash` is read back after the checkpoint). A line past
//! the head is a crash tail, never trusted, so nothing a run claims may be
//! written after its last head.

use std::path::PathBuf;

use serde_json::Value;

use crate::model::{RunStatus, StopReason};
use crate::runtime::event::{ChildStopped, Event, RunCancelled, RunFinished, StateSaved};
use crate::runtime::{Clock, format_timestamp};
use crate::store::{
    ApprovalDecision, ApprovalUse, ClaimsExhausted, NewEvent, RunHandle, RunRecords, RunState, StepRecord, StoreError,
};
use crate::tools::children::Stopped;

/// Writes one run's records. Invariant: every event carries the clock's
/// reading at the moment it is appended, so a [`crate::runtime::FixedClock`]
/// makes the records byte-stable.
pub struct Recorder<'c> {
    run: Box<dyn RunHandle>,
    clock: &'c dyn Clock,
    /// Whether `run_finished` has been written (by the checkpoint of an
    /// ended run).
    finished: bool,
}

impl<'c> Recorder<'c> {
    pub fn new(run: Box<dyn RunHandle>, clock: &'c dyn Clock) -> Self {
        Recorder { run, clock, finished: false }
    }

    /// The run's handle, still holding the run (see
    /// `ops::HeldRun`, a run a control command still holds).
    pub fn into_run(self) -> Box<dyn RunHandle> {
        self.run
    }

    /// Where the run's records are (for progress reports).
    pub fn records(&self) -> RunRecords {
        self.run.records()
    }

    /// Before an effect (and after one, before its outcome is kept): the
    /// run's lease still holds, or [`StoreError::LeaseLost`] and the step
    /// goes no further. Past the local deadline another process may own
    /// the run, so this one starts nothing and records nothing more.
    pub fn may_act(&self) -> Result<(), StoreError> {
        if self.run.fence().holds() { Ok(()) } else { Err(StoreError::LeaseLost { id: self.run.run_id().to_string() }) }
    }

    /// Whether the claim that opened this run took it over from dead
    /// holders more often than the store allows.
    pub fn claims_exhausted(&self) -> Option<ClaimsExhausted> {
        self.run.claims_exhausted()
    }

    /// Stores the plan as the run saw it (`plan.json`).
    pub fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError> {
        self.run.write_plan(plan)
    }

    /// Appends one event to the run's audit log.
    pub fn emit(&mut self, event: Event) -> Result<(), StoreError> {
        let columns = event.columns().map_err(|error| StoreError::Io {
            action: "serialize an event of",
            path: PathBuf::from(self.run.records().to_string()),
            source: error.into(),
        })?;
        let ts = format_timestamp(self.clock.now());
        let status = Some(event.status());
        let new = NewEvent {
            ts,
            event_type: &columns.event_type,
            step_id: event.step_id(),
            status,
            details: columns.details,
        };
        self.run.append_event(new).map(|_| ())
    }

    /// Appends one attempt's record to the history and counts it.
    pub fn append_history(&mut self, state: &mut RunState, record: &StepRecord) -> Result<(), StoreError> {
        self.run.append_history(record)?;
        state.counters.history_records += 1;
        Ok(())
    }

    /// Hands a person's decision (its event emitted already) to the store,
    /// which records it with the next checkpoint.
    pub fn record_decision(&mut self, decision: ApprovalDecision) -> Result<(), StoreError> {
        self.run.record_decision(decision)
    }

    /// Uses the approval of the frozen action before it runs (after its
    /// `approval_verified` event): a shared store may refuse it.
    pub fn consume_approval(&mut self, approval: &ApprovalUse) -> Result<(), StoreError> {
        self.run.consume_approval(approval)
    }

    /// One durable checkpoint: `state_saved` (and `run_finished` once the
    /// run has ended), then the head: a new `state_version` that records
    /// the audit line it covers, written atomically over the version it
    /// replaces (compare-and-set).
    pub fn checkpoint(&mut self, state: &mut RunState) -> Result<(), StoreError> {
        self.checkpoint_with(state, false)
    }

    /// The checkpoint after a step that changes nothing outside the run
    /// (a read), if the run goes on: its sync may wait for the next one
    /// ([`RunHandle::checkpoint_reads`]).
    pub fn checkpoint_reads(&mut self, state: &mut RunState) -> Result<(), StoreError> {
        self.checkpoint_with(state, true)
    }

    /// Makes every checkpoint so far durable, before a step that may change
    /// the world starts.
    pub fn make_durable(&mut self) -> Result<(), StoreError> {
        self.run.make_durable()
    }

    fn checkpoint_with(&mut self, state: &mut RunState, after_a_read: bool) -> Result<(), StoreError> {
        let expected = state.state_version;
        state.state_version += 1;
        state.updated_at = format_timestamp(self.clock.now());
        let step_id = state.current_step_id.clone();
        self.emit(Event::StateSaved(StateSaved { step_id, state_version: state.state_version }))?;
        if state.status.is_terminal() && !self.finished {
            self.emit_run_finished(state)?;
        }
        state.audit_seq = self.run.audit_seq();
        state.audit_hash = self.run.audit_hash().map(str::to_string);
        if after_a_read && state.status == RunStatus::Running {
            self.run.checkpoint_reads(state, expected)?;
        } else {
            self.run.checkpoint(state, expected)?;
        }
        state.audit_hash = self.run.audit_hash().map(str::to_string);
        Ok(())
    }

    /// Logs `child_stopped` when a shell child a killed predecessor left
    /// running was stopped (`tools::children`), at the step that started it
    /// (as its note says; a note that does not name it: the run's current
    /// step).
    pub fn child_stopped(&mut self, stopped: Option<Stopped>, state: &RunState) -> Result<(), StoreError> {
        match stopped {
            Some(Stopped { pid, step_id }) => {
                let step_id = step_id.or_else(|| state.current_step_id.clone());
                self.emit(Event::ChildStopped(ChildStopped { step_id, pid }))
            }
            None => Ok(()),
        }
    }

    /// Marks the run ended in memory (the next checkpoint makes it durable).
    pub fn end(&self, state: &mut RunState, status: RunStatus, reason: StopReason, error: Option<String>) {
        state.status = status;
        state.stop_reason = Some(reason);
        state.current_step_id = None;
        // An agent step in progress ends with the run (its turns stay in the log).
        state.agent = None;
        state.error = error;
        state.finished_at = Some(format_timestamp(self.clock.now()));
    }

    /// Makes sure `run_finished` is recorded under a head. The checkpoint
    /// of an ended run has written it already; otherwise it is written now
    /// and the head is written again over it (same `state_version`: the
    /// state is the same, only the log it covers is one line longer).
    pub fn run_finished(&mut self, state: &RunState) -> Result<(), StoreError> {
        if self.finished {
            return Ok(());
        }
        self.emit_run_finished(state)?;
        let mut head = state.clone();
        head.audit_seq = self.run.audit_seq();
        head.audit_hash = self.run.audit_hash().map(str::to_string);
        self.run.checkpoint(&head, head.state_version)
    }

    fn emit_run_finished(&mut self, state: &RunState) -> Result<(), StoreError> {
        self.finished = true;
        self.emit(Event::RunFinished(RunFinished {
            status: state.status,
            stop_reason: state.stop_reason.clone(),
            steps: state.counters.steps,
            tool_calls: state.counters.tool_calls,
            error: state.error.clone(),
        }))
    }

    /// Ends a paused or interrupted run on a person's word (`reject`,
    /// `cancel`): nothing more runs; checkpoint, then `run_finished`.
    pub fn end_by_person(&mut self, state: &mut RunState, status: RunStatus, error: String) -> Result<(), StoreError> {
        state.pending_action = None;
        state.approval = None;
        self.end(state, status, StopReason::from(status.as_str()), Some(error));
        self.checkpoint(state)?;
        self.run_finished(state)
    }

    /// Ends a run on a person's `cancel` (`run_cancelled`, then as
    /// [`Recorder::end_by_person`]): status `cancelled`, nothing more runs.
    /// The run's `error` is `what` (e.g. `cancelled`), then the reason.
    pub fn cancel(&mut self, state: &mut RunState, reason: Option<String>, what: &str) -> Result<(), StoreError> {
        self.emit(Event::RunCancelled(RunCancelled {
            step_id: state.current_step_id.clone(),
            from_status: state.status,
            reason: reason.clone(),
        }))?;
        let error = match &reason {
            Some(reason) => format!("{what}: {reason}"),
            None => what.to_string(),
        };
        self.end_by_person(state, RunStatus::Cancelled, error)
    }
}
