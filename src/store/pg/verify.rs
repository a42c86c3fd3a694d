//! Strict verification of what the PostgreSQL store read back: the same
//! checks as the file store's (`run_dir::load_run`, `record_dir::load_record`)
//! over the same bytes, which the database keeps as text. On top of them,
//! what only a table can get wrong: a row's `seq` or `hash` column that
//! disagrees with its line, and rows past the checkpoint (a database run has
//! no crash tail: its events and history commit with their checkpoint, so
//! a row the head does not cover was added behind planrun's back).

use std::path::PathBuf;

use serde_json::Value;

use crate::store::audit::{LogFiles, verify_checkpointed_log};
use crate::store::history::history_chain;
use crate::store::run_load::Heads;
use crate::store::{
    AuditEvent, AuditTail, LoadedRecord, LoadedRun, RecordKind, RunState, Sealer, StepRecord, StoreError,
};

/// The names checks report, in the database's terms.
const FILES: LogFiles = LogFiles { state: "runs.state", audit: "audit_events" };

/// One `audit_events` row.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub seq: i64,
    pub line: String,
    pub hash: String,
}

/// Everything stored for an agent run, as text.
#[derive(Debug, Clone)]
pub struct RunTexts {
    /// The sealed checkpoint (the file store's `state.json`).
    pub state: String,
    /// `plan.json`.
    pub plan: Option<String>,
    pub events: Vec<EventRow>,
    /// `(record_no, line)`.
    pub history: Vec<(i64, String)>,
}

fn tampered(id: &str) -> impl Fn(String) -> StoreError + '_ {
    move |reason| StoreError::Tampered { id: id.to_string(), reason }
}

/// Verifies the audit rows of `id` as one log whose checkpoint has seen
/// `seen`, with no row past it.
fn verify_events(
    id: &str,
    rows: &[EventRow],
    seen: (u64, Option<&str>),
    sealer: &Sealer,
) -> Result<(Vec<AuditEvent>, AuditTail), StoreError> {
    let tampered = tampered(id);
    let text: String = rows.iter().map(|row| format!("{}\n", row.line)).collect();
    let (events, tail) = verify_checkpointed_log(&text, id, FILES, seen, sealer, false).map_err(&tampered)?;
    for ((row, event), hash) in rows.iter().zip(&events).zip(&tail.hashes) {
        if u64::try_from(row.seq).ok() != Some(event.seq) {
            return Err(tampered(format!("`audit_events` row {} holds the line of event {}", row.seq, event.seq)));
        }
        if row.hash != *hash {
            return Err(tampered(format!("`audit_events` row {}: its `hash` is not the link of its line", row.seq)));
        }
    }
    Ok((events, tail))
}

/// Verifies an agent run: seal, strict JSON, invariants, the audit chain up
/// to the head and nothing past it, the plan's link, the history chain up
/// to the head and nothing past it.
pub fn verify_run(run_id: &str, texts: &RunTexts, sealer: &Sealer) -> Result<LoadedRun, StoreError> {
    let tampered = tampered(run_id);
    let payload = sealer.open(&texts.state).map_err(|error| tampered(format!("`runs.state`: {error}")))?;
    let Value::Object(mut payload) = payload else {
        return Err(tampered("`runs.state`: the payload is not an object".to_string()));
    };
    let (Some(Value::String(plan_hash)), Some(history_hash @ (Value::Null | Value::String(_)))) =
        (payload.remove("plan_hash"), payload.remove("history_hash"))
    else {
        return Err(tampered("`runs.state`: `plan_hash` or `history_hash` is missing or invalid".to_string()));
    };
    let history_hash = history_hash.as_str().map(str::to_string);
    let state: RunState = serde_json::from_value(Value::Object(payload))
        .map_err(|error| tampered(format!("`runs.state` payload: {error}")))?;
    if state.run_id != run_id {
        return Err(tampered(format!("`runs.state` is for run `{}`", state.run_id)));
    }
    state.check_invariants().map_err(|reason| tampered(format!("`runs.state`: impossible state: {reason}")))?;

    let (audit, audit_tail) =
        verify_events(run_id, &texts.events, (state.audit_seq, state.audit_hash.as_deref()), sealer)?;
    if audit_tail.seq != state.audit_seq {
        return Err(tampered(format!(
            "`audit_events` holds {} events but the checkpoint covers {}: rows were added past it",
            audit_tail.seq, state.audit_seq
        )));
    }

    let Some(plan_text) = &texts.plan else {
        return Err(tampered("`run_plans` has no row for the run".to_string()));
    };
    if sealer.link(plan_text.as_bytes()) != plan_hash {
        return Err(tampered("`run_plans.plan` is not the plan the run stored (its link does not match)".to_string()));
    }
    let plan: Value = serde_json::from_str(plan_text).map_err(|error| StoreError::Corrupt {
        path: PathBuf::from("run_plans.plan"),
        line: error.line(),
        message: error.to_string(),
    })?;

    let covered = usize::try_from(state.counters.history_records).unwrap_or(usize::MAX);
    if texts.history.len() != covered {
        return Err(tampered(format!(
            "the checkpoint covers {covered} history records but `history` holds {}",
            texts.history.len()
        )));
    }
    if let Some((index, (number, _))) =
        texts.history.iter().enumerate().find(|(index, (number, _))| usize::try_from(*number).ok() != Some(index + 1))
    {
        return Err(tampered(format!("`history` row {number} stands at position {}", index + 1)));
    }
    if history_chain(sealer, texts.history.iter().map(|(_, line)| line.as_str())) != history_hash {
        return Err(tampered(
            "`history`: the records the checkpoint covers were changed (the history chain does not match)".to_string(),
        ));
    }
    let history = texts
        .history
        .iter()
        .map(|(number, line)| {
            serde_json::from_str::<StepRecord>(line).map_err(|error| StoreError::Corrupt {
                path: PathBuf::from("history"),
                line: usize::try_from(*number).unwrap_or(0),
                message: error.to_string(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let heads = Heads { plan_hash, history_hash, history_len: 0, logged: true, ..Heads::default() };
    Ok(LoadedRun { state, plan, history, audit, audit_tail, discarded_history: 0, discarded_events: 0, heads })
}

/// Verifies a bridge or controller record: seal, strict JSON, its id, the
/// store's fields, and its audit chain (which may run past the checkpoint:
/// a record's events are written as they happen).
pub fn verify_record(
    kind: RecordKind,
    id: &str,
    state_text: &str,
    rows: &[EventRow],
    sealer: &Sealer,
) -> Result<LoadedRecord, StoreError> {
    let tampered = tampered(id);
    let payload = sealer.open(state_text).map_err(|error| tampered(format!("`runs.state`: {error}")))?;
    let Value::Object(mut state) = payload else {
        return Err(tampered("`runs.state`: the payload is not an object".to_string()));
    };
    let state_version = state.remove("state_version").and_then(|value| value.as_u64());
    let audit_seq = state.remove("audit_seq").and_then(|value| value.as_u64());
    let audit_hash = match state.remove("audit_hash") {
        Some(Value::Null) => Some(None),
        Some(Value::String(hash)) => Some(Some(hash)),
        _ => None,
    };
    let (Some(state_version), Some(audit_seq), Some(audit_hash)) = (state_version, audit_seq, audit_hash) else {
        return Err(tampered(
            "`runs.state`: `state_version`, `audit_seq` or `audit_hash` is missing or invalid".to_string(),
        ));
    };
    let id_field = kind.id_field();
    if state.get(id_field).and_then(Value::as_str) != Some(id) {
        return Err(tampered(format!("`runs.state` is not the state of `{id}` (`{id_field}`)")));
    }
    let (audit, audit_tail) = verify_events(id, rows, (audit_seq, audit_hash.as_deref()), sealer)?;
    Ok(LoadedRecord { state: Value::Object(state), state_version, audit, audit_tail })
}
