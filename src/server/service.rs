//! The [`Service`]: everything a request needs, built once at start-up and
//! shared by every handler.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::runtime::{RuntimeEnv, format_timestamp};
use crate::server::adapters::Adapters;
use crate::server::approvals::Decisions;
use crate::server::decision::DecisionBackend;
use crate::server::ids::ServiceIds;
use crate::server::records::records_root;
use crate::server::service_policy::ServicePolicy;

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
    pub ids: ServiceIds,
    /// `PLANRUN_API_TOKEN`: when set, every endpoint but `/health` needs it.
    pub api_token: Option<String>,
    /// One permit per executing run.
    pub slots: Arc<Semaphore>,
    /// Bridge runs with an approve or reject in progress.
    pub decisions: Decisions,
}

impl Service {
    /// The current time as written in records.
    pub fn now(&self) -> String {
        format_timestamp(self.env.clock.now())
    }

    /// `<workspace>/bridge/runs`.
    pub fn records_root(&self) -> PathBuf {
        records_root(&self.workspace)
    }
}
