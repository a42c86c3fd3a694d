//! `history.jsonl` as the file store writes it: [`HistoryLog`] appends each
//! step record's line, chained (see `records/history.rs`), without a sync.

use std::fs::File;
use std::io::{self, Write};

use crate::store::{Sealer, StepRecord};

/// The open history view (appended as records come, never synced).
pub struct HistoryLog {
    file: File,
    line: Vec<u8>,
    sealer: Sealer,
    /// The chain's link after the last line written (`None` before the first).
    hash: Option<String>,
}

impl HistoryLog {
    /// Continues (or starts, with `hash = None`) a chain.
    pub(crate) fn new(file: File, hash: Option<String>, sealer: Sealer) -> Self {
        HistoryLog { file, line: Vec::with_capacity(1024), sealer, hash }
    }

    /// The chain's link after the last line written.
    pub fn hash(&self) -> Option<&str> {
        self.hash.as_deref()
    }

    pub fn append(&mut self, record: &StepRecord) -> io::Result<()> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, record)?;
        let hash = self.sealer.chain(self.hash.as_deref(), &self.line);
        self.line.push(b'\n');
        self.file.write_all(&self.line)?;
        self.hash = Some(hash);
        Ok(())
    }
}
