//! The checkpoint envelope of `state.json`:
//! `{"schema_version": 1, "payload": {…}, "sha256": "<hex>"}`, or
//! `"hmac_sha256"` instead of `"sha256"` when `PLANRUN_HMAC_KEY` is set.
//! The digest is taken over the canonical JSON of `payload`.
//!
//! A plain SHA-256 detects corruption and careless edits; anyone who can
//! write the file can also recompute it. The HMAC (keyed) form also detects
//! deliberate edits by someone without the key.

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value, json};
use sha2::Sha256;

use std::path::Path;

use crate::digest::{hex, sha256_hex};
use crate::store::StoreError;
use crate::store::error::serialize_error;
use crate::store::records::canonical::{CanonicalError, canonical_json, parse_strict};

/// The only envelope version this planrun reads and writes.
pub const SCHEMA_VERSION: u64 = 1;

/// Why a checkpoint was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("not strict JSON: {0}")]
    Json(#[from] CanonicalError),
    #[error("the envelope must be an object with `schema_version`, `payload` and `sha256` or `hmac_sha256`")]
    Shape,
    #[error("unknown envelope field `{0}`")]
    UnknownField(String),
    #[error("unsupported schema version {found}; this planrun reads version {SCHEMA_VERSION}")]
    SchemaVersion { found: String },
    #[error("digest mismatch: the payload was changed after it was written")]
    DigestMismatch,
    #[error("the checkpoint is signed with `hmac_sha256` but `PLANRUN_HMAC_KEY` is not set")]
    KeyMissing,
    #[error(
        "`PLANRUN_HMAC_KEY` is set but the checkpoint carries only a plain `sha256`; refusing an unauthenticated checkpoint"
    )]
    Unauthenticated,
}

/// How checkpoints are sealed: plain SHA-256, or HMAC-SHA256 with a key.
#[derive(Clone, Default)]
pub struct Sealer {
    key: Option<Vec<u8>>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(if self.key.is_some() { "Sealer(hmac_sha256)" } else { "Sealer(sha256)" })
    }
}

impl Sealer {
    /// Plain SHA-256.
    pub fn plain() -> Self {
        Sealer { key: None }
    }

    /// HMAC-SHA256 with `key`.
    pub fn keyed(key: impl Into<Vec<u8>>) -> Self {
        Sealer { key: Some(key.into()) }
    }

    /// HMAC-SHA256 of `canonical` under `key`, as hex. `None` only if the
    /// key were refused (HMAC takes keys of any length), which fails closed.
    fn mac_hex(key: &[u8], canonical: &str) -> Option<String> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).ok()?;
        mac.update(canonical.as_bytes());
        Some(hex(&mac.finalize().into_bytes()))
    }

    /// Whether links and seals are keyed (HMAC-SHA256).
    pub fn is_keyed(&self) -> bool {
        self.key.is_some()
    }

    /// The link of `bytes` in a hash chain: SHA-256, or HMAC-SHA256 under
    /// the key, as hex. Keyed links are what makes a chain unforgeable
    /// without the key: a plain chain can be recomputed by anyone who can
    /// write the file.
    pub fn link(&self, bytes: &[u8]) -> String {
        match &self.key {
            Some(key) => {
                let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
                mac.update(bytes);
                hex(&mac.finalize().into_bytes())
            }
            None => sha256_hex(bytes),
        }
    }

    /// The next link of a chain over `line`s: the link of the previous
    /// link's hex, a newline, and `line`.
    pub fn chain(&self, previous: Option<&str>, line: &[u8]) -> String {
        let mut bytes = Vec::with_capacity(line.len() + 65);
        bytes.extend_from_slice(previous.unwrap_or_default().as_bytes());
        bytes.push(b'\n');
        bytes.extend_from_slice(line);
        self.link(&bytes)
    }

    /// Wraps a payload in an envelope.
    pub fn seal(&self, payload: Value) -> Result<Value, CanonicalError> {
        let canonical = canonical_json(&payload)?;
        let mut envelope = Map::new();
        envelope.insert("schema_version".into(), json!(SCHEMA_VERSION));
        envelope.insert("payload".into(), payload);
        match &self.key {
            Some(key) => {
                let digest = Self::mac_hex(key, &canonical)
                    .ok_or_else(|| CanonicalError("`PLANRUN_HMAC_KEY` cannot be used as an HMAC key".to_string()))?;
                envelope.insert("hmac_sha256".into(), json!(digest));
            }
            None => {
                envelope.insert("sha256".into(), json!(sha256_hex(canonical.as_bytes())));
            }
        }
        Ok(Value::Object(envelope))
    }

    /// Seals `payload` into `buffer` as a checkpoint file holds it: the
    /// envelope pretty-printed, with a final newline (`path` names the file
    /// in errors).
    pub(crate) fn seal_into(&self, path: &Path, payload: Value, buffer: &mut Vec<u8>) -> Result<(), StoreError> {
        let envelope = self.seal(payload).map_err(|error| serialize_error(path, error))?;
        buffer.clear();
        serde_json::to_writer_pretty(&mut *buffer, &envelope).map_err(|error| serialize_error(path, error))?;
        buffer.push(b'\n');
        Ok(())
    }

    /// Verifies an envelope's text and returns its payload.
    pub fn open(&self, text: &str) -> Result<Value, EnvelopeError> {
        let Value::Object(mut envelope) = parse_strict(text)? else {
            return Err(EnvelopeError::Shape);
        };
        if let Some(unknown) =
            envelope.keys().find(|key| !["schema_version", "payload", "sha256", "hmac_sha256"].contains(&key.as_str()))
        {
            return Err(EnvelopeError::UnknownField(unknown.clone()));
        }
        match envelope.get("schema_version") {
            Some(Value::Number(number)) if number.as_u64() == Some(SCHEMA_VERSION) => {}
            Some(other) => return Err(EnvelopeError::SchemaVersion { found: other.to_string() }),
            None => return Err(EnvelopeError::Shape),
        }
        let payload = envelope.remove("payload").ok_or(EnvelopeError::Shape)?;
        let canonical = canonical_json(&payload)?;
        let plain = envelope.get("sha256").and_then(Value::as_str);
        let keyed = envelope.get("hmac_sha256").and_then(Value::as_str);
        match (&self.key, plain, keyed) {
            (_, Some(_), Some(_)) => Err(EnvelopeError::Shape),
            (None, Some(digest), None) => {
                if constant_time_eq(digest.as_bytes(), sha256_hex(canonical.as_bytes()).as_bytes()) {
                    Ok(payload)
                } else {
                    Err(EnvelopeError::DigestMismatch)
                }
            }
            (Some(_), Some(_), None) => Err(EnvelopeError::Unauthenticated),
            (None, None, Some(_)) => Err(EnvelopeError::KeyMissing),
            (Some(key), None, Some(digest)) => {
                let expected = Self::mac_hex(key, &canonical).ok_or(EnvelopeError::DigestMismatch)?;
                if constant_time_eq(digest.as_bytes(), expected.as_bytes()) {
                    Ok(payload)
                } else {
                    Err(EnvelopeError::DigestMismatch)
                }
            }
            (_, None, None) => Err(EnvelopeError::Shape),
        }
    }
}

/// Compares without an early exit, so timing does not reveal how many
/// leading characters matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload() -> Value {
        json!({"run_id": "r", "state_version": 3, "nested": {"b": 1, "a": [true, null]}})
    }

    #[test]
    fn sealed_payloads_open_and_edits_are_detected() {
        for sealer in [Sealer::plain(), Sealer::keyed(b"secret".to_vec())] {
            let envelope = sealer.seal(payload()).expect("seal");
            let text = serde_json::to_string_pretty(&envelope).expect("text");
            assert_eq!(sealer.open(&text).expect("open"), payload());
            let tampered = text.replace("\"state_version\": 3", "\"state_version\": 4");
            assert_ne!(tampered, text);
            assert_eq!(sealer.open(&tampered), Err(EnvelopeError::DigestMismatch), "{sealer:?}");
        }
    }

    #[test]
    fn keys_and_versions_are_enforced() {
        let plain = serde_json::to_string(&Sealer::plain().seal(payload()).expect("seal")).expect("text");
        let keyed = serde_json::to_string(&Sealer::keyed(b"k".to_vec()).seal(payload()).expect("seal")).expect("text");
        assert_eq!(Sealer::keyed(b"k".to_vec()).open(&plain), Err(EnvelopeError::Unauthenticated));
        assert_eq!(Sealer::plain().open(&keyed), Err(EnvelopeError::KeyMissing));
        assert_eq!(Sealer::keyed(b"other".to_vec()).open(&keyed), Err(EnvelopeError::DigestMismatch));
        let v2 = plain.replace("\"schema_version\":1", "\"schema_version\":2");
        assert!(matches!(Sealer::plain().open(&v2), Err(EnvelopeError::SchemaVersion { .. })));
        let extra = plain.replacen('{', "{\"note\":1,", 1);
        assert_eq!(Sealer::plain().open(&extra), Err(EnvelopeError::UnknownField("note".to_string())));
        let duplicate = plain.replacen('{', "{\"schema_version\":1,", 1);
        assert!(matches!(Sealer::plain().open(&duplicate), Err(EnvelopeError::Json(_))));
    }
}
