//! The record-format glue: a log line's text (the file store's
//! `audit.jsonl` bytes), a sealed compact head, JSON Lines.

use std::path::PathBuf;

use serde_json::Value;

use crate::store::records::audit::{LineRef, write_line};
use crate::store::{NewEvent, Sealer, StoreError};

/// Lines as a JSON Lines file: each followed by a newline.
pub(super) fn jsonl<'l>(lines: impl Iterator<Item = &'l str>) -> String {
    lines.map(|line| format!("{line}\n")).collect()
}

/// The sealed envelope of `payload`, as the file store writes `state.json`.
pub(super) fn sealed_text(sealer: &Sealer, id: &str, payload: Value) -> Result<String, StoreError> {
    let serialize = |message: String| StoreError::Io {
        action: "serialize",
        path: PathBuf::from(format!("runs.state of `{id}`")),
        source: std::io::Error::other(message),
    };
    let envelope = sealer.seal(payload).map_err(|error| serialize(error.to_string()))?;
    let mut text = serde_json::to_string_pretty(&envelope).map_err(|error| serialize(error.to_string()))?;
    text.push('\n');
    Ok(text)
}

/// The audit line of `event` as `seq` of `id` after `prev_hash` (a head
/// line with its seal when `sealed`): the same bytes as the file store's
/// `audit.jsonl` line.
pub(super) fn event_line(
    id: &str,
    seq: u64,
    prev_hash: Option<&str>,
    event: NewEvent<'_>,
    sealed: bool,
    sealer: &Sealer,
) -> serde_json::Result<String> {
    let event = LineRef {
        seq,
        ts: &event.ts,
        run_id: id,
        event_type: event.event_type,
        step_id: event.step_id,
        status: event.status,
        details: &event.details,
        prev_hash,
    };
    line_text(&event, sealed, sealer)
}

/// The text of a log line (a head line when `sealed`).
pub(super) fn line_text(event: &impl serde::Serialize, sealed: bool, sealer: &Sealer) -> serde_json::Result<String> {
    let mut line = Vec::with_capacity(512);
    write_line(&mut line, event, sealed, sealer)?;
    String::from_utf8(line).map_err(serde::ser::Error::custom)
}
