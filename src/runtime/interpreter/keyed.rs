//! Keyed steps: the idempotency receipt around an effect, recovery after a
//! crash, conflicts, uncertain outcomes, and the crash test hook.
//!
//! Order for a first execution: intent receipt (`started`, durable) →
//! effect → receipt `done` with the result (durable) → the interpreter's
//! checkpoint. A crash between any two leaves evidence that tells `resume`
//! what happened (see `crate::store::ReceiptStore`).

use serde_json::{Map, Value, json};

use crate::model::{FailureClass, Step};
use crate::runtime::env::CrashPoint;
use crate::runtime::format_timestamp;
use crate::runtime::interpreter::{EventType, Interpreter, failure};
use crate::store::canonical::canonical_digest;
use crate::store::{Evidence, Receipt, ReceiptState, Reconciliation, StoreError};
use crate::template::Template;
use crate::tools::{ResolvedAction, ToolOutcome, ToolSuccess};

impl Interpreter<'_> {
    /// Runs a keyed step through its receipt: reuse, conflict, uncertainty
    /// or a first execution that records its receipt before the checkpoint.
    pub(super) fn keyed_execute(
        &mut self,
        step: &Step,
        key_template: &Template,
        action: &ResolvedAction,
        attempt: u32,
        approved: bool,
    ) -> Result<ToolOutcome, StoreError> {
        let Ok(key) = key_template.render(&self.outputs) else {
            return Ok(ToolOutcome::err(failure(
                FailureClass::TemplateError,
                format!("idempotency key `{}` could not be resolved", key_template.source()),
            )));
        };
        let action_json = serde_json::to_value(action).unwrap_or(Value::Null);
        let intent = intent_digest(step.action.kind(), &action_json, &key);
        let mut details = Map::new();
        details.insert("idempotency_key".into(), json!(key));
        details.insert("intent_digest".into(), json!(intent));
        // Outside recovery the receipt check is part of the write call.
        self.state.counters.tool_calls += 1;
        let existing = match self.receipts.get(&key) {
            Ok(existing) => existing,
            Err(error) => {
                return self.uncertain(step, &key, &intent, &action_json, format!("{error}"), details);
            }
        };
        if self.recovering {
            let mut lookup = Map::new();
            lookup.insert("idempotency_key".into(), json!(key));
            lookup.insert("found".into(), json!(existing.as_ref().map(|receipt| receipt.state)));
            self.emit(EventType::ReceiptLookup, Some(&step.id), Some("ok"), lookup)?;
        }
        match existing {
            Some(receipt) if receipt.intent_digest != intent => Ok(ToolOutcome::err_with(
                failure(
                    FailureClass::IdempotencyConflict,
                    format!(
                        "idempotency key `{key}` was already used for another action (step `{}` of run `{}`)",
                        receipt.step_id, receipt.run_id
                    ),
                ),
                details,
            )),
            Some(receipt) if receipt.state == ReceiptState::Started => {
                let reason = format!(
                    "an earlier attempt (run `{}`) started this write and never recorded its outcome",
                    receipt.run_id
                );
                self.uncertain(step, &key, &intent, &action_json, reason, details)
            }
            Some(receipt) => {
                let result = receipt.result.unwrap_or(Value::Null);
                let kind = if self.recovering { "recovered_from_receipt" } else { "reused_receipt" };
                details.insert("receipt".into(), json!(kind));
                self.state.evidence.push(Evidence {
                    kind: kind.to_string(),
                    step_id: Some(step.id.clone()),
                    passed: true,
                    detail: json!({"idempotency_key": key, "intent_digest": intent, "run_id": receipt.run_id}),
                });
                let mut event = Map::new();
                event.insert("idempotency_key".into(), json!(key));
                event.insert("recovered".into(), json!(self.recovering));
                self.emit(EventType::ReceiptReused, Some(&step.id), Some("ok"), event)?;
                let success = ToolSuccess {
                    output_text: result.get("output_text").and_then(Value::as_str).unwrap_or_default().to_string(),
                    output_json: result.get("output_json").cloned().filter(|value| !value.is_null()),
                };
                Ok(ToolOutcome { result: Ok(success), details })
            }
            None => {
                let now = format_timestamp(self.env.clock.now());
                let mut receipt = Receipt {
                    key: key.clone(),
                    intent_digest: intent.clone(),
                    state: ReceiptState::Started,
                    run_id: self.state.run_id.clone(),
                    step_id: step.id.clone(),
                    action: action_json.clone(),
                    result: None,
                    started_at: now,
                    completed_at: None,
                };
                self.put_receipt(&receipt)?;
                if self.recovering {
                    // The look-up found nothing: the effect is a call of its own.
                    self.state.counters.tool_calls += 1;
                }
                let outcome = self.tools.execute(action, attempt, self.timeout(step), approved);
                self.crash_hook(step, CrashPoint::BeforeReceipt);
                match &outcome.result {
                    Ok(success) => {
                        receipt.state = ReceiptState::Done;
                        receipt.result =
                            Some(json!({"output_text": success.output_text, "output_json": success.output_json}));
                        receipt.completed_at = Some(format_timestamp(self.env.clock.now()));
                        self.put_receipt(&receipt)?;
                        self.state.evidence.push(Evidence {
                            kind: "receipt".to_string(),
                            step_id: Some(step.id.clone()),
                            passed: true,
                            detail: json!({"idempotency_key": key, "intent_digest": intent}),
                        });
                        let mut event = Map::new();
                        event.insert("idempotency_key".into(), json!(key));
                        event.insert("intent_digest".into(), json!(intent));
                        self.emit(EventType::ReceiptRecorded, Some(&step.id), Some("ok"), event)?;
                        self.crash_hook(step, CrashPoint::AfterEffect);
                    }
                    Err(error) if error.class == FailureClass::ToolResultUncertain => {
                        let reason = error.message.clone();
                        return self.uncertain(step, &key, &intent, &action_json, reason, outcome.details);
                    }
                    Err(_) => {
                        // The tool reports a definite failure: nothing was
                        // applied, so the intent record goes and a retry may
                        // run the effect.
                        self.remove_receipt(&key)?;
                    }
                }
                let mut outcome = outcome;
                outcome.details.extend(details);
                Ok(outcome)
            }
        }
    }

    fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        self.receipts.put(receipt).map_err(|source| StoreError::Io {
            action: "write receipt in",
            path: self.workspace.root().join(".planrun/receipts"),
            source,
        })
    }

    fn remove_receipt(&self, key: &str) -> Result<(), StoreError> {
        self.receipts.remove(key).map_err(|source| StoreError::Io {
            action: "remove receipt in",
            path: self.workspace.root().join(".planrun/receipts"),
            source,
        })
    }

    /// A write whose outcome cannot be known: record what to check by hand
    /// and fail with `tool_result_uncertain` (never retried).
    fn uncertain(
        &mut self,
        step: &Step,
        key: &str,
        intent: &str,
        action: &Value,
        reason: String,
        details: Map<String, Value>,
    ) -> Result<ToolOutcome, StoreError> {
        let reconciliation = Reconciliation {
            step_id: step.id.clone(),
            idempotency_key: Some(key.to_string()),
            intent_digest: intent.to_string(),
            action: action.clone(),
            reason: reason.clone(),
            instructions: format!(
                "check by hand whether `{}` was applied; the receipt for key `{key}` is in `.planrun/receipts/`",
                serde_json::to_string(action).unwrap_or_default()
            ),
            recorded_at: format_timestamp(self.env.clock.now()),
        };
        let mut event = Map::new();
        event.insert("idempotency_key".into(), json!(key));
        event.insert("reason".into(), json!(reason));
        self.emit(EventType::ReconciliationRecorded, Some(&step.id), Some("uncertain"), event)?;
        self.state.reconciliation = Some(reconciliation);
        Ok(ToolOutcome::err_with(
            failure(FailureClass::ToolResultUncertain, format!("the outcome of this write is unknown: {reason}")),
            details,
        ))
    }

    /// The documented test hook: ends the process abruptly at `point` of
    /// the named step, as a crash would.
    pub(super) fn crash_hook(&self, step: &Step, point: CrashPoint) {
        if let Some(crash) = &self.env.crash_at
            && crash.step_id == step.id
            && crash.point == point
        {
            eprintln!("planrun: PLANRUN_CRASH_AT={}: aborting the process", step.id);
            std::process::abort();
        }
    }
}

/// SHA-256 of what a keyed step intends to do.
fn intent_digest(kind: &str, action: &Value, key: &str) -> String {
    let value = json!({"kind": kind, "action": action, "idempotency_key": key});
    canonical_digest(&value)
}
