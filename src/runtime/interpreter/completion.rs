//! Completion: a step's `expect` post-conditions ([`apply_expect`]) and the
//! plan's `[[verify]]` checks on fresh evidence ([`Verifier`]). A failed
//! check cannot produce `done`.

use serde_json::{Value, json};

use crate::confine::Workspace;
use crate::model::{FailureClass, Plan, Policy, RunStatus, Step, VerifyCheck};
use crate::runtime::event::{CheckOutcome, CompletionVerified, Event};
use crate::runtime::recorder::Recorder;
use crate::store::{Evidence, ReceiptError, ReceiptState, RunState, RunStore, StoreError};
use crate::tools::{ToolFailure, ToolOutcome, ToolSuccess, tickets};

use super::budgets::Budgets;
use super::idempotency::RECEIPT_EVIDENCE;

/// Runs the plan's `[[verify]]` checks when the run reaches its end.
pub(super) struct Verifier<'r> {
    plan: &'r Plan,
    checks: &'r [VerifyCheck],
    workspace: &'r Workspace,
    max_read_bytes: u64,
}

impl<'r> Verifier<'r> {
    pub(super) fn new(plan: &'r Plan, policy: &Policy, workspace: &'r Workspace) -> Self {
        Verifier { plan, checks: &plan.verify, workspace, max_read_bytes: policy.files.max_read_bytes }
    }

    /// The run reached its end (`reason`): `[[verify]]` decides whether it
    /// is `done`.
    pub(super) fn complete(
        &self,
        reason: &str,
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
        // the budget none runs, and an unverified run cannot be `done`.
        let needed = self.checks.iter().map(tool_calls).sum();
        if let Some(exhausted) = budgets.tool_calls(state, needed) {
            return exhausted.record(self.plan, state, recorder);
        }
        let mut checks = Vec::new();
        for check in self.checks {
            let outcome = self.verify(check, state, receipts)?;
            // A struct of strings, a bool and a JSON value always serialises.
            let detail = serde_json::to_value(&outcome).unwrap_or(Value::Null);
            state.evidence.push(Evidence { kind: "verify".to_string(), step_id: None, passed: outcome.passed, detail });
            checks.push(outcome);
        }
        let failed: Vec<&str> = checks.iter().filter(|check| !check.passed).map(|check| check.check.as_str()).collect();
        let message = (!failed.is_empty()).then(|| format!("completion could not be verified: {}", failed.join("; ")));
        recorder.emit(Event::CompletionVerified(CompletionVerified { passed: message.is_none(), checks }))?;
        match message {
            None => recorder.end(state, RunStatus::Done, reason, None),
            Some(message) => recorder.end(state, RunStatus::Failed, "verification_failed", Some(message)),
        }
        Ok(())
    }

    /// One verifier check against fresh evidence; a store that cannot be
    /// asked for a receipt stops the run (as any store failure does)
    /// instead of failing the check.
    fn verify(
        &self,
        check: &VerifyCheck,
        state: &mut RunState,
        receipts: &dyn RunStore,
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
                state.counters.tool_calls += 1;
                let label = format!("ticket `{ticket_id}` status is {equals:?}");
                let (passed, observed) = match tickets::lookup(self.workspace, ticket_id, max_bytes) {
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
                let recorded = state.evidence.iter().rev().find(|evidence| {
                    evidence.step_id.as_deref() == Some(step.as_str())
                        && RECEIPT_EVIDENCE.contains(&evidence.kind.as_str())
                });
                let Some(recorded) = recorded else {
                    let satisfied = state.evidence.iter().any(|evidence| evidence.kind == "already_satisfied");
                    let observed = if satisfied {
                        "not applicable: the goal already held, the step did not run"
                    } else {
                        "the step recorded no receipt"
                    };
                    return Ok(check_outcome(label, satisfied, json!(observed), "receipt_store"));
                };
                let key = recorded.detail["idempotency_key"].as_str().unwrap_or_default().to_string();
                let intent = recorded.detail["intent_digest"].as_str().unwrap_or_default().to_string();
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
    let exit_code = outcome.details.get("exit_code").and_then(Value::as_i64);
    if let Some(expected) = expect.exit_code {
        let accepted = exit_code == Some(i64::from(expected));
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
