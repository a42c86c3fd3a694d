//! The controller loop: decide → bridge run (agent adapter) → observe, up to
//! the service policy's limits.
//!
//! Stop conditions, checked before every decision:
//! 1. `iteration >= max_iterations` (`stop_reason = "max_iterations"`);
//! 2. `consecutive_failures >= max_consecutive_failures`
//!    (`"consecutive_failures"`);
//! 3. the decision is `stop` (`"decision_stop"`).
//!
//! Each decision chooses from a closed set built here (`offer`): after a
//! run that is done and verified only `stop`; otherwise `run_plan` with the
//! plan the user's goal routes to and, once a recovery rule applied, the
//! plan its rewrite routes to (only one that plan declares in
//! `recovery_plans`), or `stop`. The goal a run gets is the user's (or a
//! recovery rule's rewrite), never a model's text. A
//! `run_plan` identical to the last one (same plan, same goal) counts as a
//! consecutive failure before it runs (`decision_repeated`), and a bridge
//! run paused for approval stops the loop (`"waiting_approval"`), and so
//! does one whose agent step asked a person a question (`"waiting_input"`).
//!
//! After a failed bridge run the recovery rules of the service policy are
//! considered (once per controller run, [`crate::ops::service::controller_recovery`]).
//! The controller run's status is the outcome for the user's goal: the last
//! run of the plan it routes to, never a substitute's (`finish`). Ids trace
//! `ctrl-…` → `bri-ctrl-…-i<n>` → `agent-bri-ctrl-…-i<n>`; records live in
//! `bridge/runs/<ctrl id>/controller_state.json` and
//! `controller_audit.jsonl`.

use serde::{Deserialize, Serialize};

use crate::model::{FailureClass, RunStatus};
use crate::ops::service::Service;
use crate::ops::service::ServiceError;
use crate::ops::service::adapters::AdapterKind;
use crate::ops::service::bridge::{self, BridgeStatus, Origin};
pub use crate::ops::service::controller_event::LinkedRun;
use crate::ops::service::controller_event::{
    BridgeRunFinished, BridgeRunStarted, ControllerEvent, ControllerFinished, ControllerInterrupted, ControllerStarted,
    DecisionMade, DecisionRepeated,
};
use crate::ops::service::controller_recovery::{AppliedRecovery, Failed, consider_recovery};
use crate::ops::service::decision::choices::{Choices, OfferedPlan};
use crate::ops::service::decision::{Action, Decision, DecisionContext};
use crate::ops::service::guard;
use crate::ops::service::ids::{agent_run_id, controller_bridge_id};
pub use crate::ops::service::record_status::{ControllerStatus, ControllerStopReason};
use crate::router::select;
use crate::runtime::IdKind;
use crate::store::{LoadedRecord, RecordKind, RecordWriter, StoreError};

/// The state of a controller run, checkpointed in
/// `bridge/runs/<id>/controller_state.json` (sealed by the run store). Field order is the file's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ControllerState {
    pub controller_run_id: String,
    pub goal: String,
    /// The plan the user's goal routes to (`None`: it routes to none).
    pub plan_id: Option<String>,
    /// The inputs of that plan the request gave (checked before the run
    /// was created); each run of that plan gets them, a recovery rule's
    /// plan runs with its own defaults.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub inputs: serde_json::Map<String, serde_json::Value>,
    /// The goal the last bridge run got, or the one a recovery rule just
    /// rewrote it to (changed only by a recovery rule).
    pub current_goal: String,
    pub status: ControllerStatus,
    /// Once finished: the outcome for the user's goal, the last run of the
    /// plan it routes to (`done`, `failed`, `waiting_approval` or
    /// `waiting_input`); a plan
    /// run in its place under a recovery rule never makes it `done`.
    pub final_status: Option<ControllerStatus>,
    /// `decision_stop`, `max_iterations`, `consecutive_failures`, `prompt_blocked`,
    /// `waiting_approval` (the last bridge run waits for a person),
    /// `waiting_input` (its agent step asked a person a question),
    /// `interrupted` (the service driving it stopped: [`settle_interrupted`]).
    pub stop_reason: Option<ControllerStopReason>,
    /// The backend chosen at start-up: `stub`, `ollama` or `openai`.
    pub decision_mode: String,
    pub decision_model: Option<String>,
    pub max_iterations: u32,
    pub max_consecutive_failures: u32,
    /// Bridge runs started.
    pub iterations: u32,
    pub consecutive_failures: u32,
    pub recovery_attempted: bool,
    /// The recovery rule that applied, if any.
    pub recovery: Option<AppliedRecovery>,
    pub decisions: Vec<DecisionRecord>,
    pub bridge_results: Vec<BridgeResult>,
    pub linked_runs: Vec<LinkedRun>,
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub iteration: u32,
    #[serde(flatten)]
    pub decision: Decision,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BridgeResult {
    pub iteration: u32,
    pub bridge_run_id: String,
    /// The plan it ran.
    pub plan_id: Option<String>,
    pub goal: String,
    /// The recovery rule it ran under (`None`: the user's goal's plan, for
    /// the user's goal).
    pub recovery_rule: Option<String>,
    pub status: BridgeStatus,
    pub exit_code: Option<i32>,
    pub agent_run_id: Option<String>,
    pub agent_final_status: Option<RunStatus>,
    pub failure_class: Option<FailureClass>,
    pub error: Option<String>,
}

/// Runs the controller loop for `goal` to its end.
pub async fn execute(
    service: &Service,
    goal: &str,
    inputs: serde_json::Map<String, serde_json::Value>,
) -> Result<ControllerState, ServiceError> {
    let (run_id, mut records) = service.create_record(RecordKind::Controller, IdKind::Controller)?;
    let limits = service.policy.controller;
    let now = service.now();
    let goal_plan = select(&service.adapters.agent.catalog, goal).ok().map(|(plan, _)| plan.id.clone());
    let mut state = ControllerState {
        controller_run_id: run_id.clone(),
        goal: goal.to_string(),
        plan_id: goal_plan,
        inputs,
        current_goal: goal.to_string(),
        status: ControllerStatus::Running,
        final_status: None,
        stop_reason: None,
        decision_mode: service.decision.name().to_string(),
        decision_model: service.decision.model().map(str::to_string),
        max_iterations: limits.max_iterations,
        max_consecutive_failures: limits.max_consecutive_failures,
        iterations: 0,
        consecutive_failures: 0,
        recovery_attempted: false,
        recovery: None,
        decisions: Vec::new(),
        bridge_results: Vec::new(),
        linked_runs: Vec::new(),
        error: None,
        created_at: now.clone(),
        updated_at: now.clone(),
    };
    // First checkpoint, then first event: see `bridge::execute_run`.
    records.save(&state)?;
    records.event(
        now.clone(),
        &ControllerEvent::ControllerStarted(ControllerStarted {
            goal: goal.to_string(),
            decision_mode: state.decision_mode.clone(),
            max_iterations: limits.max_iterations,
        }),
    )?;

    if let Err(violation) = guard::check(&service.policy.guard, goal) {
        state.error = Some(format!("prompt blocked: {}", violation.reason));
        records.event(service.now(), &ControllerEvent::PromptBlocked(violation.into()))?;
        return finish(service, &mut records, state, ControllerStopReason::PromptBlocked);
    }

    let mut recovery_pending = false;
    let mut iteration: u32 = 0;
    let stop_reason = loop {
        if iteration >= limits.max_iterations {
            break ControllerStopReason::MaxIterations;
        }
        if state.consecutive_failures >= limits.max_consecutive_failures {
            break ControllerStopReason::ConsecutiveFailures;
        }
        let last = state.bridge_results.last();
        let choices = offer(service, &state);
        let context = DecisionContext {
            goal: &state.current_goal,
            original_goal: &state.goal,
            iteration,
            max_iterations: limits.max_iterations,
            last_status: last.map(|result| result.status.as_str()),
            last_agent_status: last.and_then(|result| result.agent_final_status).map(RunStatus::as_str),
            last_failure_class: last.and_then(|result| result.failure_class),
            last_error: last.and_then(|result| result.error.as_deref()),
            recovery_attempted: state.recovery_attempted,
            recovery_pending,
            choices: &choices,
        };
        let decision = service.decision.decide(&context, service.env.clock.as_ref()).await;
        recovery_pending = false;
        records.event(
            service.now(),
            &ControllerEvent::DecisionMade(DecisionMade { iteration, decision: Box::new(decision.clone()) }),
        )?;
        // The same run chosen again after it did not succeed counts as a
        // failure before it starts: a loop of identical retries ends at the
        // consecutive-failure guard instead of at `max_iterations`.
        let repeated = decision.action == Action::RunPlan
            && state
                .decisions
                .iter()
                .rev()
                .find(|earlier| earlier.decision.action == Action::RunPlan)
                .is_some_and(|earlier| earlier.decision.same_choice(&decision));
        let action = decision.action;
        let run_goal = decision.goal.clone();
        let run_plan = decision.plan_id.clone();
        let recovery_rule =
            run_plan.as_deref().and_then(|id| choices.plan(id)).and_then(|plan| plan.recovery_rule.clone());
        if action == Action::Stop
            && state.bridge_results.is_empty()
            && let Some(why) = &choices.run_withheld
        {
            state.error = Some(format!("nothing ran: {why}"));
        }
        state.decisions.push(DecisionRecord { iteration, decision });
        state.updated_at = service.now();
        records.save(&state)?;
        if action == Action::Stop {
            break ControllerStopReason::DecisionStop;
        }
        if repeated {
            state.consecutive_failures += 1;
            records.event(
                service.now(),
                &ControllerEvent::DecisionRepeated(DecisionRepeated {
                    iteration,
                    goal: run_goal.clone(),
                    consecutive_failures: state.consecutive_failures,
                }),
            )?;
            records.save(&state)?;
            if state.consecutive_failures >= limits.max_consecutive_failures {
                break ControllerStopReason::ConsecutiveFailures;
            }
        }

        let bridge_run_id = controller_bridge_id(&run_id, iteration);
        state.current_goal = run_goal.clone();
        records.event(
            service.now(),
            &ControllerEvent::BridgeRunStarted(BridgeRunStarted { iteration, bridge_run_id, goal: run_goal.clone() }),
        )?;
        let origin = Origin::Controller { controller_run_id: &run_id, iteration };
        // The request's inputs are the user's goal's plan's: only its runs get them.
        let no_inputs = serde_json::Map::new();
        let inputs = if run_plan.is_some() && run_plan == state.plan_id { &state.inputs } else { &no_inputs };
        let outcome = bridge::execute_run(service, &run_goal, inputs, AdapterKind::Agent, origin).await?;
        let bridge_state = outcome.state;
        records.event(
            service.now(),
            &ControllerEvent::BridgeRunFinished(BridgeRunFinished {
                iteration,
                bridge_run_id: bridge_state.run_id.clone(),
                status: bridge_state.status,
                agent_final_status: bridge_state.agent_final_status,
                exit_code: bridge_state.exit_code,
            }),
        )?;
        state.iterations += 1;
        state.linked_runs.push(LinkedRun {
            bridge_run_id: bridge_state.run_id.clone(),
            agent_run_id: agent_run_id(&bridge_state.run_id),
        });
        // An agent run paused at an approval gate, or asking a question, is
        // neither a success nor a failure: the controller stops and hands it
        // to a person (`POST /runs/{bridge_run_id}/approve` or `/answer`).
        let waiting = bridge_state.status.waits_for_a_person();
        let waiting_input = bridge_state.status == BridgeStatus::WaitingInput;
        let failed = !waiting && bridge_state.status != BridgeStatus::Done;
        state.bridge_results.push(BridgeResult {
            iteration,
            bridge_run_id: bridge_state.run_id,
            plan_id: run_plan,
            goal: run_goal.clone(),
            recovery_rule,
            status: bridge_state.status,
            exit_code: bridge_state.exit_code,
            agent_run_id: bridge_state.agent_run_id,
            agent_final_status: bridge_state.agent_final_status,
            failure_class: outcome.failure_class,
            error: bridge_state.error,
        });
        if waiting {
            state.updated_at = service.now();
            records.save(&state)?;
            break if waiting_input {
                ControllerStopReason::WaitingInput
            } else {
                ControllerStopReason::WaitingApproval
            };
        }
        if failed {
            state.consecutive_failures += 1;
            let failed = Failed {
                goal: &state.goal,
                current_goal: &state.current_goal,
                recovery_attempted: state.recovery_attempted,
                iteration,
                failure_class: outcome.failure_class,
            };
            if let Some(recovery) = consider_recovery(service, &mut records, failed)? {
                state.current_goal = recovery.goal.clone();
                state.recovery_attempted = true;
                state.recovery = Some(recovery);
                recovery_pending = true;
            }
        } else {
            state.consecutive_failures = 0;
        }
        state.updated_at = service.now();
        records.save(&state)?;
        iteration += 1;
    };
    finish(service, &mut records, state, stop_reason)
}

/// The closed set the next decision chooses from: only `stop` after a run
/// that is done (the agent run ended `done`, so its plan's `[verify]`
/// held); else `run_plan` with the plan the user's goal routes to (the
/// agent adapter routes the same goal the same way), for that goal, and,
/// once a recovery rule applied, the plan its rewrite routes to, for the
/// rewritten goal, under the rule (the same entry when it is that plan);
/// when the user's goal routes to no plan, only `stop`.
fn offer(service: &Service, state: &ControllerState) -> Choices {
    if let Some(last) = state.bridge_results.last()
        && last.status == BridgeStatus::Done
        && last.agent_final_status.is_none_or(|status| status == RunStatus::Done)
    {
        return Choices::stop_only("the last run is done and verified");
    }
    let catalog = &service.adapters.agent.catalog;
    let goal_plan = match select(catalog, &state.goal) {
        Ok((plan, _policy)) => plan,
        Err(why) => return Choices::stop_only(why),
    };
    let mut plans = vec![OfferedPlan::new(&goal_plan.id, &goal_plan.description, &state.goal)];
    if let Some(recovery) = &state.recovery
        && let Some(plan) = catalog.plans.iter().find(|plan| plan.id == recovery.plan_id)
    {
        let offered = OfferedPlan {
            recovery_rule: Some(recovery.rule_id.clone()),
            ..OfferedPlan::new(&plan.id, &plan.description, &recovery.goal)
        };
        if plan.id == goal_plan.id {
            plans[0] = offered;
        } else {
            plans.push(offered);
        }
    }
    Choices::run_one_of_or_stop(plans)
}

fn finish(
    service: &Service,
    records: &mut RecordWriter,
    mut state: ControllerState,
    stop_reason: ControllerStopReason,
) -> Result<ControllerState, ServiceError> {
    // The outcome for the user's goal: its plan's last run. A substitute
    // (another plan, run under a recovery rule) is recorded, never taken.
    let goal_plan = state.plan_id.as_deref();
    let own = state.bridge_results.iter().rev().find(|result| result.plan_id.as_deref() == goal_plan);
    let final_status = match own.map(|result| result.status) {
        Some(BridgeStatus::Done) => ControllerStatus::Done,
        Some(BridgeStatus::WaitingApproval) => ControllerStatus::WaitingApproval,
        Some(BridgeStatus::WaitingInput) => ControllerStatus::WaitingInput,
        _ => ControllerStatus::Failed,
    };
    if let Some(last) = state.bridge_results.last()
        && last.plan_id.as_deref() != goal_plan
        && let (Some(own), Some(plan)) = (own, last.plan_id.as_deref())
    {
        state.error = Some(format!(
            "the goal's plan `{}` ended `{}`; plan `{plan}` ran in its place under recovery rule `{}` and ended \
             `{}`, which is not the goal's outcome",
            own.plan_id.as_deref().unwrap_or_default(),
            own.status.as_str(),
            last.recovery_rule.as_deref().unwrap_or_default(),
            last.status.as_str()
        ));
    }
    state.status = final_status;
    state.final_status = Some(final_status);
    state.stop_reason = Some(stop_reason.clone());
    state.updated_at = service.now();
    records.event(
        state.updated_at.clone(),
        &ControllerEvent::ControllerFinished(ControllerFinished {
            final_status,
            stop_reason,
            iterations: state.iterations,
            linked_runs: state.linked_runs.clone(),
        }),
    )?;
    records.save_last(&state)?;
    Ok(state)
}

/// Ends controller run `loaded` (its record held by `records`), which a
/// service stopped driving before it ended (status `running`): nothing more
/// is decided or run. `controller_interrupted`, then `controller_finished`:
/// `failed`, `stop_reason = "interrupted"`, and an `error` that says so and
/// names the bridge runs it started, which keep their own records (the
/// scan settles those on their own). `iterations` and `linked_runs` come
/// from the log, which can be ahead of the state the record held (under
/// group commit the checkpoints between a request's first and last are
/// kept in memory); the other fields stay as that state holds them.
pub fn settle_interrupted(
    service: &Service,
    mut records: RecordWriter,
    loaded: LoadedRecord,
) -> Result<ControllerState, ServiceError> {
    let mut state: ControllerState = serde_json::from_value(loaded.state).map_err(|error| StoreError::Tampered {
        id: records.id().to_string(),
        reason: format!("its state is not a controller run's state: {error}"),
    })?;
    let logged = |event_type: &'static str| loaded.audit.iter().filter(move |event| event.event_type == event_type);
    let linked_runs: Vec<LinkedRun> = logged("bridge_run_started")
        .filter_map(|event| {
            serde_json::from_value::<BridgeRunStarted>(serde_json::Value::Object(event.details.clone())).ok()
        })
        .map(|started| LinkedRun {
            agent_run_id: agent_run_id(&started.bridge_run_id),
            bridge_run_id: started.bridge_run_id,
        })
        .collect();
    let iterations = u32::try_from(logged("bridge_run_finished").count()).unwrap_or(u32::MAX);
    let mut reason = "interrupted: the service driving this controller run stopped before it ended; nothing more \
                      is decided or run"
        .to_string();
    if !linked_runs.is_empty() {
        let ids: Vec<&str> = linked_runs.iter().map(|run| run.bridge_run_id.as_str()).collect();
        reason.push_str(&format!(" (the bridge runs it started keep their own records: {})", ids.join(", ")));
    }
    let now = service.now();
    records.event(
        now.clone(),
        &ControllerEvent::ControllerInterrupted(ControllerInterrupted {
            iterations,
            linked_runs: linked_runs.clone(),
            reason: reason.clone(),
        }),
    )?;
    records.event(
        now.clone(),
        &ControllerEvent::ControllerFinished(ControllerFinished {
            final_status: ControllerStatus::Failed,
            stop_reason: ControllerStopReason::Interrupted,
            iterations,
            linked_runs: linked_runs.clone(),
        }),
    )?;
    state.status = ControllerStatus::Failed;
    state.final_status = Some(ControllerStatus::Failed);
    state.stop_reason = Some(ControllerStopReason::Interrupted);
    state.iterations = iterations;
    state.linked_runs = linked_runs;
    state.error = Some(reason);
    state.updated_at = now;
    records.save_last(&state)?;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::ControllerState;

    /// Every controller state the snapshots hold reads as a
    /// [`ControllerState`] and writes back to the same bytes.
    #[test]
    fn snapshot_states_read_as_the_type_and_keep_their_bytes() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots/server");
        let mut read = 0;
        for entry in std::fs::read_dir(&folder).expect("snapshots") {
            let path = entry.expect("entry").path();
            if !path.to_string_lossy().ends_with("@controller_state.json.snap") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("snapshot");
            let body = text.splitn(3, "---\n").nth(2).expect("a snapshot body");
            let sealed: serde_json::Value = serde_json::from_str(body).expect("json");
            let serde_json::Value::Object(mut payload) = sealed["payload"].clone() else { panic!("a payload") };
            // The store's checkpoint fields, which a loaded record's state leaves out.
            for field in ["state_version", "audit_seq", "audit_hash"] {
                payload.shift_remove(field);
            }
            let state: ControllerState = serde_json::from_value(payload.clone().into()).expect("a controller state");
            let written = serde_json::to_string(&state).expect("json");
            assert_eq!(written, serde_json::to_string(&payload).expect("json"), "{}", path.display());
            read += 1;
        }
        assert!(read >= 3, "only {read} controller states found in {}", folder.display());
    }
}
