//! `history.jsonl`: one record per step attempt.

use std::fs::File;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::FailureClass;

/// How a step attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepRecordStatus {
    Done,
    Failed,
    /// A `when` condition was false.
    Skipped,
}

/// The seed's `StepResult`: one attempt of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRecord {
    pub step_id: String,
    pub kind: String,
    pub status: StepRecordStatus,
    /// 1-based attempt that produced this record.
    pub attempt: u32,
    /// Set on failed records, `null` on done ones.
    pub failure_class: Option<FailureClass>,
    /// The resolved action that ran (templates rendered); `null` when
    /// resolution itself failed.
    pub action: Option<Value>,
    pub output_text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_json: Option<Value>,
    pub error: Option<String>,
    /// Facts from the tool and the policy (decision, rule, program, exit code).
    pub details: Map<String, Value>,
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
}

/// The open history file (same durability rules as the audit log).
pub struct HistoryLog {
    file: File,
    line: Vec<u8>,
}

impl HistoryLog {
    pub(crate) fn new(file: File) -> Self {
        HistoryLog { file, line: Vec::with_capacity(1024) }
    }

    pub fn append(&mut self, record: &StepRecord) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, record)?;
        self.line.push(b'\n');
        self.file.write_all(&self.line)
    }

    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}
