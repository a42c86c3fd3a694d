//! Agent turns: each model answer the run sealed in its audit log
//! (`agent_answer_recorded`), what came of it (`approval_requested`,
//! `agent_observation`), and the runtime's decision on the same answer
//! today. No model is asked: the recorded answers are the model's.

use serde_json::Value;

use crate::model::{AgentSpec, RunStatus, Step};
use crate::runtime::event::{AgentAnswerRecorded, AgentObserved, AgentToolsListed, ApprovalRequested};
use crate::store::{AuditEvent, LoadedRun};

use super::super::agent::decide::{TurnDecision, decide_turn};
use super::super::agent::listing::McpListing;
use super::super::agent::proposal::{Proposal, decode};
use super::steps::Replayer;
use super::{Decided, StepReplay};

/// One recorded turn, as the audit log tells it.
struct RecordedTurn {
    turn: u32,
    /// The model's answer, decoded (`null`: it was not JSON).
    answer: Value,
    /// Who required approval of its action, when it waited for one.
    approval: Option<String>,
    /// `(outcome, rule, text)` of its observation, once acted on.
    observation: Option<(String, Option<String>, String)>,
    /// The pinned MCP tools as listed when the turn was acted on (or, not
    /// acted on yet, last listed).
    listing: McpListing,
}

/// The recorded turns of agent step `step` against today's decisions.
pub(super) fn replay_turns(
    replayer: &mut Replayer<'_>,
    step: &Step,
    spec: &AgentSpec,
    run: &LoadedRun,
) -> Vec<StepReplay> {
    let waiting_input = run.state.status == RunStatus::WaitingInput;
    recorded_turns(run, &step.id)
        .into_iter()
        .map(|recorded| {
            let old = recorded_decision(&recorded, waiting_input);
            let (policy, workspace) = (replayer.policy, replayer.workspace);
            let resolver = &mut replayer.resolver;
            let decided = decide_turn(policy, workspace, resolver, step, spec, &recorded.listing, &recorded.answer);
            let new = match decided {
                TurnDecision::Refused { rule, message } => Decided::Deny { rule, reason: message },
                TurnDecision::Finish(_) => Decided::Finish,
                TurnDecision::Ask(_) => Decided::Ask,
                TurnDecision::Act { approval: Some(required_by), rule, .. } => {
                    Decided::Approval { required_by: required_by.to_string(), rule }
                }
                TurnDecision::Act { approval: None, rule, .. } => Decided::Allow { rule },
            };
            StepReplay::new(&step.id, "agent", Some(recorded.turn), old, new)
        })
        .collect()
}

/// The turns of step `step_id`, in the order the log holds them.
fn recorded_turns(run: &LoadedRun, step_id: &str) -> Vec<RecordedTurn> {
    let mut turns: Vec<RecordedTurn> = Vec::new();
    let mut listing = McpListing::default();
    for event in run.audit.iter().filter(|event| event.step_id.as_deref() == Some(step_id)) {
        match event.event_type.as_str() {
            "agent_tools_listed" => {
                if let Some(listed) = details::<AgentToolsListed>(event) {
                    listing = McpListing::recorded(listed.tools);
                    if let Some(last) = turns.last_mut().filter(|last| last.observation.is_none()) {
                        last.listing = listing.clone();
                    }
                }
            }
            "agent_answer_recorded" => {
                if let Some(recorded) = details::<AgentAnswerRecorded>(event) {
                    let answer = recorded.answer.decoded;
                    let listing = listing.clone();
                    turns.push(RecordedTurn {
                        turn: recorded.turn,
                        answer,
                        approval: None,
                        observation: None,
                        listing,
                    });
                }
            }
            "approval_requested" => {
                let requested = details::<ApprovalRequested>(event);
                if let (Some(last), Some(requested)) =
                    (turns.last_mut().filter(|last| last.observation.is_none()), requested)
                {
                    last.approval = Some(requested.required_by);
                }
            }
            "agent_observation" => {
                let Some(observed) = details::<AgentObserved>(event) else { continue };
                if let Some(turn) = turns.iter_mut().rev().find(|recorded| recorded.turn == observed.turn) {
                    turn.observation = Some((observed.outcome, observed.rule, observed.text));
                }
            }
            _ => {}
        }
    }
    turns
}

/// An event's details as the type the runtime wrote them from; `None` for
/// details in a shape this version does not read.
pub(super) fn details<T: serde::de::DeserializeOwned>(event: &AuditEvent) -> Option<T> {
    serde_json::from_value(Value::Object(event.details.clone())).ok()
}

/// What the run decided about a recorded turn.
fn recorded_decision(recorded: &RecordedTurn, waiting_input: bool) -> Decided {
    let proposal = decode(&recorded.answer).ok();
    match (&recorded.observation, proposal) {
        (Some((outcome, rule, text)), _) if outcome == "refused" => {
            Decided::Deny { rule: rule.clone().unwrap_or_else(|| "policy".to_string()), reason: text.clone() }
        }
        (Some(_), Some(Proposal::Finish(_))) => Decided::Finish,
        (Some(_), Some(Proposal::Ask(_))) => Decided::Ask,
        (None, Some(Proposal::Ask(_))) if waiting_input => Decided::Ask,
        (observation, _) => match (&recorded.approval, observation) {
            (Some(required_by), _) => Decided::Approval { required_by: required_by.clone(), rule: None },
            (None, Some(_)) => Decided::Allow { rule: None },
            (None, None) => Decided::NotActed,
        },
    }
}
