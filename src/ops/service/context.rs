//! The [`Service`]: everything a request needs, built once at start-up and
//! shared by every handler.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Semaphore;

use crate::model::ServicePolicy;
use crate::ops::service::adapters::Adapters;
use crate::ops::service::decision::DecisionBackend;
use crate::runtime::{IdKind, RuntimeEnv, format_timestamp};
use crate::store::{RecordKind, RecordWriter, RunStore, StoreError, create_unique};

/// How many runs may execute at once; further requests wait for a slot.
/// Shutdown takes every slot, which waits for in-flight runs to finish.
pub const MAX_CONCURRENT_RUNS: u32 = 64;

pub struct Service {
    /// Absolute.
    pub workspace: PathBuf,
    pub policy: ServicePolicy,
    pub adapters: Adapters,
    pub decision: DecisionBackend,
    /// Why `auto` chose the stub (start-up line and `/health`).
    pub decision_note: Option<String>,
    pub env: Arc<RuntimeEnv>,
    /// Where bridge and controller records are kept (the agent runs'
    /// store, too).
    pub store: Arc<dyn RunStore>,
    /// `PLANRUN_API_TOKEN`: when set, every endpoint but `/health` needs it.
    pub api_token: Option<String>,
    /// One permit per executing run.
    pub slots: Arc<Semaphore>,
    /// This node takes up the agent runs nobody holds (a database store,
    /// without `--no-worker`): an agent run left `running` is continued
    /// here, or by another such node, until it pauses or ends.
    pub works_agent_runs: bool,
}

impl Service {
    /// The current time as written in records.
    pub fn now(&self) -> String {
        format_timestamp(self.env.clock.now())
    }

    /// Creates a record of `kind` under a fresh id of `id_kind`.
    pub fn create_record(&self, kind: RecordKind, id_kind: IdKind) -> Result<(String, RecordWriter), StoreError> {
        let next_id = || self.env.ids.next_id(id_kind, self.env.clock.as_ref());
        let (id, handle) = create_unique(self.env.ids.attempts(), next_id, |id| self.store.create_record(kind, id))?;
        Ok((id, RecordWriter::new(handle)))
    }

    /// The verified state of record `id` of `kind`, if it exists.
    pub fn read_record(&self, kind: RecordKind, id: &str) -> Result<Option<Value>, StoreError> {
        match self.store.read_record(kind, id) {
            Ok(record) => Ok(Some(record.state)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error),
        }
    }
}
