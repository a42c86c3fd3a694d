//! [`Attempt`]: one attempt of one step, from its start event to the
//! decision about what comes next.
//!
//! In order: budgets → `step_started` (or `retry_attempt_started`) → the
//! `when` condition (a false one skips the step, or ends the run
//! `already_satisfied`) → `resolution_performed` (when the payload has
//! templates) → the approval gate (the resolved action is frozen and the run
//! pauses `waiting_approval`) → policy + tool, through the receipts for
//! keyed steps → `expect` → the history record and `step_finished` (or
//! `retry_attempt_finished`) → on failure `step_failed` and, when another
//! attempt is allowed, `retry_scheduled`. The checkpoint after the attempt
//! belongs to the step loop.
//!
//! An `Attempt` borrows the interpreter's parts for the length of one
//! attempt; it holds no state of its own beyond them.

use jiff::Timestamp;
use serde_json::Value;

use crate::model::{
    Action, Condition, Decision, Evaluation, EvidenceDetail, EvidenceKind, FailureClass, OnFailure, Plan, Policy,
    RunStatus, SatisfiedEvidence, Step, StepDetails, StopReason, WhenFalse,
};
use crate::runtime::env::CrashPoint;
use crate::runtime::event::{
    AttemptFinished, AttemptStarted, ConditionEvaluated, Event, ResolutionPerformed, RetryScheduled, StepFailed,
    StepSkipped,
};
use crate::runtime::recorder::Recorder;
use crate::runtime::{Progress, RuntimeEnv, format_timestamp};
use crate::store::{Cursor, Evidence, RunState, StepRecord, StepRecordStatus, StoreError};
use crate::template::{StepOutput, StepState};
use crate::tools::{ResolvedAction, ToolFailure, ToolOutcome, Tools};

use super::budgets::Budgets;
use super::completion::{Verifier, apply_expect};
use super::gate::approval_required_by;
use super::idempotency::{EffectRun, Idempotency, KeyedStep, crash_hook};
use super::outcome::{Attempted, failure};
use super::outputs::Outputs;
use super::render::{render_action, render_env};

/// The interpreter's parts, borrowed for one attempt.
pub(super) struct Attempt<'a, 'r> {
    pub(super) plan: &'r Plan,
    pub(super) policy: &'r Policy,
    pub(super) env: &'r RuntimeEnv,
    pub(super) state: &'a mut RunState,
    pub(super) recorder: &'a mut Recorder<'r>,
    pub(super) outputs: &'a mut Outputs,
    pub(super) tools: &'a mut Tools<'r>,
    pub(super) budgets: &'a Budgets<'r>,
    pub(super) idempotency: &'a Idempotency<'r>,
    pub(super) verifier: &'a Verifier<'r>,
    /// Whether any shell rule of the policy decides `prompt`.
    pub(super) prompt_rules: bool,
    pub(super) progress: &'a mut dyn Progress,
}

impl Attempt<'_, '_> {
    /// One attempt of step `index`. `approved` is the frozen action a
    /// person approved (only when resuming a paused run): it skips the
    /// start event, the condition, resolution and the gate, not the budgets.
    pub(super) fn run(mut self, index: usize, step: &Step, approved: Option<ResolvedAction>) -> Result<(), StoreError> {
        if let Action::Agent(spec) = &step.action {
            return self.agent(index, step, spec, approved);
        }
        // A holder whose lease ran out starts nothing.
        self.recorder.may_act()?;
        // What the run recorded so far is durable before anything that may
        // change the world starts.
        if step.action.may_change_the_world() {
            self.recorder.make_durable()?;
        }
        let attempt = self.state.cursor.attempts + 1;
        let is_tool = !matches!(step.action, Action::Finish { .. });
        let resuming_pending = approved.is_some();
        // The approved action of a paused step was counted as a step when
        // it paused; its tool calls (receipt look-up and effect) are not
        // counted yet, so the budgets are checked for it as for any other.
        let new_step = attempt == 1 && !resuming_pending;
        if !self.budget_allows(index, step, new_step, resuming_pending)? {
            return Ok(());
        }
        if !resuming_pending {
            if attempt == 1 {
                self.state.counters.steps += 1;
            }
            self.state.current_step_id = Some(step.id.clone());
            let details = AttemptStarted { step_id: step.id.clone(), kind: step.action.kind().to_string(), attempt };
            let started_event =
                if attempt == 1 { Event::StepStarted(details) } else { Event::RetryAttemptStarted(details) };
            self.recorder.emit(started_event)?;
        }
        let started = self.env.clock.now();

        let action = match approved {
            Some(action) => Ok(action),
            None => {
                if let Some(condition) = &step.when {
                    match self.evaluate_condition(step, condition)? {
                        Ok(true) => {}
                        Ok(false) => return self.skip(index, step, condition, started),
                        Err(failure) => {
                            return self.finish(
                                index,
                                step,
                                attempt,
                                started,
                                None,
                                Attempted::unkeyed(ToolOutcome::err(failure)),
                            );
                        }
                    }
                }
                self.resolve(step)?
            }
        };
        let action = match action {
            Ok(action) => action,
            Err(failure) => {
                return self.finish(index, step, attempt, started, None, Attempted::unkeyed(ToolOutcome::err(failure)));
            }
        };

        if !resuming_pending {
            // The tool evaluates the policy again when it runs; asking it
            // first is only worth it when some rule can say `prompt`.
            let decision = if self.prompt_rules { self.tools.decide(&action) } else { Decision::Allow };
            if let Some(required_by) = approval_required_by(step, decision) {
                return self.freeze(step, &action, required_by.to_string());
            }
        }

        // A keyed step counts its own tool calls: a receipt look-up during
        // recovery, and the effect only when it really runs.
        if is_tool && step.idempotency_key.is_none() {
            self.state.counters.tool_calls += 1;
        }
        let timeout = self.budgets.timeout(step);
        self.tools.at_step(&step.id);
        match render_env(step, self.tools.policy, self.outputs) {
            Ok((env, headers)) => {
                self.tools.set_step_env(env);
                self.tools.set_step_headers(headers);
            }
            Err(failure) => {
                let outcome = ToolOutcome::err(failure);
                return self.finish(index, step, attempt, started, Some(&action), Attempted::unkeyed(outcome));
            }
        }
        let attempted = match &step.idempotency_key {
            Some(key_template) => match key_template.render(&*self.outputs) {
                Ok(key) => {
                    let run = EffectRun { attempt, timeout, approved: resuming_pending };
                    let keyed = KeyedStep { step, key, action: &action };
                    self.idempotency.execute(keyed, self.state, self.recorder, self.tools, run)?
                }
                Err(_) => Attempted::unkeyed(ToolOutcome::err(failure(
                    FailureClass::TemplateError,
                    format!("idempotency key `{}` could not be resolved", key_template.source()),
                ))),
            },
            None => {
                self.recorder.may_act()?;
                crash_hook(self.env, step, CrashPoint::BeforeEffect);
                let outcome = self.tools.execute(&action, attempt, timeout, resuming_pending);
                // A lease that ran out meanwhile (the tool was killed, or
                // another process may own the run): its outcome is not
                // this process's to keep.
                self.recorder.may_act()?;
                crash_hook(self.env, step, CrashPoint::AfterEffect);
                Attempted::unkeyed(outcome)
            }
        };
        let attempted = Attempted { outcome: apply_expect(step, attempted.outcome), keyed: attempted.keyed };
        self.finish(index, step, attempt, started, Some(&action), attempted)
    }

    /// Checks the budgets that stop a run before an attempt starts; an
    /// exhausted one is recorded and ends the run. The tool calls counted
    /// are the attempt's own, its receipt look-up when recovering, and the
    /// `[[verify]]` look-ups kept in reserve from the first step that may
    /// change the world on; an attempt whose `when` is false (or cannot be
    /// resolved) calls no tool, so it needs none of them.
    fn budget_allows(&mut self, index: usize, step: &Step, new_step: bool, approved: bool) -> Result<bool, StoreError> {
        let is_tool = !matches!(step.action, Action::Finish { .. });
        let needed = if approved || self.reaches_the_tool(step) {
            u64::from(is_tool) + u64::from(self.idempotency.lookup_needed(step)) + self.verifier.reserved_by(index)
        } else {
            0
        };
        match self.budgets.before_attempt(self.state, new_step, needed) {
            Some(exhausted) => {
                exhausted.record(self.plan, self.state, self.recorder)?;
                Ok(false)
            }
            None => Ok(true),
        }
    }

    /// Whether the step's `when` lets the attempt go on to its tool (the
    /// same evaluation as [`Attempt::evaluate_condition`], unrecorded).
    fn reaches_the_tool(&self, step: &Step) -> bool {
        step.when
            .as_ref()
            .is_none_or(|condition| condition.evaluate(&*self.outputs).is_ok_and(|evaluation| evaluation.holds))
    }

    /// Records an attempt's outcome and decides what comes next.
    pub(super) fn finish(
        &mut self,
        index: usize,
        step: &Step,
        attempt: u32,
        started: Timestamp,
        action: Option<&ResolvedAction>,
        attempted: Attempted,
    ) -> Result<(), StoreError> {
        let finished = self.env.clock.now();
        let duration_ms = u64::try_from(finished.as_millisecond() - started.as_millisecond()).unwrap_or(0);
        let (ToolOutcome { result, stderr_text, .. }, details) = attempted.split();
        let exit_code = match &details {
            StepDetails::Attempt { tool, .. } => tool.exit_code(),
            _ => None,
        };
        let (status, output_text, success, failure) = match result {
            Ok(success) => (StepRecordStatus::Done, success.output_text.clone(), Some(success), None),
            Err(failure) => (StepRecordStatus::Failed, failure.output_text.clone(), None, Some(failure)),
        };
        let record = StepRecord {
            step_id: step.id.clone(),
            kind: step.action.kind().to_string(),
            status,
            attempt,
            failure_class: failure.as_ref().map(|failure| failure.class),
            action: action.map(|action| serde_json::to_value(action).unwrap_or(Value::Null)),
            output_text,
            output_json: success.as_ref().and_then(|success| success.output_json.clone()),
            stderr_text: stderr_text.clone(),
            error: failure.as_ref().map(|failure| failure.message.clone()),
            details: details.clone(),
            started_at: format_timestamp(started),
            finished_at: format_timestamp(finished),
            duration_ms,
        };
        self.recorder.append_history(self.state, &record)?;

        // The event repeats the record's facts, the tool's after its own.
        let details = AttemptFinished {
            step_id: record.step_id.clone(),
            kind: record.kind.clone(),
            attempt,
            duration_ms,
            failure_class: record.failure_class,
            error: record.error.clone(),
            tool: details,
        };
        let finished_event =
            if attempt == 1 { Event::StepFinished(details) } else { Event::RetryAttemptFinished(details) };
        self.recorder.emit(finished_event)?;
        self.progress.step_finished(index, self.plan.steps.len(), step, &record);

        match (success, failure) {
            (Some(success), _) => {
                let output = StepOutput {
                    output_text: success.output_text,
                    output_json: success.output_json,
                    stderr_text: stderr_text.unwrap_or_default(),
                    status: StepState::Done,
                    exit_code,
                };
                self.succeeded(index, step, output)?
            }
            (None, Some(failure)) => {
                let output = StepOutput {
                    output_text: failure.output_text.clone(),
                    output_json: None,
                    stderr_text: stderr_text.unwrap_or_default(),
                    status: StepState::Failed,
                    exit_code,
                };
                self.failed(index, step, attempt, failure, output)?
            }
            (None, None) => {}
        }
        Ok(())
    }

    fn succeeded(&mut self, index: usize, step: &Step, output: StepOutput) -> Result<(), StoreError> {
        self.state.counters.consecutive_failures = 0;
        self.state.cursor = Cursor { next_step: index + 1, attempts: 0 };
        self.outputs.record(&step.id, output);
        if matches!(step.action, Action::Finish { .. }) {
            self.complete(StopReason::FinishStep)?;
        }
        Ok(())
    }

    fn failed(
        &mut self,
        index: usize,
        step: &Step,
        attempt: u32,
        failure: ToolFailure,
        output: StepOutput,
    ) -> Result<(), StoreError> {
        self.state.counters.consecutive_failures += 1;
        self.state.cursor.attempts = attempt;
        let max_attempts = self.policy.retry.attempts_for(failure.class, step.retry);
        let retry_allowed = attempt < max_attempts;
        let exhausted = self.budgets.after_failure(&self.state.counters);
        let retry_scheduled = retry_allowed && exhausted.is_none();
        let continues = step.on_failure == OnFailure::Continue && failure.class.may_continue();
        self.recorder.emit(Event::StepFailed(StepFailed {
            step_id: step.id.clone(),
            failure_class: failure.class,
            attempt,
            max_attempts,
            retry_scheduled,
            error: failure.message.clone(),
        }))?;
        if retry_scheduled {
            // The loop waits after the checkpoint ([`super::Interpreter::drive`]).
            let wait = self.policy.retry.wait_after(step.retry_backoff.as_ref(), &self.state.run_id, &step.id, attempt);
            self.recorder.emit(Event::RetryScheduled(RetryScheduled {
                step_id: step.id.clone(),
                failure_class: failure.class,
                next_attempt: attempt + 1,
                max_attempts,
                backoff_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            }))?;
            self.progress.retry_waiting(step, attempt + 1, max_attempts, wait);
        } else if let Some(exhausted) = exhausted.filter(|_| retry_allowed || continues) {
            exhausted.record(self.plan, self.state, self.recorder)?;
        } else if continues {
            // The failure is the step's last: recorded, readable by later
            // steps, and the run goes on. The consecutive-failure count is
            // not reset, so continued failures in a row still exhaust
            // `max_consecutive_failures` (the run then ends
            // `budget_exhausted`).
            self.state.failed_steps.push(step.id.clone());
            self.state.cursor = Cursor { next_step: index + 1, attempts: 0 };
            self.outputs.record_failed(&step.id, output);
        } else {
            let reason = match failure.class {
                FailureClass::ToolResultUncertain => StopReason::ToolResultUncertain,
                FailureClass::IdempotencyConflict => StopReason::IdempotencyConflict,
                _ => StopReason::StepFailed,
            };
            let message = format!("step `{}` failed ({}): {}", step.id, failure.class, failure.message);
            self.recorder.end(self.state, RunStatus::Failed, reason, Some(message));
        }
        Ok(())
    }

    /// The run reached its end: `[[verify]]` decides whether it is `done`.
    fn complete(&mut self, reason: StopReason) -> Result<(), StoreError> {
        self.verifier.complete(reason, self.state, self.recorder, self.idempotency.receipts(), self.budgets)
    }

    /// Evaluates a `when` condition. `Ok(Err(_))` is a template failure.
    fn evaluate_condition(
        &mut self,
        step: &Step,
        condition: &Condition,
    ) -> Result<Result<bool, ToolFailure>, StoreError> {
        let Evaluation { holds, value, test } = match condition.evaluate(&*self.outputs) {
            Ok(evaluation) => evaluation,
            Err(message) => return Ok(Err(failure(FailureClass::TemplateError, message))),
        };
        self.recorder.emit(Event::ConditionEvaluated(ConditionEvaluated {
            step_id: step.id.clone(),
            value,
            test,
            holds,
        }))?;
        Ok(Ok(holds))
    }

    /// A false `when`: the step is skipped; with `otherwise =
    /// "already_satisfied"` the goal already holds and the run completes.
    fn skip(&mut self, index: usize, step: &Step, condition: &Condition, started: Timestamp) -> Result<(), StoreError> {
        let finished = self.env.clock.now();
        let reason = match condition.otherwise {
            WhenFalse::Skip => "skipped",
            WhenFalse::AlreadySatisfied => "already_satisfied",
            WhenFalse::Fail => "condition_failed",
        };
        let record = StepRecord {
            step_id: step.id.clone(),
            kind: step.action.kind().to_string(),
            status: StepRecordStatus::Skipped,
            attempt: self.state.cursor.attempts + 1,
            failure_class: None,
            action: None,
            output_text: String::new(),
            output_json: None,
            stderr_text: None,
            error: None,
            details: StepDetails::Skipped { reason: reason.to_string() },
            started_at: format_timestamp(started),
            finished_at: format_timestamp(finished),
            duration_ms: u64::try_from(finished.as_millisecond() - started.as_millisecond()).unwrap_or(0),
        };
        self.recorder.append_history(self.state, &record)?;
        let described = condition.describe(|template| template.source().to_string());
        self.recorder.emit(Event::StepSkipped(StepSkipped {
            step_id: step.id.clone(),
            reason: reason.to_string(),
            condition: described.clone(),
        }))?;
        self.progress.step_finished(index, self.plan.steps.len(), step, &record);
        self.state.cursor = Cursor { next_step: index + 1, attempts: 0 };
        if condition.otherwise == WhenFalse::AlreadySatisfied {
            self.state.evidence.push(Evidence {
                kind: EvidenceKind::AlreadySatisfied,
                step_id: Some(step.id.clone()),
                passed: true,
                detail: EvidenceDetail::AlreadySatisfied(SatisfiedEvidence { condition: described.clone() }),
            });
            self.complete(StopReason::AlreadySatisfied)?;
        }
        if condition.otherwise == WhenFalse::Fail {
            let message = match condition.message.as_ref().map(|message| message.render(&*self.outputs)) {
                Some(Ok(message)) => message,
                Some(Err(error)) => format!(
                    "step `{}`: the condition {described} is false (its `message` could not be resolved: {error})",
                    step.id
                ),
                None => format!("step `{}`: the condition {described} is false", step.id),
            };
            self.recorder.end(self.state, RunStatus::Failed, StopReason::ConditionFailed, Some(message));
        }
        Ok(())
    }

    /// Renders the step's templates. `Ok(Err(_))` is a template failure (an
    /// outcome of the step), `Err(_)` a failure to write the audit record.
    fn resolve(&mut self, step: &Step) -> Result<Result<ResolvedAction, ToolFailure>, StoreError> {
        let has_templates = step.action.templates().iter().any(|template| !template.is_literal());
        let rendered = render_action(step, self.outputs);
        if has_templates {
            self.recorder.emit(Event::ResolutionPerformed(ResolutionPerformed {
                step_id: step.id.clone(),
                templates_found: true,
                success: rendered.is_ok(),
                error: rendered.as_ref().err().map(|error| error.message.clone()),
            }))?;
        }
        Ok(rendered)
    }
}
