//! [`Idempotency`]: the receipt around a keyed step's effect, recovery after
//! a crash, conflicts, uncertain outcomes, and the crash test hook.
//!
//! Order for a first execution: intent receipt (`started`, durable) →
//! effect → receipt `done` with the result (durable) → the interpreter's
//! checkpoint. A crash between any two leaves evidence that tells `resume`
//! what happened (see the store's `receipts.rs`, reached through
//! [`RunStore`]). Only the first attempt after a resume is *recovering*: it
//! looks its receipt up before anything runs and records the look-up.
//!
//! The effect's own answer comes first ([`Tools::vouch`]): the ticket system
//! keeps the receipt of a keyed close in `tickets.json`, written in the same
//! atomic write as the close, and is always asked; a keyed `write_file` is
//! asked by its target's digest when the runtime's note says only `started`
//! (or cannot be used). The runtime's note is validated (intent digest, a
//! `done` result of the right shape) before it is reused, and never stands
//! in for the effect's answer: the ticket system saying "not applied" runs
//! the close even over a `done` note. Only where neither can answer does
//! the step end `tool_result_uncertain` with a reconciliation record. A
//! keyed `http` request is the exception: its receiver de-duplicates by
//! the `Idempotency-Key` header, so one whose outcome was never recorded
//! is sent again under the same key ([`Vouch::SendAgainUnderKey`]).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::model::{
    EvidenceDetail, EvidenceKind, FailureClass, KeyedFacts, ReceiptEvidence, ReceiptResult, ReceiptUse, Step,
    ToolFacts, VouchedBy,
};
use crate::runtime::env::CrashPoint;
use crate::runtime::event::{Event, ReceiptLookup, ReceiptRecorded, ReceiptReused, ReconciliationRecorded};
use crate::runtime::recorder::Recorder;
use crate::runtime::{RuntimeEnv, format_timestamp};
use crate::store::canonical::canonical_digest;
use crate::store::{Evidence, Receipt, ReceiptError, ReceiptState, Reconciliation, RunState, RunStore, StoreError};
use crate::tools::{ActionKey, ResolvedAction, ToolOutcome, ToolSuccess, Tools, Vouch};

use super::outcome::{Attempted, failure};

/// The run store (for its receipts) and whether the run is recovering.
pub(super) struct Idempotency<'r> {
    store: Arc<dyn RunStore>,
    env: &'r RuntimeEnv,
    /// True until the first step attempt after a resume: keyed steps then
    /// consult their receipts before anything runs.
    recovering: bool,
}

impl<'r> Idempotency<'r> {
    pub(super) fn new(store: Arc<dyn RunStore>, env: &'r RuntimeEnv, recovering: bool) -> Self {
        Idempotency { store, env, recovering }
    }

    /// The store holding the receipts, for the `[[verify]]` receipt checks.
    pub(super) fn receipts(&self) -> &dyn RunStore {
        self.store.as_ref()
    }

    /// Whether `step`'s next attempt costs a receipt look-up (a tool call).
    pub(super) fn lookup_needed(&self, step: &Step) -> bool {
        self.recovering && step.idempotency_key.is_some()
    }

    /// The first attempt after a resume is over: later ones start fresh.
    pub(super) fn recovered(&mut self) {
        self.recovering = false;
    }

    /// Runs a keyed step through its receipts: the effect's own answer
    /// first where it keeps one (the ticket system always; a file by its
    /// digest when the runtime's note cannot settle it), then the runtime's
    /// validated note. Reuse, conflict, uncertainty, or a first execution
    /// that records its receipt before the checkpoint.
    pub(super) fn execute(
        &self,
        keyed_step: KeyedStep<'_>,
        state: &mut RunState,
        recorder: &mut Recorder<'_>,
        tools: &mut Tools<'_>,
        run: EffectRun,
    ) -> Result<Attempted, StoreError> {
        let KeyedStep { step, key, action } = keyed_step;
        let action_json = serde_json::to_value(action).unwrap_or(Value::Null);
        let intent = intent_digest(step.action.kind(), &action_json, &key);
        let mut facts = KeyedFacts::new(&key, &intent);
        let keyed = Keyed { step, key: &key, intent: &intent, action: &action_json };
        // Outside recovery the receipt check is part of the write call.
        state.counters.tool_calls += 1;
        let found = match self.store.get_receipt(&key) {
            // The store did not answer: the run stops as on any store
            // failure (nothing ran), never judging a receipt it could not read.
            Err(ReceiptError::Store(error)) => return Err(*error),
            found => found,
        };
        let found_state = found.as_ref().ok().and_then(|receipt| receipt.as_ref().map(|receipt| receipt.state));
        let note = Note::of(found, &intent, &action_json);
        let ask_effect = matches!(action, ResolvedAction::TicketClose { .. })
            || matches!(note, Note::Started(_) | Note::Unusable(_));
        let vouch = if ask_effect { tools.vouch(action, ActionKey { key: &key, intent: &intent }) } else { None };
        if self.recovering {
            recorder.emit(Event::ReceiptLookup(ReceiptLookup {
                step_id: step.id.clone(),
                idempotency_key: key.clone(),
                found: found_state,
                effect: vouch.as_ref().map(|vouch| vouch_name(vouch).to_string()),
            }))?;
        }
        let effect = || {
            tools.execute_keyed(
                action,
                ActionKey { key: &key, intent: &intent },
                run.attempt,
                run.timeout,
                run.approved,
            )
        };
        // Under the key the runtime's own `done` receipt is authentic (an
        // edited or forged one is refused when read): where the effect's
        // answer contradicts it, the effect's record was changed and
        // neither may be trusted into a second effect or a result.
        let authentic = self.env.sealer.is_keyed();
        match (vouch, note) {
            (Some(Vouch::NotApplied), Note::Done(receipt, _)) if authentic => {
                let reason = format!(
                    "the runtime's sealed receipt (run `{}`) says key `{key}` was applied, but the effect keeps no receipt of it",
                    receipt.run_id
                );
                self.uncertain(&keyed, reason, ToolFacts::None, Some(facts), state, recorder)
            }
            (Some(Vouch::Applied(success)), Note::Done(receipt, noted)) if authentic && success != noted => {
                let reason = format!(
                    "the effect's receipt for key `{key}` holds another result than the runtime's sealed receipt (run `{}`)",
                    receipt.run_id
                );
                self.uncertain(&keyed, reason, ToolFacts::None, Some(facts), state, recorder)
            }
            (Some(Vouch::Conflict(message)), _) => {
                Ok(Attempted::keyed_failure(failure(FailureClass::IdempotencyConflict, message), facts))
            }
            (_, Note::OtherIntent(receipt)) => Ok(Attempted::keyed_failure(
                failure(
                    FailureClass::IdempotencyConflict,
                    format!(
                        "idempotency key `{key}` was already used for another action (step `{}` of run `{}`)",
                        receipt.step_id, receipt.run_id
                    ),
                ),
                facts,
            )),
            // An `http` request whose outcome was never recorded: sent
            // again with the same `Idempotency-Key`; the server that
            // honours the header answers without applying it twice.
            (Some(Vouch::SendAgainUnderKey), _) => self.first_execution(&keyed, facts, state, recorder, effect),
            (Some(Vouch::Applied(success)), note) => {
                let noted = match note {
                    Note::Done(receipt, _) => Some(receipt),
                    _ => None,
                };
                facts.vouched_by = Some(vouched_by(action));
                self.reuse(&keyed, success, noted, facts, state, recorder)
            }
            (Some(Vouch::NotApplied), _) | (Some(Vouch::CannotAnswer(_)) | None, Note::None) => {
                self.first_execution(&keyed, facts, state, recorder, effect)
            }
            (Some(Vouch::CannotAnswer(reason)), _) | (None, Note::Unusable(reason)) => {
                self.uncertain(&keyed, reason, ToolFacts::None, Some(facts), state, recorder)
            }
            (None, Note::Started(receipt)) => {
                let reason = format!(
                    "an earlier attempt (run `{}`) started this write and never recorded its outcome",
                    receipt.run_id
                );
                self.uncertain(&keyed, reason, ToolFacts::None, Some(facts), state, recorder)
            }
            (None, Note::Done(receipt, success)) => self.reuse(&keyed, success, Some(receipt), facts, state, recorder),
        }
    }

    /// The effect is already applied: its result is reused, the effect is
    /// not repeated. `noted` is the runtime's `done` receipt; an effect
    /// vouched for without one gets it now, for the `[[verify]]` receipt
    /// check. The `receipt_reused` event names the receipt by its link.
    fn reuse(
        &self,
        keyed: &Keyed<'_>,
        success: ToolSuccess,
        noted: Option<Receipt>,
        mut facts: KeyedFacts,
        state: &mut RunState,
        recorder: &mut Recorder<'_>,
    ) -> Result<Attempted, StoreError> {
        let Keyed { step, key, intent, action } = *keyed;
        let receipt = match noted {
            Some(receipt) => receipt,
            None => {
                let now = format_timestamp(self.env.clock.now());
                let receipt = Receipt {
                    key: key.to_string(),
                    intent_digest: intent.to_string(),
                    state: ReceiptState::Done,
                    run_id: state.run_id.clone(),
                    step_id: step.id.clone(),
                    action: action.clone(),
                    result: Some(result_json(&success)),
                    started_at: now.clone(),
                    completed_at: Some(now),
                };
                self.put_receipt(recorder, &receipt)?;
                receipt
            }
        };
        let run_id = receipt.run_id.clone();
        let used = if self.recovering { ReceiptUse::RecoveredFromReceipt } else { ReceiptUse::ReusedReceipt };
        let kind = match used {
            ReceiptUse::RecoveredFromReceipt => EvidenceKind::RecoveredFromReceipt,
            ReceiptUse::ReusedReceipt => EvidenceKind::ReusedReceipt,
        };
        facts.receipt = Some(used);
        state.evidence.push(Evidence {
            kind,
            step_id: Some(step.id.clone()),
            passed: true,
            detail: EvidenceDetail::Receipt(ReceiptEvidence {
                idempotency_key: key.to_string(),
                intent_digest: intent.to_string(),
                run_id: Some(run_id),
            }),
        });
        recorder.emit(Event::ReceiptReused(ReceiptReused {
            step_id: step.id.clone(),
            idempotency_key: key.to_string(),
            recovered: self.recovering,
            receipt_link: self.link(&receipt)?,
        }))?;
        let outcome = ToolOutcome { result: Ok(success), facts: ToolFacts::None, stderr_text: None };
        Ok(Attempted { outcome, keyed: Some(facts) })
    }

    /// No receipt yet: intent receipt, effect, completed receipt.
    fn first_execution(
        &self,
        keyed: &Keyed<'_>,
        facts: KeyedFacts,
        state: &mut RunState,
        recorder: &mut Recorder<'_>,
        effect: impl FnOnce() -> ToolOutcome,
    ) -> Result<Attempted, StoreError> {
        let Keyed { step, key, intent, action } = *keyed;
        let now = format_timestamp(self.env.clock.now());
        let mut receipt = Receipt {
            key: key.to_string(),
            intent_digest: intent.to_string(),
            state: ReceiptState::Started,
            run_id: state.run_id.clone(),
            step_id: step.id.clone(),
            action: action.clone(),
            result: None,
            started_at: now,
            completed_at: None,
        };
        self.put_receipt(recorder, &receipt)?;
        if self.recovering {
            // The look-up found nothing: the effect is a call of its own.
            state.counters.tool_calls += 1;
        }
        // Writing the intent took a round trip: the lease must still hold
        // when the effect starts.
        recorder.may_act()?;
        crash_hook(self.env, step, CrashPoint::BeforeEffect);
        let outcome = effect();
        crash_hook(self.env, step, CrashPoint::BeforeReceipt);
        match &outcome.result {
            Ok(success) => {
                receipt.state = ReceiptState::Done;
                receipt.result = Some(result_json(success));
                receipt.completed_at = Some(format_timestamp(self.env.clock.now()));
                self.put_receipt(recorder, &receipt)?;
                state.evidence.push(Evidence {
                    kind: EvidenceKind::Receipt,
                    step_id: Some(step.id.clone()),
                    passed: true,
                    detail: EvidenceDetail::Receipt(ReceiptEvidence {
                        idempotency_key: key.to_string(),
                        intent_digest: intent.to_string(),
                        run_id: None,
                    }),
                });
                recorder.emit(Event::ReceiptRecorded(ReceiptRecorded {
                    step_id: step.id.clone(),
                    idempotency_key: key.to_string(),
                    intent_digest: intent.to_string(),
                    receipt_link: self.link(&receipt)?,
                }))?;
                crash_hook(self.env, step, CrashPoint::AfterEffect);
            }
            Err(error) if error.class == FailureClass::ToolResultUncertain => {
                let reason = error.message.clone();
                // The record keeps the tool's facts, without the key's.
                return self.uncertain(keyed, reason, outcome.facts, None, state, recorder);
            }
            Err(_) => {
                // The tool reports a definite failure: nothing was applied,
                // so the intent record goes and a retry may run the effect.
                self.remove_receipt(recorder, key)?;
            }
        }
        Ok(Attempted { outcome, keyed: Some(facts) })
    }

    /// Writes a receipt while the run's lease holds: past its deadline
    /// another process may own the run, and its receipts are its own (an
    /// intent that was never written also means no effect is started; an
    /// effect whose `done` is not written stays `started`, which the next
    /// owner settles by asking the effect).
    fn put_receipt(&self, recorder: &Recorder<'_>, receipt: &Receipt) -> Result<(), StoreError> {
        recorder.may_act()?;
        self.store.put_receipt(receipt)
    }

    /// The link the run's log names `receipt` by. A receipt without one
    /// (no canonical form) could not have been sealed and written either.
    fn link(&self, receipt: &Receipt) -> Result<String, StoreError> {
        receipt.link(&self.env.sealer).ok_or_else(|| StoreError::Tampered {
            id: receipt.run_id.clone(),
            reason: format!("the receipt for key `{}` has no canonical form", receipt.key),
        })
    }

    fn remove_receipt(&self, recorder: &Recorder<'_>, key: &str) -> Result<(), StoreError> {
        recorder.may_act()?;
        self.store.remove_receipt(key)
    }

    /// A write whose outcome cannot be known: record what to check by hand
    /// and fail with `tool_result_uncertain` (never retried).
    fn uncertain(
        &self,
        keyed: &Keyed<'_>,
        reason: String,
        tool: ToolFacts,
        keyed_facts: Option<KeyedFacts>,
        state: &mut RunState,
        recorder: &mut Recorder<'_>,
    ) -> Result<Attempted, StoreError> {
        let Keyed { step, key, intent, action } = *keyed;
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
        recorder.emit(Event::ReconciliationRecorded(ReconciliationRecorded {
            step_id: step.id.clone(),
            idempotency_key: key.to_string(),
            reason: reason.clone(),
        }))?;
        state.reconciliation = Some(reconciliation);
        let message = format!("the outcome of this write is unknown: {reason}");
        let result = Err(failure(FailureClass::ToolResultUncertain, message));
        Ok(Attempted { outcome: ToolOutcome { result, facts: tool, stderr_text: None }, keyed: keyed_facts })
    }
}

/// A keyed step's attempt: the step, its rendered key and its resolved
/// action.
pub(super) struct KeyedStep<'a> {
    pub(super) step: &'a Step,
    pub(super) key: String,
    pub(super) action: &'a ResolvedAction,
}

/// How a keyed effect runs when it runs: the attempt, its timeout, and
/// whether a person approved it.
#[derive(Clone, Copy)]
pub(super) struct EffectRun {
    pub(super) attempt: u32,
    pub(super) timeout: Duration,
    pub(super) approved: bool,
}

/// The runtime's own receipt for a key, validated before anything trusts
/// it.
enum Note {
    None,
    Started(Receipt),
    /// `done` with a result of the right shape: what the effect returned.
    Done(Receipt, ToolSuccess),
    /// The key was recorded for another intent.
    OtherIntent(Receipt),
    /// Unreadable, or `done` without a well-formed result.
    Unusable(String),
}

impl Note {
    /// Validates the runtime's receipt for a keyed step that intends
    /// `intent` (`action`): its shape (read by the store), its intent
    /// digest, the action it records, and a `done` result of the shape a
    /// tool result has.
    fn of(found: Result<Option<Receipt>, ReceiptError>, intent: &str, action: &Value) -> Self {
        let receipt = match found {
            Ok(None) => return Note::None,
            Ok(Some(receipt)) => receipt,
            Err(error) => return Note::Unusable(error.to_string()),
        };
        if receipt.intent_digest != intent {
            return Note::OtherIntent(receipt);
        }
        if &receipt.action != action {
            return Note::Unusable(format!(
                "the receipt for key `{}` records another action than its intent digest stands for",
                receipt.key
            ));
        }
        if receipt.state == ReceiptState::Started {
            return Note::Started(receipt);
        }
        match receipt.result.as_ref().and_then(result_of) {
            Some(success) => Note::Done(receipt, success),
            None => Note::Unusable(format!(
                "the receipt for key `{}` says `done` without a well-formed result, so it cannot stand for the effect",
                receipt.key
            )),
        }
    }
}

/// A tool result as a receipt keeps it.
fn result_json(success: &ToolSuccess) -> Value {
    ReceiptResult { output_text: success.output_text.clone(), output_json: success.output_json.clone() }.to_value()
}

/// A receipt's result, when it has exactly the shape a tool result has
/// ([`ReceiptResult::from_value`]).
fn result_of(result: &Value) -> Option<ToolSuccess> {
    ReceiptResult::from_value(result)
        .map(|result| ToolSuccess { output_text: result.output_text, output_json: result.output_json })
}

/// The effect's answer as the `receipt_lookup` event names it.
fn vouch_name(vouch: &Vouch) -> &'static str {
    match vouch {
        Vouch::Applied(_) => "applied",
        Vouch::NotApplied => "not_applied",
        Vouch::Conflict(_) => "conflict",
        Vouch::CannotAnswer(_) => "cannot_answer",
        Vouch::SendAgainUnderKey => "send_again_under_key",
    }
}

/// Who vouched for an applied effect, for the step's record.
fn vouched_by(action: &ResolvedAction) -> VouchedBy {
    match action {
        ResolvedAction::TicketClose { .. } => VouchedBy::TicketStore,
        _ => VouchedBy::TargetDigest,
    }
}

/// What one keyed write is about: the step, its key, its intent digest and
/// its resolved action.
#[derive(Clone, Copy)]
struct Keyed<'k> {
    step: &'k Step,
    key: &'k str,
    intent: &'k str,
    action: &'k Value,
}

/// The documented test hook `PLANRUN_CRASH_AT`: ends the process abruptly
/// at `point` of the named step, as a crash would.
pub(super) fn crash_hook(env: &RuntimeEnv, step: &Step, point: CrashPoint) {
    if let Some(crash) = &env.crash_at
        && crash.step_id == step.id
        && crash.point == point
    {
        eprintln!("planrun: PLANRUN_CRASH_AT={}: aborting the process", step.id);
        std::process::abort();
    }
}

/// SHA-256 of what a keyed step intends to do.
pub(super) fn intent_digest(kind: &str, action: &Value, key: &str) -> String {
    let value = json!({"kind": kind, "action": action, "idempotency_key": key});
    canonical_digest(&value)
}
