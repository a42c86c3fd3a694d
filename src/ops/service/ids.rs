//! The ids the service derives from generated ones (a fixed mapping).
//!
//! Bridge runs started by `POST /runs` are `br-…` and controller runs
//! `ctrl-…`, both from the injected generator
//! ([`crate::runtime::IdGen`], kinds [`crate::runtime::IdKind::Bridge`] and
//! [`crate::runtime::IdKind::Controller`]): `br-20260101T000000Z-3f9a2c` in
//! production, `br-0001`, `ctrl-0001` under the `PLANRUN_TEST_CLOCK` hook.
//! Derived from those: the bridge runs a controller starts are
//! `bri-<ctrl id>-i<n>`, and every bridge run's agent run is
//! `agent-<bridge id>`.

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
    use crate::runtime::{IdGen, IdKind, SequentialIds, SystemClock, SystemIds};
    use crate::store::validate_run_id;

    #[test]
    fn ids_are_numbered_per_kind_derive_their_children_and_are_valid_run_ids() {
        let ids = SequentialIds::default();
        assert_eq!(ids.next_id(IdKind::Bridge, &SystemClock), "br-0001");
        assert_eq!(ids.next_id(IdKind::Controller, &SystemClock), "ctrl-0001");
        assert_eq!(ids.next_id(IdKind::Bridge, &SystemClock), "br-0002");
        assert_eq!(controller_bridge_id("ctrl-0001", 0), "bri-ctrl-0001-i0");
        assert_eq!(agent_run_id("bri-ctrl-0001-i0"), "agent-bri-ctrl-0001-i0");
        for kind in [IdKind::Bridge, IdKind::Controller] {
            let id = SystemIds.next_id(kind, &SystemClock);
            let longest = agent_run_id(&controller_bridge_id(&id, 99));
            assert!(validate_run_id(&longest).is_ok(), "{longest}");
            assert!(id.starts_with(kind.prefix()));
        }
    }
}
