//! [`PgRecord`]: a bridge or controller record leased by this process
//! (the [`RecordHandle`] impl); its events are written as they happen.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_postgres::types::ToSql;

use crate::store::records::version::compare_version;
use crate::store::{LoadedRecord, NewEvent, RecordHandle, RecordKind, Sealer, StoreError};

use super::lease::{HandleParts, HeldLease, refusal};
use super::lines::{event_line, sealed_text};
use super::session::Session;
use super::session::{connect, execute};
use super::sql;

/// A bridge or controller record leased by this process.
pub(super) struct PgRecord {
    session: Arc<Session>,
    lease: HeldLease,
    kind: RecordKind,
    location: PathBuf,
    sealer: Sealer,
    stored_version: u64,
    audit_seq: u64,
    audit_hash: Option<String>,
}

/// The fields the store adds to a record's state in its checkpoint.
const RECORD_FIELDS: [&str; 3] = ["state_version", "audit_seq", "audit_hash"];

impl PgRecord {
    /// The handle of a record of `kind` made of `parts`; `loaded` when
    /// it has a checkpoint (it was claimed, not created).
    pub(super) fn new(parts: HandleParts, kind: RecordKind, loaded: Option<&LoadedRecord>) -> PgRecord {
        let HandleParts { session, lease, sealer, location } = parts;
        PgRecord {
            session,
            lease,
            kind,
            location,
            sealer,
            stored_version: loaded.map_or(0, |loaded| loaded.state_version),
            audit_seq: loaded.map_or(0, |loaded| loaded.audit_tail.seq),
            audit_hash: loaded.and_then(|loaded| loaded.audit_tail.hash.clone()),
        }
    }

    fn refuse(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Io {
            action: "serialize",
            path: self.location.clone(),
            source: std::io::Error::other(message.to_string()),
        }
    }
}

impl RecordHandle for PgRecord {
    fn id(&self) -> &str {
        self.lease.id()
    }

    fn kind(&self) -> RecordKind {
        self.kind
    }

    fn stored_version(&self) -> u64 {
        self.stored_version
    }

    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError> {
        self.lease.before_write()?;
        let seq = self.audit_seq + 1;
        let line = event_line(self.lease.id(), seq, self.audit_hash.as_deref(), event, false, &self.sealer)
            .map_err(|error| self.refuse(error))?;
        let hash = self.sealer.link(line.as_bytes());
        let key = self.lease.key().clone();
        let seq_i = i64::try_from(seq).unwrap_or(i64::MAX);
        let stored = hash.clone();
        let written = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 7] = [&key.kind, &key.id, &key.owner, &key.token, &seq_i, &line, &stored];
            if execute(&client, sql::APPEND_RECORD_EVENT, &params, "append an audit event").await? == 1 {
                Ok(())
            } else {
                Err(StoreError::LeaseLost { id: key.id.clone() })
            }
        });
        self.lease.after_append(written)?;
        self.audit_seq = seq;
        self.audit_hash = Some(hash);
        Ok(seq)
    }

    fn checkpoint(&mut self, state: &Value, expected: u64) -> Result<u64, StoreError> {
        compare_version(self.lease.id(), self.stored_version, expected)?;
        let Value::Object(state) = state else {
            return Err(self.refuse("a record's state must be a JSON object"));
        };
        if let Some(field) = RECORD_FIELDS.iter().find(|field| state.contains_key(**field)) {
            return Err(self.refuse(format!("a record's state may not hold `{field}`: the store writes it")));
        }
        let id_field = self.kind.id_field();
        if state.get(id_field).and_then(Value::as_str) != Some(self.lease.id()) {
            return Err(self.refuse(format!("the state's `{id_field}` is not `{}`", self.lease.id())));
        }
        let version = self.stored_version + 1;
        let status = state.get("status").and_then(Value::as_str).map(str::to_string);
        let mut payload = state.clone();
        payload.insert("state_version".into(), json!(version));
        payload.insert("audit_seq".into(), json!(self.audit_seq));
        payload.insert("audit_hash".into(), json!(self.audit_hash));
        let text = sealed_text(&self.sealer, self.lease.id(), Value::Object(payload))?;
        let key = self.lease.key().clone();
        let to_i64 = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        let (expected_i, version_i) = (to_i64(expected), to_i64(version));
        let sent = self.lease.before_write()?;
        let written = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 9] =
                [&key.kind, &key.id, &key.owner, &key.token, &expected_i, &text, &status, &version_i, &key.secs];
            if execute(&client, sql::RECORD_CHECKPOINT, &params, "write the record's checkpoint").await? == 1 {
                Ok(())
            } else {
                Err(refusal(&client, &key, expected).await)
            }
        });
        self.lease.after_write(sent, written)?;
        self.stored_version = version;
        Ok(version)
    }

    fn release(mut self: Box<Self>) -> Result<(), StoreError> {
        self.lease.release()
    }
}
