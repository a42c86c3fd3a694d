//! Agent turns: each model answer the run sealed in its audit log
//! (`agent_answer_recorded`), what came of it (`approval_requested`,
//! `agent_observation`), and the runtime's decision on the same answer
//! today. No model is asked: the recorded answers are the model's.

use serde_json::Value;

use crate::model::{AgentSpec, RunStatus, Step};
use crate::store::LoadedRun;

use super::super::agent::decide::{TurnDecision, decide_turn};
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
            let decided =
                decide_turn(replayer.policy, replayer.workspace, &mut replayer.resolver, step, spec, &recorded.answer);
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
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    for event in run.audit.iter().filter(|event| event.step_id.as_deref() == Some(step_id)) {
        let details = &event.details;
        let turn = details.get("turn").and_then(Value::as_u64).and_then(|turn| u32::try_from(turn).ok());
        match event.event_type.as_str() {
            "agent_answer_recorded" => turns.push(RecordedTurn {
                turn: turn.unwrap_or(0),
                answer: details.get("answer").and_then(|answer| answer.get("decoded")).cloned().unwrap_or(Value::Null),
                approval: None,
                observation: None,
            }),
            "approval_requested" => {
                if let Some(last) = turns.last_mut().filter(|last| last.observation.is_none()) {
                    last.approval = text(details.get("required_by"));
                }
            }
            "agent_observation" => {
                if let Some(observed) = turns.iter_mut().rev().find(|recorded| Some(recorded.turn) == turn) {
                    let outcome = text(details.get("outcome")).unwrap_or_default();
                    let rule = text(details.get("rule"));
                    observed.observation = Some((outcome, rule, text(details.get("text")).unwrap_or_default()));
                }
            }
            _ => {}
        }
    }
    turns
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
