//! Acting on one recorded answer: a refusal (with its rule) back to the
//! model, a write frozen for a person's approval, an action run through
//! the runtime's own path (policy, confinement, receipts), a finish
//! checked on fresh evidence. Every outcome becomes the turn's
//! observation, checkpointed.

use serde_json::Value;

use crate::model::{AgentSpec, FailureClass, Step, ToolFacts};
use crate::runtime::approval::fingerprint;
use crate::runtime::env::CrashPoint;
use crate::runtime::event::{AgentObserved, ApprovalRequested, Event};
use crate::runtime::format_timestamp;
use crate::store::{AgentTurn, ArgumentSource, MAX_OBSERVATION_BYTES, Observation, PendingAction, StoreError, capped};
use crate::tools::{ResolvedAction, ToolOutcome, ToolSuccess};

use super::super::attempt::Attempt;
use super::super::completion::apply_expect;
use super::super::idempotency::{EffectRun, KeyedStep, crash_hook};
use super::super::outcome::failure;
use super::super::render::render_server_env;
use super::Next;
use super::decide::{TurnDecision, decide_turn};
use super::listing::McpListing;
use super::proposal::{agent_key, writes};
use crate::model::RunStatus;

/// A proposal the runtime refuses: the rule and why.
struct Refusal {
    rule: String,
    message: String,
}

impl Attempt<'_, '_> {
    /// Acts on `turn`'s recorded answer.
    pub(super) fn act(
        &mut self,
        index: usize,
        step: &Step,
        spec: &AgentSpec,
        listing: &McpListing,
        turn: &AgentTurn,
        approved: Option<ResolvedAction>,
    ) -> Result<Next, StoreError> {
        let policy = self.policy;
        let workspace = self.tools.workspace;
        let resolver = &mut self.tools.resolver;
        let decided = decide_turn(policy, workspace, resolver, step, spec, listing, &turn.answer.decoded);
        let (tool, action, required_by) = match decided {
            TurnDecision::Refused { rule, message } => return self.refuse(step, spec, turn, Refusal { rule, message }),
            TurnDecision::Finish(summary) => return self.finish_turn(index, step, turn, summary),
            TurnDecision::Ask(question) => return self.ask_person(step, turn, question),
            TurnDecision::Act { tool, action, approval, .. } => (tool, *action, approval),
        };
        let approved = match approved {
            Some(frozen) if frozen == action => true,
            Some(_) => {
                let message = "the approved action is not the recorded answer's action".to_string();
                return Ok(Next::End(Box::new(ToolOutcome::err(failure(FailureClass::SecurityDenied, message)))));
            }
            None => false,
        };
        if let Some(required_by) = required_by.filter(|_| !approved) {
            self.freeze_turn(step, turn, &action, required_by)?;
            return Ok(Next::Pause);
        }
        if let Some(exhausted) = self.budgets.tool_calls(self.state, 1 + self.verifier.reserved_by(index)) {
            exhausted.record(self.plan, self.state, self.recorder)?;
            return Ok(Next::Stopped);
        }
        let outcome = self.run_action(step, turn, &action, approved)?;
        let observation = match &outcome.result {
            Ok(success) => observed("ok", &tool, "untrusted", None, &success_text(success)),
            Err(failed)
                if failed.class == FailureClass::SecurityDenied && matches!(action, ResolvedAction::Mcp { .. }) =>
            {
                // Its definition and the arguments were checked when the
                // turn was decided: refused now, the server changed under
                // the step (or its sandbox cannot be had). Not the model's
                // to work around.
                let message = format!("agent step `{}`: {}", step.id, failed.message);
                return Ok(Next::End(Box::new(ToolOutcome::err(failure(FailureClass::SecurityDenied, message)))));
            }
            Err(failed) if failed.class == FailureClass::SecurityDenied => {
                let rule = outcome.facts.rule().unwrap_or("policy").to_string();
                return self.refuse(step, spec, turn, Refusal { rule, message: failed.message.clone() });
            }
            Err(failed) => {
                let text = if failed.output_text.is_empty() {
                    failed.message.clone()
                } else {
                    format!("{} — output: {}", failed.message, failed.output_text)
                };
                observed("failed", &tool, "untrusted", None, &text)
            }
        };
        self.observe(step, turn, observation)?;
        Ok(Next::Continue)
    }

    /// Runs `action` as the turn's effect: a write under the turn's own
    /// idempotency key (exactly once across crashes), anything else as an
    /// unkeyed planned step runs.
    fn run_action(
        &mut self,
        step: &Step,
        turn: &AgentTurn,
        action: &ResolvedAction,
        approved: bool,
    ) -> Result<ToolOutcome, StoreError> {
        let timeout = self.budgets.timeout(step);
        self.tools.at_step(&step.id);
        // An MCP server gets its `env` (its secrets included), as for an
        // `mcp` step; nothing else an agent runs gets any.
        let server = match action {
            ResolvedAction::Mcp { server, .. } => self.policy.mcp.servers.get(server),
            _ => None,
        };
        let env = match server.map(|server| render_server_env(server, self.outputs)).transpose() {
            Ok(env) => env.unwrap_or_default(),
            Err(failed) => return Ok(ToolOutcome::err(failed)),
        };
        self.tools.set_step_env(env);
        self.recorder.may_act()?;
        if writes(action) {
            let key = agent_key(&self.state.run_id, &step.id, turn.turn);
            let run = EffectRun { attempt: 1, timeout, approved };
            let attempted = self.idempotency.execute(
                KeyedStep { step, key, action },
                self.state,
                self.recorder,
                self.tools,
                run,
            )?;
            if let (ResolvedAction::WriteFile { path, .. }, Ok(_)) = (action, &attempted.outcome.result) {
                self.progress.file_written(path);
            }
            return Ok(attempted.outcome);
        }
        self.state.counters.tool_calls += 1;
        crash_hook(self.env, step, CrashPoint::BeforeEffect);
        let outcome = self.tools.execute(action, 1, timeout, approved);
        self.recorder.may_act()?;
        crash_hook(self.env, step, CrashPoint::AfterEffect);
        Ok(outcome)
    }

    /// A refused proposal: nothing ran; the refusal and its rule go back to
    /// the model, and too many end the step.
    fn refuse(
        &mut self,
        step: &Step,
        spec: &AgentSpec,
        turn: &AgentTurn,
        refusal: Refusal,
    ) -> Result<Next, StoreError> {
        let Refusal { rule, message } = refusal;
        self.observe(step, turn, observed("refused", "runtime", "trusted", Some(rule.clone()), &message))?;
        let refusals = self.state.agent.as_ref().map_or(0, |progress| progress.refusals);
        if refusals > spec.max_refusals {
            let message = format!(
                "agent step `{}`: {refusals} proposals refused (`max_refusals` = {}); the last by rule `{rule}`: {message}",
                step.id, spec.max_refusals
            );
            return Ok(Next::End(Box::new(ToolOutcome::err(failure(FailureClass::SecurityDenied, message)))));
        }
        Ok(Next::Continue)
    }

    /// Records `observation` as `turn`'s, and checkpoints.
    pub(super) fn observe(
        &mut self,
        step: &Step,
        turn: &AgentTurn,
        observation: Observation,
    ) -> Result<(), StoreError> {
        let Some(progress) = self.state.agent.as_mut() else {
            return Ok(());
        };
        if observation.outcome == "refused" {
            progress.refusals += 1;
        }
        if let Some(last) = progress.turns.iter_mut().find(|recorded| recorded.turn == turn.turn) {
            last.observation = Some(observation.clone());
        }
        self.recorder.emit(Event::AgentObservation(AgentObserved {
            step_id: step.id.clone(),
            turn: turn.turn,
            outcome: observation.outcome,
            source: observation.source,
            trust: observation.trust,
            rule: observation.rule,
            text: observation.text,
        }))?;
        self.recorder.checkpoint(self.state)
    }

    /// `finish`: the step ends only when its `expect` and the plan's
    /// `[[verify]]` hold on fresh evidence; a finish with neither is not
    /// evidence of anything.
    fn finish_turn(
        &mut self,
        index: usize,
        step: &Step,
        turn: &AgentTurn,
        summary: String,
    ) -> Result<Next, StoreError> {
        if step.expect.is_none() && self.plan.verify.is_empty() {
            let message = format!(
                "agent step `{}`: the model answered finish, but the step has no `expect` and the plan no `[[verify]]`: a model's word is not evidence",
                step.id
            );
            return Ok(Next::End(Box::new(ToolOutcome::err(failure(FailureClass::VerificationFailed, message)))));
        }
        if let Some(exhausted) =
            self.budgets.tool_calls(self.state, self.verifier.calls() + self.verifier.reserved_by(index))
        {
            exhausted.record(self.plan, self.state, self.recorder)?;
            return Ok(Next::Stopped);
        }
        let checks = self.verifier.check_fresh(self.state, self.idempotency.receipts())?;
        let failed: Vec<&str> = checks.iter().filter(|check| !check.passed).map(|check| check.check.as_str()).collect();
        let outcome = apply_expect(step, ToolOutcome::success(summary.clone(), None, ToolFacts::None));
        let text = match (&outcome.result, failed.is_empty()) {
            (Ok(_), true) => "finish accepted: the checks hold on fresh evidence".to_string(),
            (Err(refused), true) => format!("finish refused: {}", refused.message),
            (_, false) => format!("finish refused: not verified on fresh evidence: {}", failed.join("; ")),
        };
        let accepted = outcome.result.is_ok() && failed.is_empty();
        self.observe(step, turn, observed(if accepted { "ok" } else { "failed" }, "runtime", "trusted", None, &text))?;
        if !failed.is_empty() {
            let message = format!("agent step `{}`: the model answered finish, but {}", step.id, failed.join("; "));
            return Ok(Next::End(Box::new(ToolOutcome::err(failure(FailureClass::VerificationFailed, message)))));
        }
        Ok(Next::End(Box::new(outcome)))
    }

    /// `ask`: the run waits for a person's answer.
    fn ask_person(&mut self, step: &Step, turn: &AgentTurn, question: String) -> Result<Next, StoreError> {
        let _ = (step, turn);
        if let Some(progress) = self.state.agent.as_mut() {
            progress.question = Some(question);
        }
        self.state.status = RunStatus::WaitingInput;
        Ok(Next::Pause)
    }

    /// Freezes the turn's action for approval and pauses the run, exactly
    /// as a planned step's: bound to its fingerprint.
    fn freeze_turn(
        &mut self,
        step: &Step,
        turn: &AgentTurn,
        action: &ResolvedAction,
        required_by: &str,
    ) -> Result<(), StoreError> {
        let frozen = frozen_agent_action(&self.state.run_id, &step.id, turn.turn, action);
        let pending = PendingAction {
            step_id: step.id.clone(),
            kind: frozen.kind.to_string(),
            action: frozen.action.clone(),
            risk: frozen.risk.to_string(),
            idempotency_key: Some(frozen.key.clone()),
            scope: frozen.scope.clone(),
            fingerprint: frozen.fingerprint.clone(),
            state_version: self.state.state_version + 1,
            required_by: required_by.to_string(),
            requested_at: format_timestamp(self.env.clock.now()),
            provenance: self.provenance(step, action),
        };
        self.recorder.emit(Event::ApprovalRequested(ApprovalRequested {
            step_id: step.id.clone(),
            fingerprint: frozen.fingerprint,
            scope: frozen.scope,
            risk: frozen.risk.to_string(),
            required_by: required_by.to_string(),
            state_version: pending.state_version,
            action: frozen.action,
        }))?;
        self.state.pending_action = Some(pending);
        self.state.status = RunStatus::WaitingApproval;
        Ok(())
    }
}

impl Attempt<'_, '_> {
    /// Where each argument of `action` was seen before the model proposed
    /// it: the goal, the earliest observation holding it, or nowhere.
    fn provenance(&self, step: &Step, action: &ResolvedAction) -> Vec<ArgumentSource> {
        let goal = match &step.action {
            crate::model::Action::Agent(spec) => spec.goal.render(&*self.outputs).unwrap_or_default(),
            _ => String::new(),
        };
        let turns = self.state.agent.as_ref().map(|progress| progress.turns.as_slice()).unwrap_or_default();
        let arguments: Vec<(String, String)> = match action {
            ResolvedAction::Shell { argv, .. } => {
                argv.iter().skip(1).enumerate().map(|(at, arg)| (format!("args[{at}]"), arg.clone())).collect()
            }
            ResolvedAction::WriteFile { path, content } => {
                vec![("path".to_string(), path.clone()), ("content".to_string(), content.clone())]
            }
            ResolvedAction::ReadFile { path } => vec![("path".to_string(), path.clone())],
            ResolvedAction::TicketLookup { ticket_id } | ResolvedAction::TicketClose { ticket_id } => {
                vec![("ticket_id".to_string(), ticket_id.clone())]
            }
            ResolvedAction::Mcp { arguments, .. } => vec![("arguments".to_string(), arguments.to_string())],
            ResolvedAction::Http { url, body, .. } => std::iter::once(("url".to_string(), url.clone()))
                .chain(body.iter().map(|body| ("body".to_string(), body.clone())))
                .collect(),
            ResolvedAction::Finish { .. } | ResolvedAction::Flaky { .. } => Vec::new(),
        };
        arguments
            .into_iter()
            .map(|(argument, value)| {
                let seen = |text: &str| !value.is_empty() && text.contains(value.as_str());
                let source = if seen(&goal) {
                    "goal (trusted)".to_string()
                } else if let Some((turn, observation)) = turns
                    .iter()
                    .filter_map(|turn| turn.observation.as_ref().map(|observation| (turn.turn, observation)))
                    .find(|(_, observation)| seen(&observation.text))
                {
                    format!("observation turn {turn} ({}, {})", observation.source, observation.trust)
                } else {
                    "model (no earlier text holds it; untrusted)".to_string()
                };
                ArgumentSource { argument, value, source }
            })
            .collect()
    }
}

/// An agent turn's action as frozen for approval, and its fingerprint:
/// built the same way when it is frozen and when a loaded run's story is
/// checked.
pub(crate) struct FrozenTurn {
    pub(crate) kind: &'static str,
    pub(crate) action: Value,
    pub(crate) risk: &'static str,
    pub(crate) key: String,
    pub(crate) scope: String,
    pub(crate) fingerprint: String,
}

pub(crate) fn frozen_agent_action(run_id: &str, step_id: &str, turn: u32, action: &ResolvedAction) -> FrozenTurn {
    let kind = action.kind();
    let action_json = serde_json::to_value(action).unwrap_or(Value::Null);
    let risk = if writes(action) { "write" } else { "read" };
    let key = agent_key(run_id, step_id, turn);
    let scope = action.scope();
    let print = fingerprint(kind, &action_json, risk, Some(&key), &scope);
    FrozenTurn { kind, action: action_json, risk, key, scope, fingerprint: print }
}

/// A tool's success as the model sees it: its text, and its structured
/// output after it.
fn success_text(success: &ToolSuccess) -> String {
    match &success.output_json {
        Some(json) if success.output_text.trim().is_empty() => json.to_string(),
        Some(json) => format!("{}\n{json}", success.output_text),
        None => success.output_text.clone(),
    }
}

fn observed(outcome: &str, source: &str, trust: &str, rule: Option<String>, text: &str) -> Observation {
    let (text, truncated) = capped(text, MAX_OBSERVATION_BYTES);
    let source = if source == "runtime" { "runtime".to_string() } else { format!("tool:{source}") };
    Observation { outcome: outcome.to_string(), source, trust: trust.to_string(), rule, text, truncated }
}
