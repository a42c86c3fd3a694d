//! Receipts as the file store keeps them:
//! `<workspace>/.planrun/receipts/<sha256 of key>.json`, each the sealed
//! text of `records/receipts.rs`, replaced atomically and synced.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::store::records::canonical::sha256_hex;
use crate::store::records::receipts::{check_receipt_references, open_receipt, seal_receipt};
use crate::store::{AuditEvent, Receipt, ReceiptError, Sealer, StoreError, write_atomic};

/// The receipt folder of a workspace, sealing with the run store's sealer.
#[derive(Debug, Clone)]
pub struct ReceiptStore {
    dir: PathBuf,
    sealer: Sealer,
}

impl ReceiptStore {
    /// `<workspace>/.planrun/receipts` (created on first write).
    pub fn new(workspace: &Path, sealer: Sealer) -> Self {
        ReceiptStore { dir: workspace.join(".planrun").join("receipts"), sealer }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{}.json", sha256_hex(key.as_bytes())))
    }

    /// The receipt for `key`, if any: its seal verified (or, without a key,
    /// the earlier unsealed format), its shape checked.
    pub fn get(&self, key: &str) -> Result<Option<Receipt>, ReceiptError> {
        let path = self.path(key);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ReceiptError::Io { path, source }),
        };
        open_receipt(&text, key, &self.sealer, &path).map(Some)
    }

    /// Removes the intent record of an effect that definitely did not
    /// happen (the tool reported a definite failure).
    pub fn remove(&self, key: &str) -> io::Result<()> {
        match fs::remove_file(self.path(key)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }

    /// Writes a receipt durably (sealed, atomic replace, fsynced).
    pub fn put(&self, receipt: &Receipt) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let bytes = seal_receipt(receipt, &self.sealer)?;
        write_atomic(&self.path(&receipt.key), bytes.as_bytes())
    }

    /// Holds the receipts that the verified events of run `run_id` name to
    /// the links they name (see [`check_receipt_references`]).
    pub fn check_references(&self, run_id: &str, audit: &[AuditEvent]) -> Result<(), StoreError> {
        check_receipt_references(run_id, audit, &self.sealer, &|key| self.get(key))
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::{Value, json};

    use super::*;
    use crate::store::{EnvelopeError, RECEIPT_LINK, ReceiptState};

    #[test]
    fn receipts_round_trip_sealed_and_edited_or_malformed_ones_are_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        for sealer in [Sealer::plain(), Sealer::keyed(b"k".to_vec())] {
            let store = ReceiptStore::new(dir.path(), sealer.clone());
            store.remove("close-7").expect("clean");
            assert!(store.get("close-7").expect("lookup").is_none());
            store.put(&receipt(ReceiptState::Done)).expect("put");
            assert_eq!(store.get("close-7").expect("lookup"), Some(receipt(ReceiptState::Done)));
            let path = store.path("close-7");
            let text = fs::read_to_string(&path).expect("read");
            // The envelope's digest is the receipt's link.
            let envelope: Value = serde_json::from_str(&text).expect("JSON");
            let digest = if sealer.is_keyed() { &envelope["hmac_sha256"] } else { &envelope["sha256"] };
            assert_eq!(digest.as_str(), receipt(ReceiptState::Done).link(&sealer).as_deref());
            fs::write(&path, text.replace("\"done\"", "\"started\"")).expect("write");
            assert!(matches!(store.get("close-7"), Err(ReceiptError::Refused { .. })), "{sealer:?}");
            fs::write(&path, "{\"key\": 1.5}").expect("write");
            assert!(matches!(store.get("close-7"), Err(ReceiptError::Malformed { .. })));
        }
    }

    #[test]
    fn unsealed_receipts_of_the_earlier_format_are_read_only_without_a_key() {
        let dir = tempfile::tempdir().expect("temp dir");
        let plain = ReceiptStore::new(dir.path(), Sealer::plain());
        fs::create_dir_all(&plain.dir).expect("dir");
        let legacy = serde_json::to_string_pretty(&receipt(ReceiptState::Done)).expect("JSON");
        fs::write(plain.path("close-7"), legacy).expect("write");
        assert_eq!(plain.get("close-7").expect("lookup"), Some(receipt(ReceiptState::Done)));
        let keyed = ReceiptStore::new(dir.path(), Sealer::keyed(b"k".to_vec()));
        assert!(matches!(keyed.get("close-7"), Err(ReceiptError::Unsealed { .. })));
        // A plain seal is no better than none under a key (no downgrade).
        plain.put(&receipt(ReceiptState::Done)).expect("put");
        assert!(matches!(
            keyed.get("close-7"),
            Err(ReceiptError::Refused { source: EnvelopeError::Unauthenticated, .. })
        ));
    }

    /// A receipt of the ticket demo's `close` step.
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

    fn event(seq: u64, key: &str, link: Value) -> AuditEvent {
        let mut details = serde_json::Map::new();
        details.insert("idempotency_key".into(), json!(key));
        details.insert(RECEIPT_LINK.into(), link);
        AuditEvent {
            seq,
            ts: "2026-01-01T00:00:00Z".into(),
            run_id: "r".into(),
            event_type: "receipt_recorded".into(),
            step_id: Some("close".into()),
            status: Some("ok".into()),
            details,
            prev_hash: None,
            seal: None,
        }
    }

    #[test]
    fn the_receipts_a_log_names_must_be_exactly_the_ones_it_used() {
        let dir = tempfile::tempdir().expect("temp dir");
        let sealer = Sealer::keyed(b"k".to_vec());
        let store = ReceiptStore::new(dir.path(), sealer.clone());
        let done = receipt(ReceiptState::Done);
        store.put(&done).expect("put");
        let link = json!(done.link(&sealer).expect("link"));
        store.check_references("r", &[event(4, "close-7", link.clone())]).expect("the receipt it used");
        // Swapped for another genuine receipt of the same key.
        let mut other = done.clone();
        other.completed_at = Some("2026-01-02T00:00:00Z".into());
        store.put(&other).expect("put");
        let changed = store.check_references("r", &[event(4, "close-7", link.clone())]).expect_err("swapped");
        assert!(changed.to_string().contains("audit event 4 used was changed"), "{changed}");
        // A later event that left no receipt behind (`null`) ends the claim.
        store
            .check_references("r", &[event(4, "close-7", link.clone()), event(9, "close-7", Value::Null)])
            .expect("settled");
        store.remove("close-7").expect("remove");
        let missing = store.check_references("r", &[event(4, "close-7", link.clone())]).expect_err("missing");
        assert!(missing.to_string().contains("is missing"), "{missing}");
        // A store that cannot be asked says so: nothing is judged tampered.
        let unavailable = |_: &str| -> Result<Option<Receipt>, ReceiptError> {
            Err(ReceiptError::Store(Box::new(StoreError::Unavailable {
                action: "read a receipt",
                message: "the database went away".into(),
            })))
        };
        let outage =
            check_receipt_references("r", &[event(4, "close-7", link)], &sealer, &unavailable).expect_err("no answer");
        assert!(matches!(outage, StoreError::Unavailable { .. }), "{outage}");
    }
}
