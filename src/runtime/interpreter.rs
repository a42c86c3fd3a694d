//! The step loop.
//!
//! Per step attempt: `step_started` (or `retry_attempt_started`) →
//! `resolution_performed` (when the payload has templates) → policy + tool →
//! `step_finished` (or `retry_attempt_finished`) → on failure `step_failed`
//! and, when another attempt is allowed, `retry_scheduled` → one durable
//! checkpoint → `state_saved`. The run opens with `run_started`,
//! `plan_created`, `state_saved` and closes with `run_finished`.
//!
//! Cost per step is the tool's own cost plus one checkpoint of constant size:
//! nothing here grows with the number of steps already run. Outputs are kept
//! in memory only for the last completed step and for the steps that some
//! template names (computed once from the plan).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::model::{Action, FailureClass, Plan, Policy, RunStatus, Step};
use crate::runtime::{EventType, Progress, RuntimeEnv, format_timestamp};
use crate::store::{Counters, Cursor, PlanRef, RunDir, RunState, StepRecord, StepRecordStatus, StoreError};
use crate::template::{RefTarget, RenderContext, StepOutput};
use crate::tools::{ResolvedAction, ToolFailure, ToolOutcome, ToolSuccess, Tools, Workspace};

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

/// Runs one plan. Built by [`crate::runtime::execute`].
pub struct Interpreter<'r> {
    plan: &'r Plan,
    policy: &'r Policy,
    tools: Tools<'r>,
    run_dir: RunDir,
    env: &'r RuntimeEnv,
    state: RunState,
    outputs: Outputs,
    /// Step ids that some `steps.<id>` reference names.
    referenced: HashSet<String>,
}

impl<'r> Interpreter<'r> {
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
            state_version: 0,
            audit_seq: 0,
            started_at: now.clone(),
            updated_at: now,
            finished_at: None,
        };
        let referenced = plan
            .steps
            .iter()
            .flat_map(|step| step.action.templates())
            .flat_map(|template| template.references())
            .filter_map(|reference| match &reference.target {
                RefTarget::Step { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        Interpreter {
            plan,
            policy,
            tools: Tools::new(workspace, policy),
            run_dir,
            env,
            state,
            outputs: Outputs { run_id, last: None, named: HashMap::new() },
            referenced,
        }
    }

    /// Runs the plan to its end and returns the final state. A failed step
    /// is an outcome recorded in the state; only a failure to keep the
    /// records is an `Err`.
    pub fn run(mut self, progress: &mut dyn Progress) -> Result<RunState, StoreError> {
        progress.run_started(&self.state.run_id, self.plan, self.policy, &self.run_dir.path);
        let mut details = Map::new();
        details.insert("plan_id".into(), json!(self.plan.id));
        details.insert("plan_path".into(), json!(self.plan.source.path));
        details.insert("policy".into(), json!(self.policy.name));
        details.insert("goal".into(), json!(self.state.goal));
        self.emit(EventType::RunStarted, None, Some("running"), details)?;
        let plan_json = serde_json::to_value(self.plan).unwrap_or(Value::Null);
        self.run_dir.write_plan(&plan_json)?;
        let mut details = Map::new();
        details.insert("step_count".into(), json!(self.plan.steps.len()));
        details.insert("plan_sha256".into(), json!(self.plan.source.sha256));
        details.insert("policy_sha256".into(), json!(self.policy.source.sha256));
        self.emit(EventType::PlanCreated, None, Some("ok"), details)?;
        self.checkpoint()?;

        while !self.state.status.is_terminal() {
            let index = self.state.cursor.next_step;
            let Some(step) = self.plan.steps.get(index) else {
                self.end(RunStatus::Done, "end_of_plan", None);
                self.checkpoint()?;
                break;
            };
            self.run_attempt(index, step, progress)?;
            self.checkpoint()?;
        }

        let mut details = Map::new();
        details.insert("status".into(), json!(self.state.status));
        details.insert("stop_reason".into(), json!(self.state.stop_reason));
        details.insert("steps".into(), json!(self.state.counters.steps));
        details.insert("tool_calls".into(), json!(self.state.counters.tool_calls));
        if let Some(error) = &self.state.error {
            details.insert("error".into(), json!(error));
        }
        let status = self.state.status.as_str();
        self.emit(EventType::RunFinished, None, Some(status), details)?;
        progress.run_finished(&self.state, &self.run_dir.path);
        Ok(self.state)
    }

    fn run_attempt(&mut self, index: usize, step: &'r Step, progress: &mut dyn Progress) -> Result<(), StoreError> {
        let budget = &self.policy.budget;
        let attempt = self.state.cursor.attempts + 1;
        let is_tool = !matches!(step.action, Action::Finish { .. });
        if attempt == 1 && self.state.counters.steps >= budget.max_steps {
            return self.exhaust("max_steps", budget.max_steps, self.state.counters.steps);
        }
        if is_tool && self.state.counters.tool_calls >= budget.max_tool_calls {
            return self.exhaust("max_tool_calls", budget.max_tool_calls, self.state.counters.tool_calls);
        }
        if attempt == 1 {
            self.state.counters.steps += 1;
        }
        self.state.current_step_id = Some(step.id.clone());
        let started = self.env.clock.now();
        let (started_event, finished_event) = if attempt == 1 {
            (EventType::StepStarted, EventType::StepFinished)
        } else {
            (EventType::RetryAttemptStarted, EventType::RetryAttemptFinished)
        };
        let mut details = Map::new();
        details.insert("kind".into(), json!(step.action.kind()));
        details.insert("attempt".into(), json!(attempt));
        self.emit(started_event, Some(&step.id), Some("running"), details)?;

        let resolved = self.resolve(step)?;
        let (action, outcome) = match resolved {
            Ok(action) => {
                if is_tool {
                    self.state.counters.tool_calls += 1;
                }
                let outcome = self.tools.execute(&action, attempt, self.timeout(step));
                (Some(action), outcome)
            }
            Err(failure) => (None, ToolOutcome { result: Err(failure), details: Map::new() }),
        };
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
            action: action.as_ref().map(|action| serde_json::to_value(action).unwrap_or(Value::Null)),
            output_text: success.as_ref().map(|success| success.output_text.clone()).unwrap_or_default(),
            output_json: success.as_ref().and_then(|success| success.output_json.clone()),
            error: failure.as_ref().map(|failure| failure.message.clone()),
            details: outcome.details.clone(),
            started_at: format_timestamp(started),
            finished_at: format_timestamp(finished),
            duration_ms,
        };
        self.run_dir.history.append(&record).map_err(|source| StoreError::Io {
            action: "append to",
            path: self.run_dir.path.join("history.jsonl"),
            source,
        })?;
        self.state.counters.history_records += 1;

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
        self.emit(finished_event, Some(&step.id), Some(status_text), details)?;
        progress.step_finished(index, self.plan.steps.len(), step, &record);

        match (success, failure) {
            (Some(success), _) => self.succeeded(index, step, success),
            (None, Some(failure)) => self.failed(step, attempt, failure)?,
            (None, None) => {}
        }
        Ok(())
    }

    fn succeeded(&mut self, index: usize, step: &Step, success: ToolSuccess) {
        self.state.counters.consecutive_failures = 0;
        self.state.cursor = Cursor { next_step: index + 1, attempts: 0 };
        let output = StepOutput { output_text: success.output_text, output_json: success.output_json };
        if self.referenced.contains(&step.id) {
            self.outputs.named.insert(step.id.clone(), output.clone());
        }
        self.outputs.last = Some(output);
        if matches!(step.action, Action::Finish { .. }) {
            self.end(RunStatus::Done, "finish_step", None);
        }
    }

    fn failed(&mut self, step: &Step, attempt: u32, failure: ToolFailure) -> Result<(), StoreError> {
        let budget = &self.policy.budget;
        self.state.counters.consecutive_failures += 1;
        self.state.cursor.attempts = attempt;
        let max_attempts = self.policy.retry.attempts_for(failure.class, step.retry);
        let retry_allowed = attempt < max_attempts;
        let budget_hit = self.state.counters.consecutive_failures >= budget.max_consecutive_failures;
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
            self.exhaust("max_consecutive_failures", budget.max_consecutive_failures, used)?;
        } else {
            let message = format!("step `{}` failed ({}): {}", step.id, failure.class, failure.message);
            self.end(RunStatus::Failed, "step_failed", Some(message));
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

    fn timeout(&self, step: &Step) -> Duration {
        let cap = self.policy.budget.step_timeout_secs;
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
        self.state.state_version += 1;
        self.state.audit_seq = self.run_dir.audit.seq();
        self.state.updated_at = format_timestamp(self.env.clock.now());
        self.run_dir.checkpoint(&self.state)?;
        let mut details = Map::new();
        details.insert("state_version".into(), json!(self.state.state_version));
        self.emit(EventType::StateSaved, self.state.current_step_id.clone().as_deref(), Some("ok"), details)
    }

    fn emit(
        &mut self,
        event: EventType,
        step_id: Option<&str>,
        status: Option<&str>,
        details: Map<String, Value>,
    ) -> Result<(), StoreError> {
        let ts = format_timestamp(self.env.clock.now());
        self.run_dir.audit.append(ts, &self.state.run_id, event.as_str(), step_id, status, details).map(|_| ()).map_err(
            |source| StoreError::Io { action: "append to", path: self.run_dir.path.join("audit.jsonl"), source },
        )
    }
}

/// Renders every template of an action. Only data fields can hold step
/// output: the loader guarantees that the program and paths are literal
/// (or built from `run.id`).
fn render_action(action: &Action, outputs: &Outputs) -> Result<ResolvedAction, ToolFailure> {
    let fail = |error: crate::template::TemplateError| ToolFailure {
        class: FailureClass::TemplateError,
        message: format!("template resolution failed: {error}"),
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
    })
}
