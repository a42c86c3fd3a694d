//! Ids of bridge and controller runs.
//!
//! Bridge runs started by `POST /runs` are `br-…`, controller runs are
//! `ctrl-…`; the bridge runs a controller starts are `bri-<ctrl id>-i<n>` and
//! every bridge run's agent run is `agent-<bridge id>` (the seed's mapping).
//! Production ids are `br-20260101T000000Z-3f9a2c` (start time plus a random
//! suffix); under the `PLANRUN_TEST_CLOCK` hook they count per kind
//! (`br-0001`, `ctrl-0001`) so that records are byte-stable. Uniqueness is
//! not trusted to the generator: record folders are created with
//! `create_dir`, and a taken id is skipped.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::runtime::Clock;

/// The two kinds of top-level service runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Bridge,
    Controller,
}

impl RunKind {
    pub fn prefix(self) -> &'static str {
        match self {
            RunKind::Bridge => "br",
            RunKind::Controller => "ctrl",
        }
    }
}

/// How ids are made.
pub enum ServiceIds {
    /// Start time plus a random suffix.
    System,
    /// One counter per kind, for tests.
    Sequential { bridge: AtomicU64, controller: AtomicU64 },
}

impl ServiceIds {
    pub fn sequential() -> Self {
        ServiceIds::Sequential { bridge: AtomicU64::new(0), controller: AtomicU64::new(0) }
    }

    /// The next candidate id of `kind`.
    pub fn next(&self, kind: RunKind, clock: &dyn Clock) -> String {
        match self {
            ServiceIds::System => {
                let stamp = clock.now().strftime("%Y%m%dT%H%M%SZ").to_string();
                let random = uuid::Uuid::now_v7().simple().to_string();
                format!("{}-{stamp}-{}", kind.prefix(), &random[random.len() - 6..])
            }
            ServiceIds::Sequential { bridge, controller } => {
                let counter = match kind {
                    RunKind::Bridge => bridge,
                    RunKind::Controller => controller,
                };
                format!("{}-{:04}", kind.prefix(), counter.fetch_add(1, Ordering::SeqCst) + 1)
            }
        }
    }
}

/// The bridge run a controller starts at `iteration`.
pub fn controller_bridge_id(controller_run_id: &str, iteration: u32) -> String {
    format!("bri-{controller_run_id}-i{iteration}")
}

/// The agent run of a bridge run.
pub fn agent_run_id(bridge_run_id: &str) -> String {
    format!("agent-{bridge_run_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::SystemClock;
    use crate::store::validate_run_id;

    #[test]
    fn ids_follow_the_seed_mapping_and_are_valid_run_ids() {
        let ids = ServiceIds::sequential();
        assert_eq!(ids.next(RunKind::Bridge, &SystemClock), "br-0001");
        assert_eq!(ids.next(RunKind::Controller, &SystemClock), "ctrl-0001");
        assert_eq!(ids.next(RunKind::Bridge, &SystemClock), "br-0002");
        assert_eq!(controller_bridge_id("ctrl-0001", 0), "bri-ctrl-0001-i0");
        assert_eq!(agent_run_id("bri-ctrl-0001-i0"), "agent-bri-ctrl-0001-i0");
        for kind in [RunKind::Bridge, RunKind::Controller] {
            let id = ServiceIds::System.next(kind, &SystemClock);
            let longest = agent_run_id(&controller_bridge_id(&id, 99));
            assert!(validate_run_id(&longest).is_ok(), "{longest}");
            assert!(id.starts_with(kind.prefix()));
        }
    }
}
