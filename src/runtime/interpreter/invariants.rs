//! The semantic invariants of a loaded run: does the verified record tell a
//! story the plan could have produced? The store checks each record's seal
//! and shape; only the plan knows which story is possible, and with a plain
//! SHA-256 seal anyone who can write the files can re-seal them, so these
//! checks are the defence there (issue 8 item 6).
//!
//! - every step before the cursor has a final record (done or skipped) in
//!   the verified history: the evidence path is complete;
//! - waiting ⇒ the frozen action is exactly the plan's step at the cursor
//!   rendered from the verified history (its fingerprint recomputed), and
//!   the observations its `when` condition and templates read are there,
//!   and an approval on record names exactly that action (fingerprint,
//!   scope, state version);
//! - done ⇒ every `[[verify]]` check left its evidence, `already_satisfied`
//!   has its own, and every keyed write that ran has receipt evidence bound
//!   to the intent digest of the action its record says ran;
//! - an ended run has no pending action; a pending action names its step.

use std::collections::HashMap;

use crate::model::{EvidenceKind, OnFailure, Plan, RunStatus, StopReason};
use crate::store::{RunState, StepRecord, StepRecordStatus, StoreError};

use super::gate::Frozen;
use super::idempotency::intent_digest;
use super::outputs::Outputs;
use super::render::render_action;

/// Checks that `state` and its verified `history` tell a story `plan` could
/// have produced; a violation is [`StoreError::Tampered`] naming every
/// check that failed (`; ` between them), and nothing runs.
pub fn check_story(plan: &Plan, state: &RunState, history: &[StepRecord]) -> Result<(), StoreError> {
    let violations = story(plan, state, history);
    if violations.is_empty() {
        return Ok(());
    }
    Err(StoreError::Tampered {
        id: state.run_id.clone(),
        reason: format!(
            "the records do not tell a story the plan `{}` could produce: {}",
            plan.id,
            violations.join("; ")
        ),
    })
}

/// Every check the story fails, in order.
fn story(plan: &Plan, state: &RunState, history: &[StepRecord]) -> Vec<String> {
    let mut violations = Vec::new();
    if let Some(pending) = &state.pending_action {
        if pending.step_id.is_empty() {
            violations.push("`pending_action.step_id` is empty".to_string());
        }
        if state.status.is_terminal() {
            violations.push(format!("a pending action on a run that ended `{}`", state.status));
        }
    }
    let last = last_records(history);
    let cursor = state.cursor.next_step;
    for step in plan.steps.iter().take(cursor) {
        match last.get(step.id.as_str()).map(|record| record.status) {
            Some(StepRecordStatus::Done | StepRecordStatus::Skipped) => {}
            // A step that says `on_failure = "continue"` may have failed
            // when the state names it among its failed steps.
            Some(StepRecordStatus::Failed)
                if step.on_failure == OnFailure::Continue && state.failed_steps.contains(&step.id) => {}
            Some(StepRecordStatus::Failed) => {
                violations.push(format!("step `{}` is before the cursor but its last record failed", step.id));
            }
            None => violations.push(format!("step `{}` is before the cursor but has no record", step.id)),
        }
    }
    for id in &state.failed_steps {
        let continued = plan.steps.iter().take(cursor).any(|step| {
            step.id == *id
                && step.on_failure == OnFailure::Continue
                && last.get(id.as_str()).is_some_and(|record| record.status == StepRecordStatus::Failed)
        });
        if !continued {
            violations.push(format!(
                "`failed_steps` names `{id}`, which is not a failed `on_failure = \"continue\"` step before the cursor"
            ));
        }
    }
    let by_status = match state.status {
        RunStatus::WaitingApproval => waiting(plan, state, history),
        RunStatus::WaitingInput => super::agent::check_asking(plan, state),
        RunStatus::Done => done(plan, state, &last),
        _ => Ok(()),
    };
    violations.extend(by_status.err());
    violations
}

/// The last record of each step id.
fn last_records(history: &[StepRecord]) -> HashMap<&str, &StepRecord> {
    history.iter().map(|record| (record.step_id.as_str(), record)).collect()
}

/// The frozen action is the plan's step at the cursor, re-rendered from the
/// verified history.
fn waiting(plan: &Plan, state: &RunState, history: &[StepRecord]) -> Result<(), String> {
    let Some(pending) = &state.pending_action else {
        return Err("`waiting_approval` without a pending action".to_string());
    };
    let index = state.cursor.next_step;
    let Some(step) = plan.steps.get(index).filter(|step| step.id == pending.step_id) else {
        return Err(format!("the pending step `{}` is not step {} of the plan", pending.step_id, index + 1));
    };
    if matches!(step.action, crate::model::Action::Agent(_)) {
        return super::agent::check_waiting(state, step, pending);
    }
    let mut outputs = Outputs::restored(plan, &state.run_id, history);
    outputs.set_run_data(state.goal.clone(), state.inputs.clone());
    if let Some(condition) = &step.when {
        let evaluation = condition.evaluate(&outputs).map_err(|error| {
            format!("the condition of step `{}` cannot be evaluated from the verified record: {error}", step.id)
        })?;
        if !evaluation.holds {
            return Err(format!(
                "the condition of step `{}` does not hold on the verified record, so it could not have paused",
                step.id
            ));
        }
    }
    let action = render_action(step, &outputs).map_err(|failure| {
        format!("step `{}` cannot be rendered from the verified record: {}", step.id, failure.message)
    })?;
    let frozen = Frozen::of(step, &action, &outputs);
    let same = pending.kind == step.action.kind()
        && pending.action == frozen.action
        && pending.idempotency_key == frozen.key
        && pending.risk == frozen.risk
        && pending.scope == frozen.scope
        && pending.fingerprint == frozen.fingerprint;
    if !same {
        return Err(format!(
            "the frozen action of step `{}` (fingerprint `{}`) is not the plan's step rendered from the verified record (`{}`)",
            step.id, pending.fingerprint, frozen.fingerprint
        ));
    }
    // `approve` binds an approval to exactly the frozen action.
    if let Some(approval) = &state.approval
        && (approval.fingerprint != pending.fingerprint
            || approval.scope != pending.scope
            || approval.state_version != pending.state_version)
    {
        return Err(format!(
            "the approval (fingerprint `{}`, scope `{}`, state version {}) is not bound to the frozen action of step `{}`",
            approval.fingerprint, approval.scope, approval.state_version, step.id
        ));
    }
    Ok(())
}

/// A `done` run's evidence path is complete and bound to what ran.
fn done(plan: &Plan, state: &RunState, last: &HashMap<&str, &StepRecord>) -> Result<(), String> {
    let count = |kind: EvidenceKind| state.evidence.iter().filter(|evidence| evidence.kind == kind).count();
    if count(EvidenceKind::Verify) != plan.verify.len() {
        return Err(format!(
            "a `done` run with {} verify evidence for the plan's {} `[[verify]]` checks",
            count(EvidenceKind::Verify),
            plan.verify.len()
        ));
    }
    let satisfied = state.stop_reason == Some(StopReason::AlreadySatisfied);
    if satisfied && count(EvidenceKind::AlreadySatisfied) == 0 {
        return Err("a run `done` as `already_satisfied` without that evidence".to_string());
    }
    if state.stop_reason == Some(StopReason::EndOfPlan) && state.cursor.next_step != plan.steps.len() {
        return Err(format!("a run `done` at the end of the plan with its cursor at step {}", state.cursor.next_step));
    }
    for step in plan.steps.iter().filter(|step| step.idempotency_key.is_some()) {
        let Some(record) = last.get(step.id.as_str()).filter(|record| record.status == StepRecordStatus::Done) else {
            continue;
        };
        let key = record.details.idempotency_key();
        let (Some(key), Some(action)) = (key, &record.action) else {
            return Err(format!("the keyed step `{}` ran without its idempotency key on record", step.id));
        };
        let intent = intent_digest(&record.kind, action, key);
        let bound = state.evidence.iter().any(|evidence| {
            evidence.step_id.as_deref() == Some(step.id.as_str())
                && evidence.kind.is_receipt()
                && evidence.detail.receipt_binding() == Some((Some(key), intent.as_str()))
        });
        if !bound {
            return Err(format!(
                "the keyed step `{}` ran but no receipt evidence is bound to its intent `{intent}`",
                step.id
            ));
        }
    }
    Ok(())
}
