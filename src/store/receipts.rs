//! Idempotency receipts: `<workspace>/.planrun/receipts/<sha256 of key>.json`.
//!
//! A step with an `idempotency_key` writes an intent record (`started`)
//! durably before its effect and completes it (`done`, with the result)
//! durably after, before the run's checkpoint. So after a crash:
//! a `done` receipt with the same intent → the effect happened, reuse its
//! result; a `started` one → the outcome is unknown (`tool_result_uncertain`);
//! none → the effect never started. The same key with another intent is an
//! `idempotency_conflict`. `.planrun/` is protected from the file tools.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::canonical::{parse_strict, sha256_hex};
use crate::store::write_atomic;

/// Where a keyed effect stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptState {
    Started,
    Done,
}

/// One receipt file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub key: String,
    /// SHA-256 of the canonical JSON of the resolved action.
    pub intent_digest: String,
    pub state: ReceiptState,
    pub run_id: String,
    pub step_id: String,
    pub action: Value,
    /// `{output_text, output_json}` once done.
    pub result: Option<Value>,
    pub started_at: String,
    pub completed_at: Option<String>,
}

/// Why a receipt could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReceiptError {
    #[error("cannot read receipt `{}`: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("receipt `{}` is malformed: {message}", path.display())]
    Malformed { path: PathBuf, message: String },
}

/// The receipt folder of a workspace.
#[derive(Debug, Clone)]
pub struct ReceiptStore {
    dir: PathBuf,
}

impl ReceiptStore {
    /// `<workspace>/.planrun/receipts` (created on first write).
    pub fn new(workspace: &Path) -> Self {
        ReceiptStore { dir: workspace.join(".planrun").join("receipts") }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{}.json", sha256_hex(key.as_bytes())))
    }

    /// The receipt for `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<Receipt>, ReceiptError> {
        let path = self.path(key);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ReceiptError::Io { path, source }),
        };
        let malformed = |message: String| ReceiptError::Malformed { path: path.clone(), message };
        let value = parse_strict(&text).map_err(|error| malformed(error.to_string()))?;
        let receipt: Receipt = serde_json::from_value(value).map_err(|error| malformed(error.to_string()))?;
        if receipt.key != key {
            return Err(malformed(format!("it is for key `{}`", receipt.key)));
        }
        if (receipt.state == ReceiptState::Done) != receipt.result.is_some() {
            return Err(malformed("`result` must be set exactly when the state is `done`".to_string()));
        }
        Ok(Some(receipt))
    }

    /// Removes the intent record of an effect that definitely did not
    /// happen (the tool reported a definite failure).
    pub fn remove(&self, key: &str) -> io::Result<()> {
        match fs::remove_file(self.path(key)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }

    /// Writes a receipt durably (atomic replace, fsynced).
    pub fn put(&self, receipt: &Receipt) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let mut bytes = serde_json::to_vec_pretty(receipt)?;
        bytes.push(b'\n');
        write_atomic(&self.path(&receipt.key), &bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn receipt(state: ReceiptState) -> Receipt {
        Receipt {
            key: "close-7".into(),
            intent_digest: "abc".into(),
            state,
            run_id: "r".into(),
            step_id: "close".into(),
            action: json!({"kind": "ticket_close", "ticket_id": "ticket-7"}),
            result: (state == ReceiptState::Done).then(|| json!({"output_text": "closed"})),
            started_at: "2026-01-01T00:00:00Z".into(),
            completed_at: None,
        }
    }

    #[test]
    fn receipts_round_trip_and_malformed_ones_are_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = ReceiptStore::new(dir.path());
        assert!(store.get("close-7").expect("lookup").is_none());
        store.put(&receipt(ReceiptState::Done)).expect("put");
        assert_eq!(store.get("close-7").expect("lookup"), Some(receipt(ReceiptState::Done)));
        let path = store.path("close-7");
        let text = fs::read_to_string(&path).expect("read");
        fs::write(&path, text.replace("\"done\"", "\"started\"")).expect("write");
        assert!(matches!(store.get("close-7"), Err(ReceiptError::Malformed { .. })));
        fs::write(&path, "{\"key\": 1.5}").expect("write");
        assert!(matches!(store.get("close-7"), Err(ReceiptError::Malformed { .. })));
    }
}
