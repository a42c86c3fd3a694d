//! [`Budgets`]: the limits that stop a run, and what an exhausted one
//! records.
//!
//! The limits are the policy's budget lowered by the plan's `[budget]`. The
//! checks are pure: they say which budget is exhausted, and
//! [`Exhausted::record`] writes `budget_exhausted` and ends the run `failed`.
//! The deadline reads the clock only when the run has one, so runs without
//! `max_run_secs` take no extra clock readings.

use std::time::Duration;

use crate::model::{Budget, Plan, Policy, RunStatus, Step, StopReason};
use crate::runtime::Clock;
use crate::runtime::event::{self, Event};
use crate::runtime::recorder::Recorder;
use crate::store::{Counters, RunState, StoreError};
use jiff::Timestamp;

/// The run's effective limits.
pub(super) struct Budgets<'c> {
    limits: Budget,
    clock: &'c dyn Clock,
}

/// A budget that stops the run: its name, its limit and what was used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exhausted {
    budget: &'static str,
    limit: u64,
    used: u64,
}

impl<'c> Budgets<'c> {
    pub(super) fn new(plan: &Plan, policy: &Policy, clock: &'c dyn Clock) -> Self {
        Budgets { limits: policy.budget.lowered_by(&plan.budget), clock }
    }

    /// The whole-run deadline (wall clock since the run started, pauses
    /// included).
    pub(super) fn deadline(&self, state: &RunState) -> Option<Exhausted> {
        let limit = self.limits.max_run_secs?;
        let started: Option<Timestamp> = state.started_at.parse().ok();
        let elapsed =
            started.map_or(0, |started| (self.clock.now().as_millisecond() - started.as_millisecond()).max(0) / 1000);
        (elapsed.unsigned_abs() >= limit).then_some(Exhausted {
            budget: "max_run_secs",
            limit,
            used: elapsed.unsigned_abs(),
        })
    }

    /// The budgets that stop a run before an attempt that needs
    /// `tool_calls` more tool calls. `new_step` says whether the attempt
    /// starts a step not counted yet (the first attempt of a step; not the
    /// approved action of a step counted when it paused).
    pub(super) fn before_attempt(&self, state: &RunState, new_step: bool, tool_calls: u64) -> Option<Exhausted> {
        if let Some(exhausted) = self.deadline(state) {
            return Some(exhausted);
        }
        let counters = &state.counters;
        if new_step && counters.steps >= self.limits.max_steps {
            return Some(Exhausted { budget: "max_steps", limit: self.limits.max_steps, used: counters.steps });
        }
        self.tool_calls(state, tool_calls)
    }

    /// `max_tool_calls` before something that needs `tool_calls` more tool
    /// calls (a step, its receipt look-up, the verifier's look-ups): what
    /// would exceed the budget never runs.
    pub(super) fn tool_calls(&self, state: &RunState, tool_calls: u64) -> Option<Exhausted> {
        let used = state.counters.tool_calls;
        let limit = self.limits.max_tool_calls;
        (tool_calls > 0 && used.saturating_add(tool_calls) > limit).then_some(Exhausted {
            budget: "max_tool_calls",
            limit,
            used,
        })
    }

    /// `max_consecutive_failures`, checked after a failure was counted.
    pub(super) fn after_failure(&self, counters: &Counters) -> Option<Exhausted> {
        let limit = self.limits.max_consecutive_failures;
        let used = counters.consecutive_failures;
        (used >= limit).then_some(Exhausted { budget: "max_consecutive_failures", limit, used })
    }

    /// A step's timeout: its own, capped by the budget's.
    pub(super) fn timeout(&self, step: &Step) -> Duration {
        let cap = self.limits.step_timeout_secs;
        Duration::from_secs(step.timeout_secs.unwrap_or(cap).min(cap))
    }
}

impl Exhausted {
    /// A budget of an agent step (`max_turns`, `max_model_calls`, …).
    pub(super) fn new(budget: &'static str, limit: u64, used: u64) -> Self {
        Exhausted { budget, limit, used }
    }

    /// `budget_exhausted` (on the step at the cursor), then the run ends
    /// `failed` with stop reason `budget_exhausted`.
    pub(super) fn record(
        self,
        plan: &Plan,
        state: &mut RunState,
        recorder: &mut Recorder<'_>,
    ) -> Result<(), StoreError> {
        let Exhausted { budget, limit, used } = self;
        let step_id = plan.steps.get(state.cursor.next_step).map(|step| step.id.clone());
        let details = event::BudgetExhausted { step_id, budget: budget.to_string(), limit, used };
        recorder.emit(Event::BudgetExhausted(details))?;
        let message = format!("budget `{budget}` ({limit}) exhausted");
        recorder.end(state, RunStatus::Failed, StopReason::BudgetExhausted, Some(message));
        Ok(())
    }
}
