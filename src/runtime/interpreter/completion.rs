//! Completion: a step's `expect` post-conditions ([`apply_expect`]) and the
//! plan's `[[verify]]` checks on fresh evidence ([`Verifier`]). A failed
//! check cannot produce `done`.

use serde_json::{Value, json};

use crate::confine::Workspace;
use crate::model::{
    EvidenceDetail, EvidenceKind, FailureClass, Plan, Policy, RetryPolicy, RunStatus, Step, StopReason, VerifyCheck,
};
use crate::runtime::event::{CheckOutcome, CompletionVerified, Event};
use crate::runtime::recorder::Recorder;
use crate::store::{Evidence, ReceiptError, ReceiptState, RunState, RunStore, StoreError};
use crate::tools::{ToolFailure, ToolOutcome, ToolSuccess, tickets};

use super::budgets::Budgets;

/// Runs the plan's `[[verify]]` checks when the run reaches its end.
pub(super) struct Verifier<'r> {
    plan: &'r Plan,
    checks: &'r [VerifyCheck],
    workspace: &'r Workspace,
    max_read_bytes: u64,
    retry: &'r RetryPolicy,
    /// The tool calls the checks cost (one attempt each).
    tool_calls: u64,
    /// The first step that may change the world: from it on, every attempt
    /// keeps the checks' tool calls in reserve.
    first_effect: Option<usize>,
}

impl<'r> Verifier<'r> {
    pub(super) fn new(plan: &'r Plan, policy: &'r Policy, workspace: &'r Workspace) -> Self {
        Verifier {
            plan,
            checks: &plan.verify,
            workspace,
            max_read_bytes: policy.files.max_read_bytes,
            retry: &policy.retry,
            tool_calls: plan.verify.iter().map(tool_calls).sum(),
            first_effect: plan.steps.iter().position(|step| step.action.may_change_the_world()),
        }
    }

    /// The tool calls an attempt of step `index` keeps in reserve for the
    /// checks: all of them from the first step that may change the world
    /// on, so that no effect runs (and nothing after one spends the calls)
    /// unless the completion that verifies it fits in `max_tool_calls`.
    pub(super) fn reserved_by(&self, index: usize) -> u64 {
        if self.first_effect.is_some_and(|first| index >= first) { self.tool_calls } else { 0 }
    }

    /// The tool calls the checks cost.
    pub(super) fn calls(&self) -> u64 {
        self.tool_calls
    }

    /// Every check against fresh evidence now, recorded nowhere: what an
    /// agent step's `finish` must pass before the step may end.
    pub(super) fn check_fresh(
        &self,
        state: &mut RunState,
        receipts: &dyn RunStore,
    ) -> Result<Vec<CheckOutcome>, StoreError> {
        self.checks.iter().map(|check| self.verify(check, state, receipts, None)).collect()
    }

    /// The run reached its end (`reason`): `[[verify]]` decides whether it
    /// is `done`.
    pub(super) fn complete(
        &self,
        reason: StopReason,
        state: &mut RunState,
        recorder: &mut Recorder<'_>,
        receipts: &dyn RunStore,
        budgets: &Budgets<'_>,
    ) -> Result<(), StoreError> {
        if self.checks.is_empty() {
            recorder.end(state, RunStatus::Done, reason, None);
            return Ok(());
        }
        // The fresh look-ups are tool calls: when they do not all fit in
        // the budget none runs, and an unverified run cannot be `done`. A
        // run that changed nothing because its goal already held is
        // verified whatever the budget: refusing the look-ups would report
        // a failure for a goal that holds (their calls are still counted).
        let within_budget = reason != StopReason::AlreadySatisfied;
        if within_budget && let Some(exhausted) = budgets.tool_calls(state, self.tool_calls) {
            return exhausted.record(self.plan, state, recorder);
        }
        let mut checks = Vec::new();
        // The calls the checks after this one still need: a retry may not
        // spend them.
        let mut reserved = self.tool_calls;
        for check in self.checks {
            reserved -= tool_calls(check);
            let bound = within_budget.then_some(RetryBound { budgets, reserved });
            let outcome = self.verify(check, state, receipts, bound)?;
            // A struct of strings, a bool and a JSON value always serialises.
            let detail = EvidenceDetail::Other(serde_json::to_value(&outcome).unwrap_or(Value::Null));
            state.evidence.push(Evidence { kind: EvidenceKind::Verify, step_id: None, passed: outcome.passed, detail });
            checks.push(outcome);
        }
        let failed: Vec<&str> = checks.iter().filter(|check| !check.passed).map(|check| check.check.as_str()).collect();
        let message = (!failed.is_empty()).then(|| format!("completion could not be verified: {}", failed.join("; ")));
        recorder.emit(Event::CompletionVerified(CompletionVerified { passed: message.is_none(), checks }))?;
        match message {
            None => recorder.end(state, RunStatus::Done, reason, None),
            Some(message) => recorder.end(state, RunStatus::Failed, StopReason::VerificationFailed, Some(message)),
        }
        Ok(())
    }

    /// One verifier check against fresh evidence; a store that cannot be
    /// asked for a receipt stops the run (as any store failure does)
    /// instead of failing the check. `bound` limits the retries of a
    /// look-up (`None`: not bounded by `max_tool_calls`).
    fn verify(
        &self,
        check: &VerifyCheck,
        state: &mut RunState,
        receipts: &dyn RunStore,
        bound: Option<RetryBound<'_, '_>>,
    ) -> Result<CheckOutcome, StoreError> {
        let max_bytes = self.max_read_bytes;
        match check {
            VerifyCheck::File { path, contains } => {
                state.counters.tool_calls += 1;
                let label = match contains {
                    Some(text) => format!("file `{path}` contains {text:?}"),
                    None => format!("file `{path}` exists"),
                };
                let (passed, observed) = match crate::tools::read_file(self.workspace, path, max_bytes) {
                    Ok(content) => {
                        let passed = contains.as_ref().is_none_or(|text| content.contains(text.as_str()));
                        (passed, json!(format!("{} bytes", content.len())))
                    }
                    Err(error) => (false, json!(error.to_string())),
                };
                Ok(check_outcome(label, passed, observed, "fresh_read"))
            }
            VerifyCheck::TicketStatus { ticket_id, equals } => {
                let label = format!("ticket `{ticket_id}` status is {equals:?}");
                let looked_up = self.look_up(state, bound, || tickets::lookup(self.workspace, ticket_id, max_bytes));
                let (passed, observed) = match looked_up {
                    Ok(success) => {
                        let status = success.output_json.as_ref().and_then(|json| json.get("status")).cloned();
                        let close_count =
                            success.output_json.as_ref().and_then(|json| json.get("close_count")).cloned();
                        (
                            status.as_ref().and_then(Value::as_str) == Some(equals.as_str()),
                            json!({"status": status, "close_count": close_count}),
                        )
                    }
                    Err(error) => (false, json!(error.message)),
                };
                Ok(check_outcome(label, passed, observed, "fresh_lookup"))
            }
            VerifyCheck::Receipt { step } => {
                let label = format!("receipt of step `{step}` matches its intent");
                let recorded =
                    state.evidence.iter().rev().find(|evidence| {
                        evidence.step_id.as_deref() == Some(step.as_str()) && evidence.kind.is_receipt()
                    });
                let Some(recorded) = recorded else {
                    let satisfied =
                        state.evidence.iter().any(|evidence| evidence.kind == EvidenceKind::AlreadySatisfied);
                    let observed = if satisfied {
                        "not applicable: the goal already held, the step did not run"
                    } else {
                        "the step recorded no receipt"
                    };
                    return Ok(check_outcome(label, satisfied, json!(observed), "receipt_store"));
                };
                let (key, intent) = recorded.detail.receipt_binding().unwrap_or_default();
                let (key, intent) = (key.unwrap_or_default().to_string(), intent.to_string());
                let (passed, observed) = match receipts.get_receipt(&key) {
                    Ok(Some(receipt)) => (
                        receipt.state == ReceiptState::Done && receipt.intent_digest == intent,
                        json!({"state": receipt.state, "intent_digest": receipt.intent_digest}),
                    ),
                    Ok(None) => (false, json!("no receipt")),
                    Err(ReceiptError::Store(error)) => return Err(*error),
                    Err(error) => (false, json!(error.to_string())),
                };
                Ok(check_outcome(label, passed, observed, "receipt_store"))
            }
        }
    }
}

/// What a verifier look-up's retries must stay within: `max_tool_calls`,
/// with the calls the later checks need kept in reserve.
#[derive(Clone, Copy)]
struct RetryBound<'b, 'c> {
    budgets: &'b Budgets<'c>,
    reserved: u64,
}

impl Verifier<'_> {
    /// A fresh look-up in the ticket system, retried as the policy's
    /// `[retry]` retries a step's failure of the same class (a transient
    /// `execution_error`), each attempt one tool call; a retry that would
    /// exceed `max_tool_calls` is not made and the last failure stands.
    fn look_up(
        &self,
        state: &mut RunState,
        bound: Option<RetryBound<'_, '_>>,
        call: impl Fn() -> Result<ToolSuccess, ToolFailure>,
    ) -> Result<ToolSuccess, ToolFailure> {
        let mut attempt = 1;
        loop {
            state.counters.tool_calls += 1;
            let result = call();
            let Err(failure) = &result else {
                return result;
            };
            let retry_allowed = attempt < self.retry.attempts_for(failure.class, None);
            let over_budget = bound.is_some_and(|bound| bound.budgets.tool_calls(state, 1 + bound.reserved).is_some());
            if !retry_allowed || over_budget {
                return result;
            }
            attempt += 1;
        }
    }
}

/// The tool calls a verifier check costs: a fresh read or look-up is one;
/// the receipt check reads the run's own receipt store.
fn tool_calls(check: &VerifyCheck) -> u64 {
    match check {
        VerifyCheck::File { .. } | VerifyCheck::TicketStatus { .. } => 1,
        VerifyCheck::Receipt { .. } => 0,
    }
}

fn check_outcome(check: String, passed: bool, observed: Value, source: &str) -> CheckOutcome {
    CheckOutcome { check, passed, observed, source: source.to_string() }
}

/// Applies a step's `expect` post-conditions to its outcome. A refused
/// output stays in the failure, so that the attempt's record shows what
/// failed the check.
pub(super) fn apply_expect(step: &Step, mut outcome: ToolOutcome) -> ToolOutcome {
    let Some(expect) = &step.expect else {
        return outcome;
    };
    let refuse = |success: ToolSuccess, message: String| ToolFailure {
        class: FailureClass::VerificationFailed,
        message,
        output_text: success.output_text,
    };
    let exit_code = outcome.facts.exit_code().map(i64::from);
    if let Some(expected) = expect.accepted_exit_codes() {
        let accepted = exit_code.is_some_and(|code| expected.iter().any(|want| i64::from(*want) == code));
        let expected = match expected.as_slice() {
            [one] => one.to_string(),
            many => format!("one of {}", many.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")),
        };
        outcome.result = match outcome.result {
            Err(failure) if accepted && failure.class == FailureClass::ExecutionError => {
                Ok(ToolSuccess { output_text: failure.output_text, output_json: None })
            }
            Ok(success) if !accepted => Err(refuse(
                success,
                format!(
                    "expected exit code {expected}, got {}",
                    exit_code.map_or("none".to_string(), |code| code.to_string())
                ),
            )),
            other => other,
        };
    }
    outcome.result = outcome.result.and_then(|success| {
        let text = success.output_text.as_str();
        let broken = if let Some(needle) = &expect.output_contains
            && !text.contains(needle.as_str())
        {
            Some(format!("expected the output to contain {needle:?}"))
        } else if let Some(regex) = &expect.output_matches
            && !regex.is_match(text)
        {
            Some(format!("expected the output to match /{}/", regex.as_str()))
        } else {
            None
        };
        match broken {
            Some(message) => Err(refuse(success, message)),
            None => Ok(success),
        }
    });
    outcome
}
