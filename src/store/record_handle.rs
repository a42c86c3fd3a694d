//! The seam's side for bridge and controller records: their kinds
//! ([`RecordKind`]), an open record ([`RecordHandle`]), one read back
//! ([`LoadedRecord`]), and the typed writer the service uses over a handle
//! ([`RecordWriter`], [`RecordEvent`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::store::error::serialize_error;
use crate::store::{AuditEvent, AuditTail, NewEvent, StoreError};

/// The top-level records the service keeps besides agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A bridge run (`POST /runs`, or one iteration of a controller run).
    Bridge,
    /// A controller run (`POST /controller/runs`).
    Controller,
}

impl RecordKind {
    /// The field of the record's state that holds its own id.
    pub fn id_field(self) -> &'static str {
        match self {
            RecordKind::Bridge => "run_id",
            RecordKind::Controller => "controller_run_id",
        }
    }
}

/// A bridge or controller record read back and verified.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedRecord {
    /// The record's own state, without the store's checkpoint fields.
    pub state: Value,
    /// One more per checkpoint.
    pub state_version: u64,
    pub audit: Vec<AuditEvent>,
    pub audit_tail: AuditTail,
}

/// An open bridge or controller record, locked for the holder while it lives.
pub trait RecordHandle: Send {
    fn id(&self) -> &str;
    fn kind(&self) -> RecordKind;
    /// The `state_version` of the stored checkpoint (0 before the first).
    fn stored_version(&self) -> u64;
    /// Appends one audit event; returns its `seq`.
    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError>;
    /// Replaces the record's checkpoint with `state` (a JSON object) if the
    /// stored `state_version` is `expected`; returns the new version. A
    /// store may keep a checkpoint in memory until [`RecordHandle::commit`]
    /// (the file store under group commit does, for all but a new record's
    /// first).
    fn checkpoint(&mut self, state: &Value, expected: u64) -> Result<u64, StoreError>;
    /// [`RecordHandle::checkpoint`] for a new record whose whole work is
    /// done in memory and ends in the same request: even its first
    /// checkpoint may be kept until [`RecordHandle::commit`], so the record
    /// writes one state, its last. A crash before then leaves a record
    /// without a state (not listed, its id still taken) while nothing ran
    /// and nothing was answered. The default writes it as `checkpoint` does.
    fn checkpoint_held(&mut self, state: &Value, expected: u64) -> Result<u64, StoreError> {
        self.checkpoint(state, expected)
    }
    /// Writes the last checkpoint if it was kept in memory: called when the
    /// request holding the record ends or pauses. A no-op where every
    /// checkpoint is written when taken (the default).
    fn commit(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Gives the record's lock or lease back (see `RunHandle::release`).
    fn release(self: Box<Self>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// An event of a service record (bridge or controller), typed by its
/// owner: an enum serialised as `{"event_type": …, "details": {…}}`
/// (`#[serde(tag = "event_type", content = "details")]`), which knows its
/// `status` column. The store names no event of its own, so the owner's
/// enum stays the one place a record's events are spelled.
pub trait RecordEvent: Serialize {
    /// The `status` column (`None` writes `null`).
    fn status(&self) -> Option<&'static str>;
}

/// The `event_type` and `details` columns of a [`RecordEvent`].
#[derive(Deserialize)]
struct RecordEventColumns {
    event_type: String,
    details: Map<String, Value>,
}

/// A typed writer over a [`RecordHandle`]: serialises the caller's state
/// and checkpoints it against the version this writer last wrote or read,
/// so that a write based on a stale read is refused.
pub struct RecordWriter {
    handle: Box<dyn RecordHandle>,
    version: u64,
}

impl RecordWriter {
    pub fn new(handle: Box<dyn RecordHandle>) -> Self {
        let version = handle.stored_version();
        RecordWriter { handle, version }
    }

    pub fn id(&self) -> &str {
        self.handle.id()
    }

    /// Appends one event (records have no steps: `step_id` is `null`).
    pub fn event<E: RecordEvent>(&mut self, ts: String, event: &E) -> Result<(), StoreError> {
        let not_an_event = |error: serde_json::Error| serialize_error(Path::new(self.handle.id()), error);
        let value = serde_json::to_value(event).map_err(not_an_event)?;
        let RecordEventColumns { event_type, details } = serde_json::from_value(value).map_err(not_an_event)?;
        let status = event.status();
        self.handle.append_event(NewEvent { ts, event_type: &event_type, step_id: None, status, details }).map(|_| ())
    }

    /// Checkpoints `state` (which must serialise to a JSON object).
    pub fn save<T: Serialize>(&mut self, state: &T) -> Result<(), StoreError> {
        let value = self.value_of(state)?;
        self.version = self.handle.checkpoint(&value, self.version)?;
        Ok(())
    }

    /// Checkpoints `state` as a new record's first, which the store may
    /// hold until the request's last ([`RecordHandle::checkpoint_held`]):
    /// only for work done wholly in memory.
    pub fn save_held<T: Serialize>(&mut self, state: &T) -> Result<(), StoreError> {
        let value = self.value_of(state)?;
        self.version = self.handle.checkpoint_held(&value, self.version)?;
        Ok(())
    }

    fn value_of<T: Serialize>(&self, state: &T) -> Result<Value, StoreError> {
        serde_json::to_value(state).map_err(|error| serialize_error(Path::new(self.handle.id()), error))
    }

    /// Checkpoints `state` as the last one of this request (it ends or
    /// pauses) and writes it ([`RecordHandle::commit`]).
    pub fn save_last<T: Serialize>(&mut self, state: &T) -> Result<(), StoreError> {
        self.save(state)?;
        self.handle.commit()
    }
}
