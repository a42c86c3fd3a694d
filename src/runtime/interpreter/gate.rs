//! The approval gate of a planned step: who requires a person's approval
//! of its resolved action ([`approval_required_by`], shared with `planrun
//! replay`), what a pause freezes of the action and its fingerprint
//! ([`Frozen`], shared with the story check of a loaded run), and the pause
//! itself.

use serde_json::Value;

use crate::model::{Decision, RunStatus, Step};
use crate::runtime::approval::fingerprint;
use crate::runtime::event::{ApprovalRequested, Event};
use crate::runtime::format_timestamp;
use crate::store::{PendingAction, StoreError};
use crate::tools::ResolvedAction;

use super::attempt::Attempt;
use super::outputs::Outputs;

impl Attempt<'_, '_> {
    /// Freezes the resolved action for approval and pauses the run.
    pub(super) fn freeze(
        &mut self,
        step: &Step,
        action: &ResolvedAction,
        required_by: String,
    ) -> Result<(), StoreError> {
        let Frozen { action: action_json, key, risk, scope, fingerprint: print } =
            Frozen::of(step, action, self.outputs);
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
            provenance: Vec::new(),
        };
        self.recorder.emit(Event::ApprovalRequested(ApprovalRequested {
            step_id: step.id.clone(),
            fingerprint: print,
            scope,
            risk,
            required_by,
            state_version: pending.state_version,
            action: action_json,
        }))?;
        self.state.pending_action = Some(pending);
        self.state.status = RunStatus::WaitingApproval;
        Ok(())
    }
}

/// Who requires a person's approval before a planned step's resolved
/// action runs, given the policy's decision on it: the step (`approval =
/// "required"`), a rule that says `prompt` (`policy`), or nobody.
pub(crate) fn approval_required_by(step: &Step, decision: Decision) -> Option<&'static str> {
    if step.approval {
        Some("step")
    } else if decision == Decision::Prompt {
        Some("policy")
    } else {
        None
    }
}

/// What a pause freezes of a resolved action, and its fingerprint: built
/// the same way when the action is frozen and when a loaded run's story is
/// checked against the plan.
pub(super) struct Frozen {
    pub(super) action: Value,
    pub(super) key: Option<String>,
    pub(super) risk: String,
    pub(super) scope: String,
    pub(super) fingerprint: String,
}

impl Frozen {
    pub(super) fn of(step: &Step, action: &ResolvedAction, outputs: &Outputs) -> Self {
        let action_json = serde_json::to_value(action).unwrap_or(Value::Null);
        // Keys are literal or built from `run.id` only (the loader checks),
        // so rendering cannot fail; a failure yields no key, and the step
        // then fails closed when it runs.
        let key = step.idempotency_key.as_ref().and_then(|key| key.render(outputs).ok());
        let risk = step.risk().as_str().to_string();
        let scope = action.scope();
        let fingerprint = fingerprint(step.action.kind(), &action_json, &risk, key.as_deref(), &scope);
        Frozen { action: action_json, key, risk, scope, fingerprint }
    }
}
