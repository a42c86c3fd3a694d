//! The step loop.
//!
//! A run opens with `run_started`, `plan_created`, `state_saved` (or
//! `run_resumed` when it continues), then runs one `Attempt` after another,
//! each followed by one durable checkpoint (`state_saved`), and closes with
//! the plan's `[[verify]]` checks (`completion_verified`) and
//! `run_finished`.
//!
//! The loop composes small parts, each in a file named after it:
//! - `attempt.rs`: one attempt of one step (resolve, gate, execute, expect,
//!   record);
//! - `budgets.rs`: the limits that stop a run;
//! - `idempotency.rs`: receipts of keyed steps, recovery, the crash hook;
//! - `completion.rs`: `expect` post-conditions and `[[verify]]`;
//! - `outputs.rs`: the step outputs templates may read;
//! - `invariants.rs`: whether a loaded run's story is one the plan could
//!   produce ([`check_story`]);
//! - `outcome.rs`: failures the interpreter makes itself;
//! - `gate.rs`: the approval gate (who requires approval, the frozen action);
//! - `render.rs`: a step's action, `env` and `headers` rendered;
//! - `agent/`: agent steps, the turn loop;
//! - `replay/`: a recorded run's steps and agent turns decided again
//!   under today's plan and policy, executing nothing ([`replay_steps`]);
//! - `Recorder` (`runtime/recorder.rs`): every record the run writes.
//!
//! Cost per step is the tool's own cost plus one checkpoint of constant size:
//! nothing here grows with the number of steps already run.

mod agent;
mod attempt;
mod budgets;
mod completion;
mod gate;
mod idempotency;
mod invariants;
mod outcome;
mod outputs;
mod render;
mod replay;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::confine::Workspace;
use crate::model::{Decision, InputValues, Plan, Policy, RunStatus, StopReason};
use crate::runtime::approval::{ApprovalInvalid, check_approval};
use crate::runtime::env::CrashPoint;
use crate::runtime::event::{ApprovalVerified, Event, PlanCreated, RunResumed, RunStarted};
use crate::runtime::recorder::Recorder;
use crate::runtime::{Progress, RunSecrets, RuntimeEnv, format_timestamp};
use crate::store::{ApprovalUse, ClaimsExhausted, LoadedRun, PlanRef, RunHandle, RunState, RunStore, StoreError};
use crate::tools::children::ChildNote;
use crate::tools::{ResolvedAction, Tools};

use attempt::Attempt;
use budgets::Budgets;
use completion::Verifier;
use idempotency::{Idempotency, crash_hook};
use outputs::Outputs;

pub use agent::MAX_ANSWER_BYTES;
pub use invariants::check_story;
pub use replay::{Decided, Difference, FieldChange, StepReplay, replay_steps};

/// Why a run is cancelled before its first step
/// ([`Interpreter::cancel_before_start`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStarted {
    /// Its start was interrupted before its first checkpoint.
    Interrupted,
    /// It was queued and withdrawn before a worker started it.
    Queued,
}

/// What an interpreter runs with: the plan and policy, the workspace, the
/// run's handle and store, and the environment.
struct RunParts<'r> {
    plan: &'r Plan,
    policy: &'r Policy,
    workspace: &'r Workspace,
    run: Box<dyn RunHandle>,
    store: Arc<dyn RunStore>,
    env: &'r RuntimeEnv,
}

/// Runs one plan. Built by [`crate::runtime::execute`] or
/// `ops::resume`.
pub struct Interpreter<'r> {
    plan: &'r Plan,
    policy: &'r Policy,
    env: &'r RuntimeEnv,
    state: RunState,
    recorder: Recorder<'r>,
    outputs: Outputs,
    tools: Tools<'r>,
    budgets: Budgets<'r>,
    idempotency: Idempotency<'r>,
    verifier: Verifier<'r>,
    /// Whether any shell rule of the policy decides `prompt` (computed once).
    prompt_rules: bool,
}

impl<'r> Interpreter<'r> {
    /// A new run.
    pub fn new(
        plan: &'r Plan,
        policy: &'r Policy,
        workspace: &'r Workspace,
        run: Box<dyn RunHandle>,
        store: Arc<dyn RunStore>,
        goal: Option<String>,
        env: &'r RuntimeEnv,
    ) -> Self {
        let now = format_timestamp(env.clock.now());
        let plan_ref = PlanRef {
            id: plan.id.clone(),
            path: plan.source.path.clone(),
            sha256: plan.source.sha256.clone(),
            policy: policy.name.clone(),
            policy_path: policy.source.path.clone(),
            policy_sha256: policy.source.sha256.clone(),
            step_count: plan.steps.len(),
            plan_file: absolute_file(&plan.source.path),
            policy_file: absolute_file(&policy.source.path),
        };
        let state = RunState::started(run.run_id().to_string(), goal, plan_ref, now);
        let outputs = Outputs::new(plan, &state.run_id);
        Self::build(RunParts { plan, policy, workspace, run, store, env }, state, outputs, false)
    }

    /// A run continued from its verified records.
    pub fn resumed(
        plan: &'r Plan,
        policy: &'r Policy,
        workspace: &'r Workspace,
        run: Box<dyn RunHandle>,
        store: Arc<dyn RunStore>,
        loaded: LoadedRun,
        env: &'r RuntimeEnv,
    ) -> Self {
        let outputs = Outputs::restored(plan, &loaded.state.run_id, &loaded.history);
        Self::build(RunParts { plan, policy, workspace, run, store, env }, loaded.state, outputs, true)
    }

    /// A new run given these inputs (checked against the plan by the
    /// caller): recorded in its state, read by `{{ inputs.NAME }}`.
    pub fn with_inputs(mut self, inputs: InputValues) -> Self {
        self.state.inputs = inputs;
        self.outputs.set_run_data(self.state.goal.clone(), self.state.inputs.clone());
        self
    }

    /// The constructor `new` and `resumed` share.
    fn build(parts: RunParts<'r>, state: RunState, mut outputs: Outputs, recovering: bool) -> Self {
        outputs.set_run_data(state.goal.clone(), state.inputs.clone());
        let RunParts { plan, policy, workspace, run, store, env } = parts;
        let clock = env.clock.as_ref();
        let fence = run.fence();
        let children = run.child_note().map(ChildNote::new);
        let shared_sync = run.shared_sync();
        Interpreter {
            plan,
            policy,
            env,
            recorder: Recorder::new(run, clock),
            state,
            outputs,
            tools: Tools::new(workspace, policy)
                .with_fence(fence)
                .with_children(children)
                .with_shared_sync(shared_sync)
                .with_resolver(env.resolver.clone()),
            budgets: Budgets::new(plan, policy, clock),
            idempotency: Idempotency::new(store, env, recovering),
            verifier: Verifier::new(plan, policy, workspace),
            prompt_rules: policy.shell.allow.iter().any(|rule| rule.decision == Decision::Prompt),
        }
    }

    /// The same interpreter, with the run's secret values: step `env`
    /// templates read them, and every tool outcome is redacted with them.
    pub fn with_secrets(mut self, secrets: RunSecrets) -> Self {
        self.tools.set_redactor(secrets.redactor().clone());
        self.outputs.set_secrets(secrets);
        self
    }

    /// Starts a new run and runs it until it ends or pauses for approval.
    pub fn run(mut self, progress: &mut dyn Progress) -> Result<RunState, StoreError> {
        progress.run_started(&self.state.run_id, self.plan, self.policy, &self.recorder.records());
        self.start()?;
        // A queued run claimed again and again before its first checkpoint
        // (each claimer died before it): the claims count as takeovers.
        self.end_if_claims_exhausted()?;
        self.drive(progress)
    }

    /// Records a new run as started and ends it `cancelled` before its
    /// first step: what `cancel` leaves of a start that was interrupted
    /// before its first checkpoint, or of a queued run withdrawn before a
    /// worker started it (the same records as a start followed by
    /// `cancel`); `why` says which.
    pub fn cancel_before_start(mut self, why: NotStarted, reason: Option<String>) -> Result<RunState, StoreError> {
        self.start()?;
        let what = match why {
            NotStarted::Interrupted => {
                "cancelled before its first step (its start was interrupted before its first checkpoint; nothing ran)"
            }
            NotStarted::Queued => "cancelled before its first step (withdrawn from the queue; nothing ran)",
        };
        self.recorder.cancel(&mut self.state, reason, what)?;
        Ok(self.state)
    }

    /// Ends the run `failed` (`recovery_exhausted`, checkpointed) when the
    /// store counts more takeovers of it than `PLANRUN_MAX_CLAIMS` allows:
    /// every process that drove it since its last checkpoint died with it,
    /// and running it again would kill this one too. Returns whether it did.
    fn end_if_claims_exhausted(&mut self) -> Result<bool, StoreError> {
        let Some(ClaimsExhausted { claims, max_claims }) = self.recorder.claims_exhausted() else {
            return Ok(false);
        };
        let message = format!(
            "recovery exhausted: the run was taken over {claims} times from a holder that died without reaching a checkpoint (more than `PLANRUN_MAX_CLAIMS` = {max_claims}); nothing more runs"
        );
        self.state.pending_action = None;
        self.state.approval = None;
        self.recorder.end(&mut self.state, RunStatus::Failed, StopReason::RecoveryExhausted, Some(message));
        self.recorder.checkpoint(&mut self.state)?;
        Ok(true)
    }

    /// `run_started`, the plan, `plan_created` and the run's first
    /// checkpoint.
    fn start(&mut self) -> Result<(), StoreError> {
        self.recorder.emit(Event::RunStarted(RunStarted {
            plan_id: self.plan.id.clone(),
            plan_path: self.plan.source.path.clone(),
            policy: self.policy.name.clone(),
            goal: self.state.goal.clone(),
            inputs: self.state.inputs.clone(),
        }))?;
        let mut plan_json = serde_json::to_value(self.plan).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut plan_json {
            map.insert("version".into(), json!(1));
        }
        self.recorder.write_plan(&plan_json)?;
        self.recorder.emit(Event::PlanCreated(PlanCreated {
            step_count: self.plan.steps.len(),
            plan_sha256: self.plan.source.sha256.clone(),
            policy_sha256: self.policy.source.sha256.clone(),
        }))?;
        self.recorder.checkpoint(&mut self.state)
    }

    /// Continues a resumed run: a `waiting_approval` run executes its frozen
    /// action (after checking the approval), a `running` one (a crash)
    /// continues at its cursor.
    /// `discarded` counts the history records and audit events past the
    /// checkpoint that opening the run dropped (a crash tail).
    /// A `waiting_input` run continues with `answer`, a person's answer to
    /// its agent step's question (the caller checks that one is given).
    pub fn resume(
        mut self,
        discarded: (usize, u64),
        answer: Option<&str>,
        progress: &mut dyn Progress,
    ) -> Result<RunState, ResumeError> {
        let (discarded_history, discarded_events) = discarded;
        progress.run_started(&self.state.run_id, self.plan, self.policy, &self.recorder.records());
        let now = self.env.clock.now();
        let pending = match self.state.status {
            RunStatus::WaitingApproval => {
                let (pending, _) = check_approval(&self.state, now).map_err(ResumeError::Approval)?;
                Some(pending.clone())
            }
            _ => None,
        };
        self.recorder.emit(Event::RunResumed(RunResumed {
            step_id: self.state.current_step_id.clone(),
            from_status: self.state.status,
            from_state_version: self.state.state_version,
            events_after_checkpoint: discarded_events,
            discarded_history_records: discarded_history,
        }))?;
        self.recorder.child_stopped(self.tools.stop_left_over_child(), &self.state)?;
        if self.end_if_claims_exhausted()? {
            return Ok(self.drive(progress)?);
        }
        if self.state.status == RunStatus::WaitingInput {
            agent::record_answer(&mut self.state, &mut self.recorder, answer.unwrap_or_default())?;
            self.recorder.checkpoint(&mut self.state)?;
            return Ok(self.drive(progress)?);
        }
        if let Some(pending) = pending {
            self.recorder.emit(Event::ApprovalVerified(ApprovalVerified {
                step_id: pending.step_id.clone(),
                fingerprint: pending.fingerprint.clone(),
                scope: pending.scope.clone(),
                state_version: pending.state_version,
            }))?;
            // Used once, before the action runs: a shared store refuses an
            // approval it holds as expired or used, and nothing runs.
            let used = ApprovalUse {
                step_id: pending.step_id.clone(),
                fingerprint: pending.fingerprint.clone(),
                state_version: pending.state_version,
                scope: pending.scope.clone(),
            };
            self.recorder.consume_approval(&used).map_err(|error| match error {
                StoreError::ApprovalRefused { reason, .. } => ResumeError::Approval(ApprovalInvalid(reason)),
                error => ResumeError::Store(error),
            })?;
            self.state.status = RunStatus::Running;
            let index = self.state.cursor.next_step;
            let step = self.plan.steps.get(index).filter(|step| step.id == pending.step_id).ok_or_else(|| {
                ResumeError::Approval(ApprovalInvalid(format!(
                    "the pending step `{}` is not step {} of the plan",
                    pending.step_id,
                    index + 1
                )))
            })?;
            let action: ResolvedAction = serde_json::from_value(pending.action.clone()).map_err(|error| {
                ResumeError::Approval(ApprovalInvalid(format!("the frozen action cannot be read: {error}")))
            })?;
            self.state.pending_action = None;
            self.state.approval = None;
            // The attempt checks the budgets first: the deadline counts the
            // pause, and the tool calls the approved action needs must fit.
            self.attempt(progress).run(index, step, Some(action))?;
            self.idempotency.recovered();
            self.recorder.checkpoint(&mut self.state)?;
            crash_hook(self.env, step, CrashPoint::AfterCheckpoint);
        } else {
            self.state.status = RunStatus::Running;
        }
        Ok(self.drive(progress)?)
    }

    fn drive(mut self, progress: &mut dyn Progress) -> Result<RunState, StoreError> {
        let plan = self.plan;
        while self.state.status == RunStatus::Running {
            let index = self.state.cursor.next_step;
            let step = plan.steps.get(index);
            match step {
                Some(step) => self.attempt(progress).run(index, step, None)?,
                None => self.verifier.complete(
                    StopReason::EndOfPlan,
                    &mut self.state,
                    &mut self.recorder,
                    self.idempotency.receipts(),
                    &self.budgets,
                )?,
            }
            // Only the first attempt after a resume may find its effect
            // already done; later ones start fresh.
            self.idempotency.recovered();
            if step.is_some_and(|step| !step.action.may_change_the_world()) {
                self.recorder.checkpoint_reads(&mut self.state)?;
            } else {
                self.recorder.checkpoint(&mut self.state)?;
            }
            if let Some(step) = step {
                crash_hook(self.env, step, CrashPoint::AfterCheckpoint);
                self.wait_before_retry(index, step);
            }
        }
        // No child of this run runs any more (it paused or ended).
        self.tools.forget_children();
        if matches!(self.state.status, RunStatus::WaitingApproval | RunStatus::WaitingInput) {
            progress.run_paused(&self.state, &self.recorder.records());
            return Ok(self.state);
        }
        self.recorder.run_finished(&self.state)?;
        progress.run_finished(&self.state, &self.recorder.records());
        Ok(self.state)
    }

    /// After a failed attempt of step `index` that scheduled another (the
    /// cursor still on it, its failed attempts counted), waits the step's
    /// backoff, once the failure is checkpointed. A run resumed after a
    /// crash does not wait again: its next attempt starts at once.
    fn wait_before_retry(&self, index: usize, step: &crate::model::Step) {
        let failed = self.state.cursor.attempts;
        if self.state.status == RunStatus::Running && self.state.cursor.next_step == index && failed > 0 {
            let wait = self.policy.retry.wait_after(step.retry_backoff.as_ref(), &self.state.run_id, &step.id, failed);
            self.env.clock.sleep(wait);
        }
    }

    /// The parts one attempt works with.
    fn attempt<'a>(&'a mut self, progress: &'a mut dyn Progress) -> Attempt<'a, 'r> {
        Attempt {
            plan: self.plan,
            policy: self.policy,
            env: self.env,
            state: &mut self.state,
            recorder: &mut self.recorder,
            outputs: &mut self.outputs,
            tools: &mut self.tools,
            budgets: &self.budgets,
            idempotency: &self.idempotency,
            verifier: &self.verifier,
            prompt_rules: self.prompt_rules,
            progress,
        }
    }
}

/// Why a resume did not go ahead or could not keep its records.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    Approval(ApprovalInvalid),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// `path` as an absolute path (against the current folder), as text; `None`
/// where it cannot be made absolute or is not UTF-8.
fn absolute_file(path: &str) -> Option<String> {
    let absolute = std::path::absolute(path).ok()?;
    absolute.to_str().map(str::to_owned)
}
