//! `audit.jsonl`: the append-only event log.

use std::fs::File;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
}

/// The open log. Each event is written with one `write` call as soon as it
/// happens; [`AuditLog::sync`] makes everything written so far durable and
/// runs before every checkpoint.
pub struct AuditLog {
    file: File,
    seq: u64,
    line: Vec<u8>,
}

impl AuditLog {
    pub(crate) fn new(file: File) -> Self {
        AuditLog { file, seq: 0, line: Vec::with_capacity(512) }
    }

    /// `seq` of the last event written (0 before the first).
    pub fn seq(&self) -> u64 {
        self.seq
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
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &event)?;
        self.line.push(b'\n');
        self.file.write_all(&self.line)?;
        self.seq += 1;
        Ok(self.seq)
    }

    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}
