//! `audit.jsonl`: the append-only, hash-chained event log.
//!
//! Every line carries `prev_hash`, the SHA-256 of the previous line's bytes
//! (without its newline; `null` on the first line), so a removed, reordered
//! or edited line breaks the chain. The checkpoint records the `seq` and hash
//! of the last line it has seen, so the state and the log vouch for each
//! other.

use std::fs::File;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::store::canonical::sha256_hex;

/// One line of `audit.jsonl`. Field order is the file's column order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    /// 1-based, one more per line, never reused.
    pub seq: u64,
    pub ts: String,
    pub run_id: String,
    pub event_type: String,
    pub step_id: Option<String>,
    pub status: Option<String>,
    pub details: Map<String, Value>,
    /// SHA-256 of the previous line; `null` on the first line.
    pub prev_hash: Option<String>,
}

/// Why an audit log was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    #[error("line {line} is torn (the file does not end with a newline): the process was interrupted mid-write")]
    TornLine { line: usize },
    #[error("line {line} is not a valid audit event: {message}")]
    Invalid { line: usize, message: String },
    #[error("line {line} has `seq` {found}, expected {expected}")]
    Sequence { line: usize, found: u64, expected: u64 },
    #[error("line {line} breaks the hash chain: its `prev_hash` is not the hash of line {}", line - 1)]
    Chain { line: usize },
}

/// What a verified log ends with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditTail {
    /// `seq` of the last line (0 for an empty log).
    pub seq: u64,
    /// Hash of the last line (`None` for an empty log).
    pub hash: Option<String>,
    /// Hash of every line, by `seq - 1`, so a checkpoint's `audit_seq` can
    /// be checked against its `audit_hash`.
    pub hashes: Vec<String>,
}

/// Verifies a whole log: every line parses, `seq` counts 1, 2, 3, … and the
/// hash chain is unbroken; a last line without its newline is torn.
pub fn verify_audit(text: &str) -> Result<(Vec<AuditEvent>, AuditTail), AuditError> {
    let mut events = Vec::new();
    let mut tail = AuditTail::default();
    let line_count = text.split_terminator('\n').count();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(AuditError::TornLine { line: line_count });
    }
    for (index, line) in text.split_terminator('\n').enumerate() {
        let number = index + 1;
        let event: AuditEvent = serde_json::from_str(line)
            .map_err(|error| AuditError::Invalid { line: number, message: error.to_string() })?;
        let expected = tail.seq + 1;
        if event.seq != expected {
            return Err(AuditError::Sequence { line: number, found: event.seq, expected });
        }
        if event.prev_hash != tail.hash {
            return Err(AuditError::Chain { line: number });
        }
        let hash = sha256_hex(line.as_bytes());
        tail.seq = event.seq;
        tail.hashes.push(hash.clone());
        tail.hash = Some(hash);
        events.push(event);
    }
    Ok((events, tail))
}

/// The file names a checkpoint and its log go by, for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogFiles {
    pub state: &'static str,
    pub audit: &'static str,
}

/// Verifies the log of `id` (see [`verify_audit`]), that every line is for
/// `id`, and that a checkpoint which has seen line `seen_seq` with hash
/// `seen_hash` agrees with it: the checkpoint never claims more than the
/// log holds, and the line it names is the line the log has. The error is
/// the reason, for [`crate::store::StoreError::Tampered`].
pub(crate) fn verify_checkpointed_log(
    text: &str,
    id: &str,
    files: LogFiles,
    seen_seq: u64,
    seen_hash: Option<&str>,
) -> Result<(Vec<AuditEvent>, AuditTail), String> {
    let LogFiles { state, audit: log } = files;
    let (audit, tail) = verify_audit(text).map_err(|error| format!("`{log}`: {error}"))?;
    if let Some(event) = audit.iter().find(|event| event.run_id != id) {
        return Err(format!("`{log}` line {} is for run `{}`", event.seq, event.run_id));
    }
    if seen_seq > tail.seq {
        return Err(format!("`{state}` has seen audit line {seen_seq} but `{log}` ends at line {}", tail.seq));
    }
    let line_hash = seen_seq.checked_sub(1).and_then(|index| tail.hashes.get(index as usize)).map(String::as_str);
    if line_hash != seen_hash {
        return Err(format!("`{state}` and `{log}` disagree about audit line {seen_seq}"));
    }
    Ok((audit, tail))
}

/// The open log. Each event is written with one `write` call as soon as it
/// happens; [`AuditLog::sync`] makes everything written so far durable and
/// runs before every checkpoint.
pub struct AuditLog {
    file: File,
    seq: u64,
    last_hash: Option<String>,
    line: Vec<u8>,
}

impl AuditLog {
    pub(crate) fn new(file: File) -> Self {
        AuditLog { file, seq: 0, last_hash: None, line: Vec::with_capacity(512) }
    }

    /// Continues a verified log.
    pub(crate) fn resume(file: File, tail: &AuditTail) -> Self {
        AuditLog { file, seq: tail.seq, last_hash: tail.hash.clone(), line: Vec::with_capacity(512) }
    }

    /// `seq` of the last event written (0 before the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Hash of the last line written.
    pub fn last_hash(&self) -> Option<&str> {
        self.last_hash.as_deref()
    }

    /// Appends an event and returns its `seq`.
    pub fn append(
        &mut self,
        ts: String,
        run_id: &str,
        event_type: &str,
        step_id: Option<&str>,
        status: Option<&str>,
        details: Map<String, Value>,
    ) -> io::Result<u64> {
        let event = AuditEvent {
            seq: self.seq + 1,
            ts,
            run_id: run_id.to_string(),
            event_type: event_type.to_string(),
            step_id: step_id.map(str::to_string),
            status: status.map(str::to_string),
            details,
            prev_hash: self.last_hash.take(),
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &event)?;
        let hash = sha256_hex(&self.line);
        self.line.push(b'\n');
        if let Err(error) = self.file.write_all(&self.line) {
            self.last_hash = event.prev_hash;
            return Err(error);
        }
        self.seq += 1;
        self.last_hash = Some(hash);
        Ok(self.seq)
    }

    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_text() -> String {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.jsonl");
        let file = std::fs::OpenOptions::new().append(true).create(true).open(&path).expect("open");
        let mut log = AuditLog::new(file);
        for event in ["run_started", "state_saved", "run_finished"] {
            log.append("2026-01-01T00:00:00Z".into(), "r", event, None, Some("ok"), Map::new()).expect("append");
        }
        std::fs::read_to_string(&path).expect("read")
    }

    #[test]
    fn an_intact_log_verifies_and_its_tail_is_the_last_line() {
        let text = log_text();
        let (events, tail) = verify_audit(&text).expect("valid log");
        assert_eq!(events.len(), 3);
        assert_eq!(tail.seq, 3);
        assert_eq!(tail.hash.as_deref(), Some(sha256_hex(text.lines().last().unwrap_or("").as_bytes()).as_str()));
        assert_eq!(events[0].prev_hash, None);
    }

    #[test]
    fn edits_removals_reorderings_and_torn_lines_are_detected() {
        let text = log_text();
        let lines: Vec<&str> = text.lines().collect();
        let edited = text.replace("state_saved", "state_SAVED");
        assert!(matches!(verify_audit(&edited), Err(AuditError::Chain { line: 3 })));
        let removed = format!("{}\n{}\n", lines[0], lines[2]);
        assert!(matches!(verify_audit(&removed), Err(AuditError::Sequence { line: 2, .. })));
        let torn = &text[..text.len() - 5];
        assert!(matches!(verify_audit(torn), Err(AuditError::TornLine { line: 3 })));
        let garbage = format!("{text}{{not json\n");
        assert!(matches!(verify_audit(&garbage), Err(AuditError::Invalid { line: 4, .. })));
    }
}
