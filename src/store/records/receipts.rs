//! Idempotency receipts: `<workspace>/.planrun/receipts/<sha256 of key>.json`.
//!
//! A step with an `idempotency_key` writes an intent record (`started`)
//! durably before its effect and completes it (`done`, with the result)
//! durably after, before the run's checkpoint. So after a crash:
//! a `done` receipt with the same intent → the effect happened, reuse its
//! result; a `started` one → the outcome is unknown (`tool_result_uncertain`);
//! none → the effect never started. The same key with another intent is an
//! `idempotency_conflict`. `.planrun/` is protected from the file tools.
//!
//! A receipt file is sealed like a checkpoint (`envelope.rs`):
//! `{"schema_version": 1, "payload": {…receipt…}, "sha256"|"hmac_sha256": …}`,
//! so that under `PLANRUN_HMAC_KEY` a forged or edited receipt is refused
//! ([`ReceiptError::Refused`]) and an unsealed one too
//! ([`ReceiptError::Unsealed`]). Without a key, receipts of the earlier
//! format (the plain receipt object, no envelope) are still read.
//!
//! The run's log names the receipt it used: `receipt_recorded`,
//! `receipt_reused` and `reconciliation_settled` carry the receipt's link
//! ([`Receipt::link`], the digest its envelope holds; `null` when the event
//! leaves no receipt behind). the file store's `ReceiptStore::check_references` holds the
//! receipts a verified log names to those links, so a receipt swapped,
//! edited or removed after the fact makes the run fail verification.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::records::canonical::{canonical_json, parse_strict};
use crate::store::{AuditEvent, EnvelopeError, Sealer, StoreError};

/// The audit `details` field that names the receipt an event used.
pub const RECEIPT_LINK: &str = "receipt_link";

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

impl Receipt {
    /// The receipt's link: [`Sealer::link`] of its canonical JSON (SHA-256,
    /// or HMAC-SHA256 under the key) — the digest its sealed file carries.
    /// `None` only for a receipt that has no canonical form (a float in its
    /// result), which cannot be sealed either.
    pub fn link(&self, sealer: &Sealer) -> Option<String> {
        let value = serde_json::to_value(self).ok()?;
        let canonical = canonical_json(&value).ok()?;
        Some(sealer.link(canonical.as_bytes()))
    }
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
    /// The envelope does not verify: the receipt was edited or forged, or
    /// is sealed under another key (or under a key that is not set).
    #[error("receipt `{}` failed verification: {source}", path.display())]
    Refused {
        path: PathBuf,
        #[source]
        source: EnvelopeError,
    },
    /// A receipt of the earlier, unsealed format while `PLANRUN_HMAC_KEY`
    /// is set: anyone could have written it.
    #[error(
        "receipt `{}` is not sealed, and `PLANRUN_HMAC_KEY` is set: refusing an unauthenticated receipt",
        path.display()
    )]
    Unsealed { path: PathBuf },
    /// The store could not be asked (a database that does not answer, or
    /// a workspace it does not know): nothing is known about the receipt,
    /// so a caller fails as on any store failure instead of judging the
    /// receipt (never "uncertain", "missing" or "tampered" for an outage).
    #[error(transparent)]
    Store(Box<StoreError>),
}

/// A receipt's stored text: sealed in the checkpoint envelope, pretty-printed
/// (the file store's `.planrun/receipts/<sha256>.json`, the PostgreSQL
/// store's `receipts.receipt`).
pub(crate) fn seal_receipt(receipt: &Receipt, sealer: &Sealer) -> io::Result<String> {
    let value = serde_json::to_value(receipt)?;
    let envelope = sealer.seal(value).map_err(|error| io::Error::other(error.to_string()))?;
    let mut text = serde_json::to_string_pretty(&envelope)?;
    text.push('\n');
    Ok(text)
}

/// Reads a stored receipt for `key` (`path` names it in messages): its seal
/// verified (or, without a key, the earlier unsealed format), its shape
/// checked.
pub(crate) fn open_receipt(text: &str, key: &str, sealer: &Sealer, path: &Path) -> Result<Receipt, ReceiptError> {
    let malformed = |message: String| ReceiptError::Malformed { path: path.to_path_buf(), message };
    let value = parse_strict(text).map_err(|error| malformed(error.to_string()))?;
    let sealed = value.as_object().is_some_and(|object| object.contains_key("schema_version"));
    let value = if sealed {
        sealer.open(text).map_err(|source| ReceiptError::Refused { path: path.to_path_buf(), source })?
    } else if sealer.is_keyed() {
        return Err(ReceiptError::Unsealed { path: path.to_path_buf() });
    } else {
        value
    };
    let receipt: Receipt = serde_json::from_value(value).map_err(|error| malformed(error.to_string()))?;
    if receipt.key != key {
        return Err(malformed(format!("it is for key `{}`", receipt.key)));
    }
    if (receipt.state == ReceiptState::Done) != receipt.result.is_some() {
        return Err(malformed("`result` must be set exactly when the state is `done`".to_string()));
    }
    Ok(receipt)
}

/// The receipts the events of a run's log name: for each idempotency key,
/// the `seq` and link of the last event with a [`RECEIPT_LINK`] (a key
/// whose last such event says `null` left none behind and is not named).
pub(crate) fn named_receipts(audit: &[AuditEvent]) -> BTreeMap<&str, (u64, &str)> {
    let mut named: BTreeMap<&str, (u64, &str)> = BTreeMap::new();
    for event in audit {
        let (Some(link), Some(Value::String(key))) =
            (event.details.get(RECEIPT_LINK), event.details.get("idempotency_key"))
        else {
            continue;
        };
        match link {
            Value::String(link) => named.insert(key.as_str(), (event.seq, link.as_str())),
            _ => named.remove(key.as_str()),
        };
    }
    named
}

/// Holds the receipts that the verified events of run `run_id` name to the
/// links they name, reading each with `get` (the file store's receipt
/// folder, the PostgreSQL store's table): for each idempotency key, the
/// last event with a [`RECEIPT_LINK`] decides — a link means "this
/// receipt, exactly", `null` means the event left none behind. A receipt
/// changed, swapped or removed since is [`StoreError::Tampered`].
pub(crate) fn check_receipt_references(
    run_id: &str,
    audit: &[AuditEvent],
    sealer: &Sealer,
    get: &dyn Fn(&str) -> Result<Option<Receipt>, ReceiptError>,
) -> Result<(), StoreError> {
    let tampered = |reason: String| StoreError::Tampered { id: run_id.to_string(), reason };
    for (key, (seq, link)) in named_receipts(audit) {
        match get(key) {
            Ok(Some(receipt)) if receipt.link(sealer).as_deref() == Some(link) => {}
            Ok(Some(_)) => {
                return Err(tampered(format!(
                    "the receipt for key `{key}` that audit event {seq} used was changed or replaced since"
                )));
            }
            Ok(None) => {
                return Err(tampered(format!("the receipt for key `{key}` that audit event {seq} used is missing")));
            }
            Err(ReceiptError::Store(error)) => return Err(*error),
            Err(error) => return Err(tampered(error.to_string())),
        }
    }
    Ok(())
}
