//! Agent steps: the turn loop. Each turn the runtime builds the prompt,
//! asks the model for one member of the answer union, seals the answer in
//! the run's log (a checkpoint) BEFORE anything acts on it, then acts on
//! it through the same path as a planned step (policy, confinement,
//! approval, receipts, records) and records the observation. The model
//! never executes anything.
//!
//! A run killed at any point resumes from its last checkpoint: a recorded
//! answer without an observation is acted on (never asked again), and the
//! counts of model calls, tokens and refusals go on from the record.
//!
//! - `prompt.rs`: instructions, tool schemas, transcript, answer schema;
//! - `proposal.rs`: an answer decoded and an action resolved, or refused;
//! - `decide.rs`: the runtime's decision on one answer (pure; `replay`
//!   compares it with what a run recorded);
//! - `act.rs`: acting on one recorded answer;
//! - `listing.rs`: the pinned MCP tools offered, as their servers list them.

mod act;
pub(crate) mod decide;
pub(crate) mod listing;
pub(crate) mod prompt;
pub(crate) mod proposal;

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::model::{AgentSpec, FailureClass, RunStatus, Step, ToolFacts};
use crate::runtime::event::{AgentAnswerRecorded, AgentObserved, AttemptStarted, Event};
use crate::runtime::recorder::Recorder;
use crate::store::{
    AgentProgress, AgentTurn, MAX_RAW_ANSWER_BYTES, ModelAnswer, Observation, PendingAction, RunState, StoreError,
    capped,
};
use crate::tools::model_call::{ModelRequest, ask_model};
use crate::tools::{ResolvedAction, ToolOutcome};

use self::listing::McpListing;
use super::attempt::Attempt;
use super::budgets::Exhausted;
use super::outcome::{Attempted, failure};

/// What the loop does after one part of a turn.
pub(super) enum Next {
    /// Go on with the next part (the record was checkpointed).
    Continue,
    /// The run waits for a person (approval or an answer).
    Pause,
    /// The step ends with this outcome.
    End(Box<ToolOutcome>),
    /// The run was ended (a budget ran out).
    Stopped,
}

impl Attempt<'_, '_> {
    /// Runs agent step `index` from where its record stands. `approved` is
    /// the frozen action a person approved (when resuming a paused run).
    pub(super) fn agent(
        mut self,
        index: usize,
        step: &Step,
        spec: &AgentSpec,
        mut approved: Option<ResolvedAction>,
    ) -> Result<(), StoreError> {
        self.recorder.may_act()?;
        self.recorder.make_durable()?;
        let started = self.env.clock.now();
        let in_progress = self.state.agent.as_ref().is_some_and(|agent| agent.step_id == step.id);
        if !in_progress {
            let attempt = self.state.cursor.attempts + 1;
            if let Some(exhausted) = self.budgets.before_attempt(self.state, attempt == 1, 0) {
                return exhausted.record(self.plan, self.state, self.recorder);
            }
            if attempt == 1 {
                self.state.counters.steps += 1;
            }
            self.state.current_step_id = Some(step.id.clone());
            let details = AttemptStarted { step_id: step.id.clone(), kind: "agent".to_string(), attempt };
            self.recorder.emit(if attempt == 1 {
                Event::StepStarted(details)
            } else {
                Event::RetryAttemptStarted(details)
            })?;
            self.state.agent = Some(AgentProgress::new(&step.id));
        }
        let goal = match spec.goal.render(&*self.outputs) {
            Ok(goal) => goal,
            Err(error) => {
                let outcome = ToolOutcome::err(failure(
                    FailureClass::TemplateError,
                    format!("`goal` could not be resolved: {error}"),
                ));
                return self.end_agent(index, step, started, outcome);
            }
        };
        let listing = match self.list_mcp_tools(step, spec)? {
            Ok(listing) => listing,
            Err(failed) => return self.end_agent(index, step, started, ToolOutcome::err(failed)),
        };
        loop {
            if self.state.status != RunStatus::Running {
                return Ok(());
            }
            let unanswered = self.state.agent.as_ref().and_then(AgentProgress::unanswered).cloned();
            let next = match unanswered {
                Some(turn) => self.act(index, step, spec, &listing, &turn, approved.take())?,
                None => self.ask(step, spec, &listing, &goal)?,
            };
            match next {
                Next::Continue => {}
                Next::Pause => return Ok(()),
                Next::Stopped => {
                    self.state.agent = None;
                    return Ok(());
                }
                Next::End(outcome) => return self.end_agent(index, step, started, *outcome),
            }
        }
    }

    /// Asks the model for the next turn and seals its answer, or ends the
    /// run when a budget would be exceeded by the call.
    fn ask(&mut self, step: &Step, spec: &AgentSpec, listing: &McpListing, goal: &str) -> Result<Next, StoreError> {
        let Some(progress) = self.state.agent.as_ref() else {
            return Ok(Next::End(Box::new(ToolOutcome::err(failure(
                FailureClass::UnknownError,
                "no agent record".to_string(),
            )))));
        };
        let turns = progress.turns.len() as u64;
        let limits = [
            ("max_turns", Some(u64::from(spec.max_turns)), turns),
            ("max_model_calls", Some(u64::from(spec.model_calls())), u64::from(progress.model_calls)),
            ("max_tokens_in", spec.max_tokens_in, progress.tokens_in),
            ("max_tokens_out", spec.max_tokens_out, progress.tokens_out),
        ];
        for (budget, limit, used) in limits {
            if let Some(limit) = limit.filter(|limit| used >= *limit) {
                Exhausted::new(budget, limit, used).record(self.plan, self.state, self.recorder)?;
                return Ok(Next::Stopped);
            }
        }
        if let Some(exhausted) = self.budgets.deadline(self.state) {
            exhausted.record(self.plan, self.state, self.recorder)?;
            return Ok(Next::Stopped);
        }
        let Some(profile) = self.policy.models.get(&spec.model) else {
            let message = format!("policy `{}` has no model `{}`", self.policy.name, spec.model);
            return Ok(Next::End(Box::new(ToolOutcome::err(failure(FailureClass::SecurityDenied, message)))));
        };
        // The scenario hook: a scripted model stands in for every profile.
        let scripted;
        let profile = match &self.env.model_endpoint {
            Some(endpoint) => {
                let mut redirected = profile.clone();
                redirected.endpoint = endpoint.clone();
                redirected.backend = crate::model::ModelBackend::Openai;
                scripted = redirected;
                &scripted
            }
            None => profile,
        };
        let tools = prompt::offered(self.policy, spec, listing);
        let schema = prompt::answer_schema(&tools);
        let text = prompt::turn_prompt(goal, &tools, progress, spec.max_turns);
        let api_key = profile.api_key.as_deref().and_then(|name| self.outputs.secret_value(name));
        let request = ModelRequest { profile, api_key, system: prompt::INSTRUCTIONS, prompt: &text, schema: &schema };
        let asked = self.env.clock.now();
        let reply = ask_model(&request);
        let latency_ms = elapsed_ms(asked, self.env.clock.now());
        let Some(progress) = self.state.agent.as_mut() else {
            return Ok(Next::Stopped);
        };
        progress.model_calls += 1;
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => {
                let message = format!(
                    "agent step `{}`: the model call failed: {error} (model `{}` at {})",
                    step.id, spec.model, profile.endpoint
                );
                return Ok(Next::End(Box::new(ToolOutcome::err(failure(FailureClass::ExecutionError, message)))));
            }
        };
        progress.tokens_in += reply.tokens_in.unwrap_or(0);
        progress.tokens_out += reply.tokens_out.unwrap_or(0);
        let (raw, raw_truncated) = capped(&reply.text, MAX_RAW_ANSWER_BYTES);
        let decoded = crate::strict_json::parse(&reply.text).unwrap_or(Value::Null);
        let answer = ModelAnswer {
            decoded,
            raw,
            raw_truncated,
            model: profile.model.clone(),
            latency_ms,
            tokens_in: reply.tokens_in,
            tokens_out: reply.tokens_out,
            finish_reason: reply.finish_reason,
            response_format: reply.response_format.map(str::to_string),
        };
        let turn = progress.turns.len() as u32 + 1;
        progress.turns.push(AgentTurn { turn, answer: answer.clone(), observation: None });
        self.recorder.emit(Event::AgentAnswerRecorded(AgentAnswerRecorded {
            step_id: step.id.clone(),
            turn,
            answer,
        }))?;
        // Sealed and durable before anything acts on it.
        self.recorder.checkpoint(self.state)?;
        self.recorder.make_durable()?;
        Ok(Next::Continue)
    }

    /// Ends the agent step with `outcome`: its record, and what comes next
    /// (as for any step).
    fn end_agent(
        &mut self,
        index: usize,
        step: &Step,
        started: Timestamp,
        outcome: ToolOutcome,
    ) -> Result<(), StoreError> {
        let summary = self.state.agent.take().map(|progress| {
            json!({
                "turns": progress.turns.len(),
                "model_calls": progress.model_calls,
                "tokens_in": progress.tokens_in,
                "tokens_out": progress.tokens_out,
                "refusals": progress.refusals,
            })
        });
        let outcome = match outcome.result {
            Ok(mut success) => {
                success.output_json = summary;
                ToolOutcome { result: Ok(success), facts: ToolFacts::None, stderr_text: None }
            }
            Err(failure) => ToolOutcome::err(failure),
        };
        let attempt = self.state.cursor.attempts + 1;
        self.finish(index, step, attempt, started, None, Attempted::unkeyed(outcome))
    }
}

fn elapsed_ms(from: Timestamp, to: Timestamp) -> u64 {
    u64::try_from(to.as_millisecond() - from.as_millisecond()).unwrap_or(0)
}

/// A waiting agent step's story: its frozen action is the action its last
/// recorded answer proposed (not acted on yet), frozen under that turn's
/// key, and its fingerprint is recomputed from the frozen fields; an
/// approval on record names exactly that action.
pub(super) fn check_waiting(state: &RunState, step: &Step, pending: &PendingAction) -> Result<(), String> {
    let refused = |why: &str| Err(format!("the frozen action of agent step `{}` {why}", step.id));
    let Some(turn) = state.agent.as_ref().filter(|agent| agent.step_id == step.id).and_then(AgentProgress::unanswered)
    else {
        return refused("has no recorded answer waiting to be acted on");
    };
    let Ok(proposal::Proposal::Act { tool, arguments }) = proposal::decode(&turn.answer.decoded) else {
        return refused("is not what the recorded answer proposed");
    };
    // The frozen action, read back into what a model proposes: it must be
    // exactly the recorded answer's tool and arguments.
    let action = serde_json::from_value::<ResolvedAction>(pending.action.clone()).ok();
    let proposed = action.as_ref().is_some_and(|action| {
        pending.kind == action.kind()
            && proposal::proposed(action)
                .is_some_and(|(name, proposed)| name.is_none_or(|name| name == tool) && proposed == arguments)
    });
    if !proposed {
        return refused("is not what the recorded answer proposed");
    }
    let key = proposal::agent_key(&state.run_id, &step.id, turn.turn);
    let print = crate::runtime::approval::fingerprint(
        &pending.kind,
        &pending.action,
        &pending.risk,
        Some(&key),
        &pending.scope,
    );
    if pending.idempotency_key.as_deref() != Some(key.as_str()) || pending.fingerprint != print {
        return refused("is not bound to its fingerprint and its turn's key");
    }
    if let Some(approval) = &state.approval
        && (approval.fingerprint != pending.fingerprint
            || approval.scope != pending.scope
            || approval.state_version != pending.state_version)
    {
        return refused("has an approval bound to another action");
    }
    Ok(())
}

/// The longest answer a person may give to an agent's question, in bytes.
pub const MAX_ANSWER_BYTES: usize = 2000;

/// Records a person's `answer` to the question a `waiting_input` run asked:
/// the turn's observation (untrusted, capped), and the run goes on.
pub(super) fn record_answer(state: &mut RunState, recorder: &mut Recorder<'_>, answer: &str) -> Result<(), StoreError> {
    let Some(progress) = state.agent.as_mut() else {
        return Ok(());
    };
    let (text, truncated) = capped(answer, MAX_ANSWER_BYTES);
    let observation = Observation {
        outcome: "answered".to_string(),
        source: "person".to_string(),
        trust: "untrusted".to_string(),
        rule: None,
        text,
        truncated,
    };
    progress.question = None;
    let Some(turn) = progress.turns.last_mut() else {
        return Ok(());
    };
    turn.observation = Some(observation.clone());
    let event = AgentObserved {
        step_id: progress.step_id.clone(),
        turn: turn.turn,
        outcome: observation.outcome,
        source: observation.source,
        trust: observation.trust,
        rule: None,
        text: observation.text,
    };
    state.status = RunStatus::Running;
    recorder.emit(Event::AgentObservation(event))
}

/// A `waiting_input` run's story: the step at the cursor is an agent step
/// whose last recorded answer, not acted on yet, asked exactly the
/// question on record.
pub(super) fn check_asking(plan: &crate::model::Plan, state: &RunState) -> Result<(), String> {
    let step = plan.steps.get(state.cursor.next_step);
    let progress = state.agent.as_ref().filter(|agent| step.is_some_and(|step| step.id == agent.step_id));
    let asked = progress.and_then(|agent| {
        let turn = agent.unanswered()?;
        match proposal::decode(&turn.answer.decoded) {
            Ok(proposal::Proposal::Ask(question)) => Some(question),
            _ => None,
        }
    });
    match (asked, progress.and_then(|agent| agent.question.as_ref())) {
        (Some(asked), Some(question)) if asked == *question => Ok(()),
        _ => {
            Err("a `waiting_input` run whose question is not the one its agent step's recorded answer asked"
                .to_string())
        }
    }
}
