//! Strict verification of what the PostgreSQL store read back: the same
//! checks as the file store's (`run_load::load_run`, whose log checks it
//! shares, `record_dir::load_record`) over the same bytes, which the
//! database keeps as text. On top of them,
//! what only a table can get wrong: a row's `seq` or `hash` column that
//! disagrees with its line, and rows past the checkpoint (a database run has
//! no crash tail: its events and history commit with their checkpoint, so
//! a row the head does not cover was added behind planrun's back).

use std::path::Path;

use serde_json::Value;

use crate::store::records::audit::{LogFiles, verify_checkpointed_log};
use crate::store::records::record_checkpoint::{Checkpoint, read_checkpoint};
use crate::store::records::run_log::{CheckedLog, Heads, LogTexts, check_compact_head, check_log, read_log};
use crate::store::{AuditEvent, AuditTail, EnvelopeError, LoadedRecord, LoadedRun, RecordKind, Sealer, StoreError};

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

/// Checks that every `audit_events` row's `seq` and `hash` columns are
/// its line's (`events` and `hashes` as verified from the lines).
fn check_rows(id: &str, rows: &[EventRow], events: &[AuditEvent], hashes: &[String]) -> Result<(), StoreError> {
    let tampered = tampered(id);
    for ((row, event), hash) in rows.iter().zip(events).zip(hashes) {
        if u64::try_from(row.seq).ok() != Some(event.seq) {
            return Err(tampered(format!("`audit_events` row {} holds the line of event {}", row.seq, event.seq)));
        }
        if row.hash != *hash {
            return Err(tampered(format!("`audit_events` row {}: its `hash` is not the link of its line", row.seq)));
        }
    }
    Ok(())
}

/// The rows' lines as one log.
fn log_text(rows: &[EventRow]) -> String {
    rows.iter().map(|row| format!("{}\n", row.line)).collect()
}

/// Verifies the audit rows of record `id` as one log whose checkpoint has
/// seen `seen`.
fn verify_events(
    id: &str,
    rows: &[EventRow],
    seen: (u64, Option<&str>),
    sealer: &Sealer,
) -> Result<(Vec<AuditEvent>, AuditTail), StoreError> {
    let text = log_text(rows);
    let (events, tail) = verify_checkpointed_log(&text, id, FILES, seen, sealer, false).map_err(tampered(id))?;
    check_rows(id, rows, &events, &tail.hashes)?;
    Ok((events, tail))
}

/// Verifies an agent run as the file store reads its folder (`records/run_log.rs`:
/// the same checks over the same lines): the log's chain and its head
/// lines, the last head's checkpoint, the step records and the plan it
/// vouches for; then that `runs.state` is that last checkpoint, that no
/// row lies past it, and that the `history` rows and the `run_plans` row
/// are the records and the plan the log holds.
pub fn verify_run(run_id: &str, texts: &RunTexts, sealer: &Sealer) -> Result<LoadedRun, StoreError> {
    let tampered = tampered(run_id);
    // A key that is missing, or set for a run sealed without one, says so
    // before the log's links (which it makes differ) are checked.
    if let Err(error @ (EnvelopeError::KeyMissing | EnvelopeError::Unauthenticated)) = sealer.open(&texts.state) {
        return Err(tampered(format!("`runs.state`: {error}")));
    }
    let audit_text = log_text(&texts.events);
    let Some(log) = read_log(&audit_text, run_id, FILES.audit, sealer).map_err(&tampered)? else {
        return Err(tampered("`audit_events` holds no checkpoint line".to_string()));
    };
    if log.tail.past_head > 0 {
        return Err(tampered(format!(
            "`audit_events` holds {} rows past the checkpoint at event {}: rows were added past it",
            log.tail.past_head, log.tail.seq
        )));
    }
    check_rows(run_id, &texts.events, &log.events, &log.tail.hashes)?;
    let checked = check_log(run_id, FILES, Path::new(FILES.audit), log, sealer)?;
    let seen = check_compact_head(
        run_id,
        FILES,
        LogTexts { compact: Some(&texts.state), audit: &audit_text },
        &checked,
        sealer,
    )?;
    if seen != Some(checked.tail.seq) {
        return Err(tampered(format!(
            "`runs.state` is not the checkpoint of the last head line (event {})",
            checked.tail.seq
        )));
    }
    let CheckedLog { events, tail, state, plan, history, lines, plan_hash, history_hash, .. } = checked;

    let Some(plan_text) = &texts.plan else {
        return Err(tampered("`run_plans` has no row for the run".to_string()));
    };
    if sealer.link(plan_text.as_bytes()) != plan_hash {
        return Err(tampered("`run_plans.plan` is not the plan the run stored (its link does not match)".to_string()));
    }
    if texts.history.len() != lines.len() {
        return Err(tampered(format!(
            "the checkpoint covers {} history records but `history` holds {}",
            lines.len(),
            texts.history.len()
        )));
    }
    for (index, ((number, line), expected)) in texts.history.iter().zip(&lines).enumerate() {
        if usize::try_from(*number).ok() != Some(index + 1) {
            return Err(tampered(format!("`history` row {number} stands at position {}", index + 1)));
        }
        if line != expected {
            return Err(tampered(format!(
                "`history` row {number}: not the step record the log holds (it was changed)"
            )));
        }
    }
    let heads = Heads { plan_hash, history_hash, history_len: 0, logged: true, ..Heads::default() };
    Ok(LoadedRun {
        state,
        plan,
        history,
        audit: events,
        audit_tail: tail,
        discarded_history: 0,
        discarded_events: 0,
        heads,
    })
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
    let Checkpoint { state, state_version, audit_seq, audit_hash } =
        read_checkpoint(state_text, kind, id, FILES.state, sealer).map_err(tampered(id))?;
    let (audit, audit_tail) = verify_events(id, rows, (audit_seq, audit_hash.as_deref()), sealer)?;
    Ok(LoadedRecord { state: Value::Object(state), state_version, audit, audit_tail })
}
