//! `reconcile`: a person settles a `tool_result_uncertain` run by saying
//! whether the write was applied. The answer is audited
//! (`reconciliation_settled`) and recorded, and the run goes back to
//! `running` so that `planrun resume` continues it:
//!
//! - `--applied`: the person's word stands for the effect's receipt. The
//!   runtime's receipt for the key becomes `done` (an empty result: the
//!   effect's own output is not known), the step gets a `done` history
//!   record marked `reconciled`, `reconciled` evidence bound to the intent
//!   digest, and the cursor moves past it;
//! - `--not-applied`: the intent receipt is removed and the step's attempts
//!   start over, so `resume` runs it again — after asking the effect itself
//!   first where it can answer (the ticket store's receipt wins over the
//!   person's word).

use std::path::Path;

use serde_json::Value;

use crate::model::{
    EvidenceDetail, EvidenceKind, ReceiptResult, ReconciledEvidence, ReconciledFacts, RunStatus, StepDetails,
    StopReason,
};
use crate::ops::control::error::ControlError;
use crate::ops::control::open::open_in;
use crate::ops::{ExitStatus, OpsError};
use crate::runtime::event::{Event, ReconciliationSettled};
use crate::runtime::{Recorder, RuntimeEnv, format_timestamp};
use crate::store::{Cursor, Evidence, Receipt, ReceiptState, RunId, RunState, StepRecord, StepRecordStatus};

/// What `reconcile` was told.
pub struct ReconcileInput<'a> {
    pub workspace: &'a Path,
    pub run_id: &'a RunId,
    /// The person's word: was the uncertain write applied?
    pub applied: bool,
    pub settled_by: Option<String>,
}

/// The settled run, `running` again, waiting for `resume`.
#[derive(Debug)]
pub struct Reconciled {
    pub state: RunState,
    pub applied: bool,
}

impl Reconciled {
    /// The command did what was asked.
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::Done
    }
}

/// Settles run `input.run_id`'s uncertain write as applied or not, on the
/// word of `settled_by`; the run is `running` again.
pub fn reconcile(input: ReconcileInput<'_>, env: &RuntimeEnv) -> Result<Reconciled, OpsError> {
    let applied = input.applied;
    Ok(Reconciled { state: settle(input, env)?, applied })
}

fn settle(input: ReconcileInput<'_>, env: &RuntimeEnv) -> Result<RunState, ControlError> {
    let ReconcileInput { workspace, run_id, applied, settled_by } = input;
    let store = env.store(workspace);
    let (run, loaded) = open_in(store.as_ref(), run_id)?;
    let mut state = loaded.state;
    let uncertain = state.status == RunStatus::Failed && state.stop_reason == Some(StopReason::ToolResultUncertain);
    let Some(reconciliation) = state.reconciliation.clone().filter(|_| uncertain) else {
        return Err(ControlError::Refused(format!(
            "run `{run_id}` has no uncertain write to reconcile (status `{}`, stop reason `{}`)",
            state.status,
            state.stop_reason.as_ref().map_or("-", StopReason::as_str)
        )));
    };
    let mut recorder = Recorder::new(run, env.clock.as_ref());
    let now = format_timestamp(env.clock.now());
    let key = reconciliation.idempotency_key.clone();
    // `--applied`: the receipt the person's word becomes, known before the
    // event so that the event can name it (its link).
    let receipt = key.clone().filter(|_| applied).map(|key| Receipt {
        key,
        intent_digest: reconciliation.intent_digest.clone(),
        state: ReceiptState::Done,
        run_id: state.run_id.clone(),
        step_id: reconciliation.step_id.clone(),
        action: reconciliation.action.clone(),
        result: Some(ReceiptResult { output_text: String::new(), output_json: None }.to_value()),
        started_at: reconciliation.recorded_at.clone(),
        completed_at: Some(now.clone()),
    });
    recorder.emit(Event::ReconciliationSettled(ReconciliationSettled {
        step_id: reconciliation.step_id.clone(),
        idempotency_key: reconciliation.idempotency_key.clone(),
        intent_digest: reconciliation.intent_digest.clone(),
        applied,
        settled_by: settled_by.clone(),
        receipt_link: receipt.as_ref().and_then(|receipt| receipt.link(&env.sealer)),
    }))?;
    if applied {
        if let Some(receipt) = &receipt {
            store.put_receipt(receipt)?;
        }
        let details = StepDetails::Reconciled(ReconciledFacts {
            idempotency_key: key.clone(),
            intent_digest: reconciliation.intent_digest.clone(),
            reconciled: "applied".to_string(),
            settled_by: settled_by.clone(),
        });
        let record = StepRecord {
            step_id: reconciliation.step_id.clone(),
            kind: action_kind(&reconciliation.action),
            status: StepRecordStatus::Done,
            attempt: state.cursor.attempts.max(1),
            failure_class: None,
            action: Some(reconciliation.action.clone()),
            output_text: String::new(),
            output_json: None,
            stderr_text: None,
            error: None,
            details,
            started_at: now.clone(),
            finished_at: now,
            duration_ms: 0,
        };
        recorder.append_history(&mut state, &record)?;
        state.evidence.push(Evidence {
            kind: EvidenceKind::Reconciled,
            step_id: Some(reconciliation.step_id.clone()),
            passed: true,
            detail: EvidenceDetail::Reconciled(ReconciledEvidence {
                idempotency_key: key,
                intent_digest: reconciliation.intent_digest.clone(),
                settled_by: settled_by.clone(),
            }),
        });
        state.cursor = Cursor { next_step: state.cursor.next_step + 1, attempts: 0 };
    } else {
        if let Some(key) = &key {
            store.remove_receipt(key)?;
        }
        state.cursor.attempts = 0;
    }
    state.status = RunStatus::Running;
    state.stop_reason = None;
    state.finished_at = None;
    state.error = None;
    state.reconciliation = None;
    state.counters.consecutive_failures = 0;
    recorder.checkpoint(&mut state)?;
    Ok(state)
}

/// The `kind` of a frozen action (empty when it has none).
fn action_kind(action: &Value) -> String {
    #[derive(serde::Deserialize)]
    struct Tagged {
        kind: String,
    }
    <Tagged as serde::Deserialize>::deserialize(action).map(|tagged| tagged.kind).unwrap_or_default()
}
