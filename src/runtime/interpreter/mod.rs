//! The step loop.
//!
//! Per step attempt: `step_started` (or `retry_attempt_started`) → the
//! `when` condition (a false one skips the step, or ends the run
//! `already_satisfied`) → `resolution_performed` (when the payload has
//! templates) → an approval gate (the resolved action is frozen and the run
//! pauses `waiting_approval`) → policy + tool, through the idempotency
//! receipts for keyed steps → `expect` post-conditions → `step_finished` (or
//! `retry_attempt_finished`) → on failure `step_failed` and, when another
//! attempt is allowed, `retry_scheduled` → one durable checkpoint →
//! `state_saved`. A run opens with `run_started`, `plan_created`,
//! `state_saved` (or `run_resumed` when it continues) and closes with the
//! plan's `[[verify]]` checks (`completion_verified`) and `run_finished`.
//!
//! Cost per step is the tool's own cost plus one checkpoint of constant size:
//! nothing here grows with the number of steps already run. Outputs are kept
//! in memory only for the last completed step and for the steps that some
//! template names (computed once from the plan).
//!
//! `keyed.rs` holds the idempotency-receipt path of keyed steps and the
//! crash hook; `completion.rs` the `expect` post-conditions and the
//! `[[verify]]` checks.

mod completion;
mod keyed;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::confine::Workspace;
use crate::model::{Action, Budget, Condition, Decision, FailureClass, Plan, Policy, RunStatus, Step, WhenFalse};
use crate::runtime::approval::{check_approval, fingerprint};
use crate::runtime::env::CrashPoint;
use crate::runtime::records;
use crate::runtime::{EventType, Progress, RuntimeEnv, format_timestamp};
use crate::store::{
    Counters, Cursor, Evidence, LoadedRun, PendingAction, PlanRef, ReceiptStore, RunDir, RunState, StepRecord,
    StepRecordStatus, StoreError,
};
use crate::template::{RefTarget, RenderContext, StepOutput};
use crate::tools::{ResolvedAction, ToolFailure, ToolOutcome, ToolSuccess, Tools};

use completion::apply_expect;

/// Outputs later templates may read.
struct Outputs {
    run_id: String,
    last: Option<StepOutput>,
    named: HashMap<String, StepOutput>,
}

impl RenderContext for Outputs {
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn last(&self) -> Option<&StepOutput> {
        self.last.as_ref()
    }
    fn step(&self, id: &str) -> Option<&StepOutput> {
        self.named.get(id)
    }
}

pub(super) fn failure(class: FailureClass, message: String) -> ToolFailure {
    ToolFailure { class, message, output_text: String::new() }
}

/// Runs one plan. Built by [`crate::runtime::execute`] or
/// [`crate::runtime::resume`].
pub struct Interpreter<'r> {
    plan: &'r Plan,
    policy: &'r Policy,
    /// The policy's budget lowered by the plan's `[budget]`.
    budget: Budget,
    tools: Tools<'r>,
    workspace: &'r Workspace,
    receipts: ReceiptStore,
    run_dir: RunDir,
    env: &'r RuntimeEnv,
    state: RunState,
    outputs: Outputs,
    /// Step ids that some `steps.<id>` reference names.
    referenced: HashSet<String>,
    /// True until the first step attempt after a resume: keyed steps then
    /// consult their receipts before anything runs.
    recovering: bool,
    /// Whether any shell rule of the policy decides `prompt` (computed once).
    prompt_rules: bool,
}

impl<'r> Interpreter<'r> {
    /// A new run.
    pub fn new(
        plan: &'r Plan,
        policy: &'r Policy,
        workspace: &'r Workspace,
        run_dir: RunDir,
        run_id: String,
        goal: Option<String>,
        env: &'r RuntimeEnv,
    ) -> Self {
        let now = format_timestamp(env.clock.now());
        let state = RunState {
            run_id: run_id.clone(),
            goal,
            plan: PlanRef {
                id: plan.id.clone(),
                path: plan.source.path.clone(),
                sha256: plan.source.sha256.clone(),
                policy: policy.name.clone(),
                policy_path: policy.source.path.clone(),
                policy_sha256: policy.source.sha256.clone(),
                step_count: plan.steps.len(),
            },
            status: RunStatus::Running,
            stop_reason: None,
            current_step_id: None,
            cursor: Cursor::default(),
            counters: Counters::default(),
            error: None,
            pending_action: None,
            approval: None,
            evidence: Vec::new(),
            reconciliation: None,
            state_version: 0,
            audit_seq: 0,
            audit_hash: None,
            started_at: now.clone(),
            updated_at: now,
            finished_at: None,
        };
        let outputs = Outputs { run_id, last: None, named: HashMap::new() };
        Self::build(plan, policy, workspace, run_dir, state, outputs, env, false)
    }

    /// A run continued from its verified records.
    pub fn resumed(
        plan: &'r Plan,
        policy: &'r Policy,
        workspace: &'r Workspace,
        run_dir: RunDir,
        loaded: LoadedRun,
        env: &'r RuntimeEnv,
    ) -> Self {
        let mut outputs = Outputs { run_id: loaded.state.run_id.clone(), last: None, named: HashMap::new() };
        let referenced = referenced_steps(plan);
        for record in loaded.history.iter().filter(|record| record.status == StepRecordStatus::Done) {
            let output =
                StepOutput { output_text: record.output_text.clone(), output_json: record.output_json.clone() };
            if referenced.contains(&record.step_id) {
                outputs.named.insert(record.step_id.clone(), output.clone());
            }
            outputs.last = Some(output);
        }
        Self::build(plan, policy, workspace, run_dir, loaded.state, outputs, env, true)
    }

    #[expect(clippy::too_many_arguments, reason = "private constructor shared by `new` and `resumed`")]
    fn build(
        plan: &'r Plan,
        policy: &'r Policy,
        workspace: &'r Workspace,
        run_dir: RunDir,
        state: RunState,
        outputs: Outputs,
        env: &'r RuntimeEnv,
        recovering: bool,
    ) -> Self {
        Interpreter {
            plan,
            policy,
            budget: policy.budget.lowered_by(&plan.budget),
            tools: Tools::new(workspace, policy),
            workspace,
            receipts: ReceiptStore::new(workspace.root()),
            run_dir,
            env,
            state,
            outputs,
            referenced: referenced_steps(plan),
            recovering,
            prompt_rules: policy.shell.allow.iter().any(|rule| rule.decision == Decision::Prompt),
        }
    }

    /// Starts a new run and runs it until it ends or pauses for approval.
    pub fn run(mut self, progress: &mut dyn Progress) -> Result<RunState, StoreError> {
        progress.run_started(&self.state.run_id, self.plan, self.policy, &self.run_dir.path);
        let mut details = Map::new();
        details.insert("plan_id".into(), json!(self.plan.id));
        details.insert("plan_path".into(), json!(self.plan.source.path));
        details.insert("policy".into(), json!(self.policy.name));
        details.insert("goal".into(), json!(self.state.goal));
        self.emit(EventType::RunStarted, None, Some("running"), details)?;
        let mut plan_json = serde_json::to_value(self.plan).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut plan_json {
            map.insert("version".into(), json!(1));
        }
        self.run_dir.write_plan(&plan_json)?;
        let mut details = Map::new();
        details.insert("step_count".into(), json!(self.plan.steps.len()));
        details.insert("plan_sha256".into(), json!(self.plan.source.sha256));
        details.insert("policy_sha256".into(), json!(self.policy.source.sha256));
        self.emit(EventType::PlanCreated, None, Some("ok"), details)?;
        self.checkpoint()?;
        self.drive(progress)
    }

    /// Continues a resumed run: a `waiting_approval` run executes its frozen
    /// action (after checking the approval), a `running` one (a crash)
    /// continues at its cursor.
    pub fn resume(mut self, discarded_history: usize, progress: &mut dyn Progress) -> Result<RunState, ResumeError> {
        progress.run_started(&self.state.run_id, self.plan, self.policy, &self.run_dir.path);
        let now = self.env.clock.now();
        let pending = match self.state.status {
            RunStatus::WaitingApproval => {
                let (pending, _) = check_approval(&self.state, now).map_err(ResumeError::Approval)?;
                Some(pending.clone())
            }
            _ => None,
        };
        let mut details = Map::new();
        details.insert("from_status".into(), json!(self.state.status));
        details.insert("from_state_version".into(), json!(self.state.state_version));
        details.insert("events_after_checkpoint".into(), json!(self.run_dir.audit.seq() - self.state.audit_seq));
        details.insert("discarded_history_records".into(), json!(discarded_history));
        self.emit(EventType::RunResumed, self.state.current_step_id.clone().as_deref(), Some("running"), details)?;
        if let Some(pending) = pending {
            let mut details = Map::new();
            details.insert("fingerprint".into(), json!(pending.fingerprint));
            details.insert("scope".into(), json!(pending.scope));
            details.insert("state_version".into(), json!(pending.state_version));
            self.emit(EventType::ApprovalVerified, Some(&pending.step_id), Some("ok"), details)?;
            self.state.status = RunStatus::Running;
            let index = self.state.cursor.next_step;
            let step = self.plan.steps.get(index).filter(|step| step.id == pending.step_id).ok_or_else(|| {
                ResumeError::Approval(crate::runtime::approval::ApprovalInvalid(format!(
                    "the pending step `{}` is not step {} of the plan",
                    pending.step_id,
                    index + 1
                )))
            })?;
            let action: ResolvedAction = serde_json::from_value(pending.action.clone()).map_err(|error| {
                ResumeError::Approval(crate::runtime::approval::ApprovalInvalid(format!(
                    "the frozen action cannot be read: {error}"
                )))
            })?;
            self.state.pending_action = None;
            self.state.approval = None;
            // The deadline counts the pause: an approval given after it
            // cannot run the action.
            if self.deadline_allows()? {
                self.run_attempt(index, step, progress, Some(action))?;
            }
            self.recovering = false;
            self.checkpoint()?;
        } else {
            self.state.status = RunStatus::Running;
        }
        Ok(self.drive(progress)?)
    }

    fn drive(mut self, progress: &mut dyn Progress) -> Result<RunState, StoreError> {
        while self.state.status == RunStatus::Running {
            let index = self.state.cursor.next_step;
            match self.plan.steps.get(index) {
                Some(step) => self.run_attempt(index, step, progress, None)?,
                None => self.complete("end_of_plan")?,
            }
            // Only the first attempt after a resume may find its effect
            // already done; later ones start fresh.
            self.recovering = false;
            self.checkpoint()?;
        }
        if self.state.status == RunStatus::WaitingApproval {
            progress.run_paused(&self.state, &self.run_dir.path);
            return Ok(self.state);
        }
        self.emit_run_finished()?;
        progress.run_finished(&self.state, &self.run_dir.path);
        Ok(self.state)
    }

    fn emit_run_finished(&mut self) -> Result<(), StoreError> {
        records::run_finished(&mut self.run_dir, self.env.clock.as_ref(), &self.state)
    }

    /// Checks the whole-run deadline (wall clock since the run started,
    /// pauses included).
    fn deadline_allows(&mut self) -> Result<bool, StoreError> {
        if let Some(limit) = self.budget.max_run_secs {
            let started: Option<Timestamp> = self.state.started_at.parse().ok();
            let elapsed = started
                .map_or(0, |started| (self.env.clock.now().as_millisecond() - started.as_millisecond()).max(0) / 1000);
            if elapsed.unsigned_abs() >= limit {
                self.exhaust("max_run_secs", limit, elapsed.unsigned_abs())?;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Checks the budgets that stop a run before an attempt starts.
    fn budget_allows(&mut self, step: &Step, attempt: u32, is_tool: bool) -> Result<bool, StoreError> {
        if !self.deadline_allows()? {
            return Ok(false);
        }
        if attempt == 1 && self.state.counters.steps >= self.budget.max_steps {
            self.exhaust("max_steps", self.budget.max_steps, self.state.counters.steps)?;
            return Ok(false);
        }
        let lookup = self.recovering && step.idempotency_key.is_some();
        let needed = u64::from(is_tool) + u64::from(lookup);
        if needed > 0 && self.state.counters.tool_calls + needed > self.budget.max_tool_calls {
            self.exhaust("max_tool_calls", self.budget.max_tool_calls, self.state.counters.tool_calls)?;
            return Ok(false);
        }
        Ok(true)
    }

    /// One attempt of `step`. `approved` is the frozen action a person
    /// approved (only when resuming a paused run).
    fn run_attempt(
        &mut self,
        index: usize,
        step: &'r Step,
        progress: &mut dyn Progress,
        approved: Option<ResolvedAction>,
    ) -> Result<(), StoreError> {
        let attempt = self.state.cursor.attempts + 1;
        let is_tool = !matches!(step.action, Action::Finish { .. });
        let resuming_pending = approved.is_some();
        if !resuming_pending {
            if !self.budget_allows(step, attempt, is_tool)? {
                return Ok(());
            }
            if attempt == 1 {
                self.state.counters.steps += 1;
            }
            self.state.current_step_id = Some(step.id.clone());
            let started_event = if attempt == 1 { EventType::StepStarted } else { EventType::RetryAttemptStarted };
            let mut details = Map::new();
            details.insert("kind".into(), json!(step.action.kind()));
            details.insert("attempt".into(), json!(attempt));
            self.emit(started_event, Some(&step.id), Some("running"), details)?;
        }
        let started = self.env.clock.now();

        let action = match approved {
            Some(action) => Ok(action),
            None => {
                if let Some(condition) = &step.when {
                    match self.evaluate_condition(step, condition)? {
                        Ok(true) => {}
                        Ok(false) => return self.skip(index, step, condition, started, progress),
                        Err(failure) => {
                            return self.finish_attempt(
                                index,
                                step,
                                attempt,
                                started,
                                None,
                                ToolOutcome::err(failure),
                                progress,
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
                return self.finish_attempt(index, step, attempt, started, None, ToolOutcome::err(failure), progress);
            }
        };

        if !resuming_pending {
            // The tool evaluates the policy again when it runs; asking it
            // first is only worth it when some rule can say `prompt`.
            let prompt = self.prompt_rules && self.tools.decide(&action) == Decision::Prompt;
            if step.approval || prompt {
                let required_by = if step.approval { "step".to_string() } else { "policy".to_string() };
                return self.freeze(step, &action, required_by);
            }
        }

        // A keyed step counts its own tool calls: a receipt look-up during
        // recovery, and the effect only when it really runs.
        if is_tool && step.idempotency_key.is_none() {
            self.state.counters.tool_calls += 1;
        }
        let outcome = match &step.idempotency_key {
            Some(key) => self.keyed_execute(step, key, &action, attempt, resuming_pending)?,
            None => {
                let outcome = self.tools.execute(&action, attempt, self.timeout(step), resuming_pending);
                self.crash_hook(step, CrashPoint::AfterEffect);
                outcome
            }
        };
        let outcome = apply_expect(step, outcome);
        self.finish_attempt(index, step, attempt, started, Some(&action), outcome, progress)
    }

    /// Records an attempt's outcome and decides what comes next.
    #[expect(clippy::too_many_arguments, reason = "the attempt's facts, gathered by `run_attempt`")]
    fn finish_attempt(
        &mut self,
        index: usize,
        step: &Step,
        attempt: u32,
        started: Timestamp,
        action: Option<&ResolvedAction>,
        outcome: ToolOutcome,
        progress: &mut dyn Progress,
    ) -> Result<(), StoreError> {
        let finished = self.env.clock.now();
        let duration_ms = u64::try_from(finished.as_millisecond() - started.as_millisecond()).unwrap_or(0);
        let (status, success, failure) = match outcome.result {
            Ok(success) => (StepRecordStatus::Done, Some(success), None),
            Err(failure) => (StepRecordStatus::Failed, None, Some(failure)),
        };
        let record = StepRecord {
            step_id: step.id.clone(),
            kind: step.action.kind().to_string(),
            status,
            attempt,
            failure_class: failure.as_ref().map(|failure| failure.class),
            action: action.map(|action| serde_json::to_value(action).unwrap_or(Value::Null)),
            output_text: success.as_ref().map(|success| success.output_text.clone()).unwrap_or_default(),
            output_json: success.as_ref().and_then(|success| success.output_json.clone()),
            error: failure.as_ref().map(|failure| failure.message.clone()),
            details: outcome.details.clone(),
            started_at: format_timestamp(started),
            finished_at: format_timestamp(finished),
            duration_ms,
        };
        self.append_history(&record)?;

        let mut details = Map::new();
        details.insert("kind".into(), json!(step.action.kind()));
        details.insert("attempt".into(), json!(attempt));
        details.insert("duration_ms".into(), json!(duration_ms));
        if let Some(failure) = &failure {
            details.insert("failure_class".into(), json!(failure.class));
            details.insert("error".into(), json!(failure.message));
        }
        details.extend(outcome.details);
        let status_text = if failure.is_some() { "failed" } else { "done" };
        let finished_event = if attempt == 1 { EventType::StepFinished } else { EventType::RetryAttemptFinished };
        self.emit(finished_event, Some(&step.id), Some(status_text), details)?;
        progress.step_finished(index, self.plan.steps.len(), step, &record);

        match (success, failure) {
            (Some(success), _) => self.succeeded(index, step, success)?,
            (None, Some(failure)) => self.failed(step, attempt, failure)?,
            (None, None) => {}
        }
        Ok(())
    }

    fn append_history(&mut self, record: &StepRecord) -> Result<(), StoreError> {
        self.run_dir.history.append(record).map_err(|source| StoreError::Io {
            action: "append to",
            path: self.run_dir.path.join("history.jsonl"),
            source,
        })?;
        self.state.counters.history_records += 1;
        Ok(())
    }

    fn succeeded(&mut self, index: usize, step: &Step, success: ToolSuccess) -> Result<(), StoreError> {
        self.state.counters.consecutive_failures = 0;
        self.state.cursor = Cursor { next_step: index + 1, attempts: 0 };
        let output = StepOutput { output_text: success.output_text, output_json: success.output_json };
        if self.referenced.contains(&step.id) {
            self.outputs.named.insert(step.id.clone(), output.clone());
        }
        self.outputs.last = Some(output);
        if matches!(step.action, Action::Finish { .. }) {
            self.complete("finish_step")?;
        }
        Ok(())
    }

    fn failed(&mut self, step: &Step, attempt: u32, failure: ToolFailure) -> Result<(), StoreError> {
        self.state.counters.consecutive_failures += 1;
        self.state.cursor.attempts = attempt;
        let max_attempts = self.policy.retry.attempts_for(failure.class, step.retry);
        let retry_allowed = attempt < max_attempts;
        let budget_hit = self.state.counters.consecutive_failures >= self.budget.max_consecutive_failures;
        let retry_scheduled = retry_allowed && !budget_hit;
        let mut details = Map::new();
        details.insert("failure_class".into(), json!(failure.class));
        details.insert("attempt".into(), json!(attempt));
        details.insert("max_attempts".into(), json!(max_attempts));
        details.insert("retry_scheduled".into(), json!(retry_scheduled));
        details.insert("error".into(), json!(failure.message));
        self.emit(EventType::StepFailed, Some(&step.id), Some("failed"), details)?;
        if retry_scheduled {
            let mut details = Map::new();
            details.insert("failure_class".into(), json!(failure.class));
            details.insert("next_attempt".into(), json!(attempt + 1));
            details.insert("max_attempts".into(), json!(max_attempts));
            self.emit(EventType::RetryScheduled, Some(&step.id), Some("scheduled"), details)?;
        } else if retry_allowed {
            let used = self.state.counters.consecutive_failures;
            self.exhaust("max_consecutive_failures", self.budget.max_consecutive_failures, used)?;
        } else {
            let reason = match failure.class {
                FailureClass::ToolResultUncertain => "tool_result_uncertain",
                FailureClass::IdempotencyConflict => "idempotency_conflict",
                _ => "step_failed",
            };
            let message = format!("step `{}` failed ({}): {}", step.id, failure.class, failure.message);
            self.end(RunStatus::Failed, reason, Some(message));
        }
        Ok(())
    }

    /// Evaluates a `when` condition. `Ok(Err(_))` is a template failure.
    fn evaluate_condition(
        &mut self,
        step: &Step,
        condition: &Condition,
    ) -> Result<Result<bool, ToolFailure>, StoreError> {
        let value = match condition.value.render(&self.outputs) {
            Ok(value) => value,
            Err(error) => {
                return Ok(Err(failure(FailureClass::TemplateError, format!("`when` could not be resolved: {error}"))));
            }
        };
        let holds = condition.test.holds(&value);
        let mut details = Map::new();
        details.insert("value".into(), json!(value));
        details.insert("test".into(), json!(condition.test.describe()));
        details.insert("holds".into(), json!(holds));
        self.emit(EventType::ConditionEvaluated, Some(&step.id), Some(if holds { "true" } else { "false" }), details)?;
        Ok(Ok(holds))
    }

    /// A false `when`: the step is skipped; with `otherwise =
    /// "already_satisfied"` the goal already holds and the run completes.
    fn skip(
        &mut self,
        index: usize,
        step: &Step,
        condition: &Condition,
        started: Timestamp,
        progress: &mut dyn Progress,
    ) -> Result<(), StoreError> {
        let finished = self.env.clock.now();
        let reason = match condition.otherwise {
            WhenFalse::Skip => "skipped",
            WhenFalse::AlreadySatisfied => "already_satisfied",
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
            error: None,
            details: Map::from_iter([("reason".to_string(), json!(reason))]),
            started_at: format_timestamp(started),
            finished_at: format_timestamp(finished),
            duration_ms: u64::try_from(finished.as_millisecond() - started.as_millisecond()).unwrap_or(0),
        };
        self.append_history(&record)?;
        let mut details = Map::new();
        details.insert("reason".into(), json!(reason));
        details
            .insert("condition".into(), json!(format!("{} {}", condition.value.source(), condition.test.describe())));
        self.emit(EventType::StepSkipped, Some(&step.id), Some("skipped"), details)?;
        progress.step_finished(index, self.plan.steps.len(), step, &record);
        self.state.cursor = Cursor { next_step: index + 1, attempts: 0 };
        if condition.otherwise == WhenFalse::AlreadySatisfied {
            self.state.evidence.push(Evidence {
                kind: "already_satisfied".to_string(),
                step_id: Some(step.id.clone()),
                passed: true,
                detail: json!({"condition": format!("{} {}", condition.value.source(), condition.test.describe())}),
            });
            self.complete("already_satisfied")?;
        }
        Ok(())
    }

    /// Renders the step's templates. `Ok(Err(_))` is a template failure (an
    /// outcome of the step), `Err(_)` a failure to write the audit record.
    fn resolve(&mut self, step: &Step) -> Result<Result<ResolvedAction, ToolFailure>, StoreError> {
        let has_templates = step.action.templates().iter().any(|template| !template.is_literal());
        let rendered = render_action(&step.action, &self.outputs);
        if has_templates {
            let mut details = Map::new();
            details.insert("templates_found".into(), json!(true));
            details.insert("success".into(), json!(rendered.is_ok()));
            if let Err(error) = &rendered {
                details.insert("error".into(), json!(error.message));
            }
            let status = if rendered.is_ok() { "ok" } else { "failed" };
            self.emit(EventType::ResolutionPerformed, Some(&step.id), Some(status), details)?;
        }
        Ok(rendered)
    }

    /// Freezes the resolved action for approval and pauses the run.
    fn freeze(&mut self, step: &Step, action: &ResolvedAction, required_by: String) -> Result<(), StoreError> {
        let action_json = serde_json::to_value(action).unwrap_or(Value::Null);
        let key = self.render_key(step);
        let risk = step.risk().as_str().to_string();
        let scope = action.scope();
        let print = fingerprint(step.action.kind(), &action_json, &risk, key.as_deref(), &scope);
        let pending = PendingAction {
            step_id: step.id.clone(),
            kind: step.action.kind().to_string(),
            action: action_json.clone(),
            risk: risk.clone(),
            idempotency_key: key,
            scope: scope.clone(),
            fingerprint: print.clone(),
            state_version: self.state.state_version + 1,
            required_by: required_by.clone(),
            requested_at: format_timestamp(self.env.clock.now()),
        };
        let mut details = Map::new();
        details.insert("fingerprint".into(), json!(print));
        details.insert("scope".into(), json!(scope));
        details.insert("risk".into(), json!(risk));
        details.insert("required_by".into(), json!(required_by));
        details.insert("state_version".into(), json!(pending.state_version));
        details.insert("action".into(), action_json);
        self.emit(EventType::ApprovalRequested, Some(&step.id), Some("waiting_approval"), details)?;
        self.state.pending_action = Some(pending);
        self.state.status = RunStatus::WaitingApproval;
        Ok(())
    }

    fn render_key(&self, step: &Step) -> Option<String> {
        // Keys are literal or built from `run.id` only (the loader checks),
        // so rendering cannot fail; a failure yields no key, and the step
        // then fails closed in `keyed_execute`.
        step.idempotency_key.as_ref().and_then(|key| key.render(&self.outputs).ok())
    }

    fn timeout(&self, step: &Step) -> Duration {
        let cap = self.budget.step_timeout_secs;
        Duration::from_secs(step.timeout_secs.unwrap_or(cap).min(cap))
    }

    fn exhaust(&mut self, budget: &str, limit: u64, used: u64) -> Result<(), StoreError> {
        let mut details = Map::new();
        details.insert("budget".into(), json!(budget));
        details.insert("limit".into(), json!(limit));
        details.insert("used".into(), json!(used));
        let step_id = self.plan.steps.get(self.state.cursor.next_step).map(|step| step.id.clone());
        self.emit(EventType::BudgetExhausted, step_id.as_deref(), Some("failed"), details)?;
        self.end(RunStatus::Failed, "budget_exhausted", Some(format!("budget `{budget}` ({limit}) exhausted")));
        Ok(())
    }

    fn end(&mut self, status: RunStatus, reason: &str, error: Option<String>) {
        self.state.status = status;
        self.state.stop_reason = Some(reason.to_string());
        self.state.current_step_id = None;
        self.state.error = error;
        self.state.finished_at = Some(format_timestamp(self.env.clock.now()));
    }

    fn checkpoint(&mut self) -> Result<(), StoreError> {
        records::checkpoint(&mut self.run_dir, self.env.clock.as_ref(), &mut self.state)
    }

    fn emit(
        &mut self,
        event: EventType,
        step_id: Option<&str>,
        status: Option<&str>,
        details: Map<String, Value>,
    ) -> Result<(), StoreError> {
        let run_id = &self.state.run_id;
        records::emit(&mut self.run_dir, self.env.clock.as_ref(), run_id, event, step_id, status, details)
    }
}

/// Why a resume did not go ahead or could not keep its records.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(transparent)]
    Approval(crate::runtime::approval::ApprovalInvalid),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ToolOutcome {
    fn err(failure: ToolFailure) -> Self {
        ToolOutcome { result: Err(failure), details: Map::new() }
    }

    fn err_with(failure: ToolFailure, details: Map<String, Value>) -> Self {
        ToolOutcome { result: Err(failure), details }
    }
}

fn referenced_steps(plan: &Plan) -> HashSet<String> {
    plan.steps
        .iter()
        .flat_map(|step| step.templates())
        .flat_map(|template| template.references())
        .filter_map(|reference| match &reference.target {
            RefTarget::Step { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}

/// Renders every template of an action. Only data fields can hold step
/// output: the loader guarantees that the program and paths are literal
/// (or built from `run.id`).
fn render_action(action: &Action, outputs: &Outputs) -> Result<ResolvedAction, ToolFailure> {
    let fail = |error: crate::template::TemplateError| {
        failure(FailureClass::TemplateError, format!("template resolution failed: {error}"))
    };
    Ok(match action {
        Action::Shell { command } => ResolvedAction::Shell {
            argv: command.iter().map(|token| token.render(outputs)).collect::<Result<_, _>>().map_err(fail)?,
        },
        Action::WriteFile { path, content } => ResolvedAction::WriteFile {
            path: path.render(outputs).map_err(fail)?,
            content: content.render(outputs).map_err(fail)?,
        },
        Action::ReadFile { path } => ResolvedAction::ReadFile { path: path.render(outputs).map_err(fail)? },
        Action::Finish { message } => ResolvedAction::Finish {
            message: message.as_ref().map(|message| message.render(outputs)).transpose().map_err(fail)?,
        },
        Action::Flaky { failures, output } => {
            ResolvedAction::Flaky { failures: *failures, output: output.render(outputs).map_err(fail)? }
        }
        Action::TicketLookup { ticket_id } => ResolvedAction::TicketLookup { ticket_id: ticket_id.clone() },
        Action::TicketClose { ticket_id } => ResolvedAction::TicketClose { ticket_id: ticket_id.clone() },
    })
}
