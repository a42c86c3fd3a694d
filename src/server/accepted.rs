//! Bridge runs accepted with `"wait": false` (`POST /runs` answered 202):
//! driven in the background by the node that accepted them, holding their
//! record throughout; and the scan that drives the ones left `queued` by a
//! node that died (or stopped) before driving them.
//!
//! The scan runs when the service starts and, with a database store (whose
//! records any node of the workspace may take), every
//! [`SCAN_EVERY`] after that. A record another process holds (its node is
//! driving it) is skipped: opening it is refused while the lock or lease is
//! held, so a run is driven by one node at a time.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::server::adapters::AdapterKind;
use crate::server::bridge::{self, BridgeState, BridgeStatus};
use crate::server::durable_task::{Then, run_in_slot};
use crate::server::service::Service;
use crate::store::{RecordKind, RecordWriter};

/// How often a service on a database store looks for queued bridge runs
/// no node is driving.
pub const SCAN_EVERY: Duration = Duration::from_secs(5);

/// Drives accepted bridge run `state` (its record held by `records`) in
/// its own task, as a run that was waited for; an error is logged (the
/// record says how far it got).
pub fn drive_in_background(service: &Arc<Service>, records: RecordWriter, state: BridgeState, adapter: AdapterKind) {
    let service = Arc::clone(service);
    let run_id = state.run_id.clone();
    tokio::spawn(async move {
        let driven = run_in_slot(&service, Then::Answer, move |service| async move {
            bridge::drive_run(&service, records, state, adapter).await
        })
        .await;
        match driven {
            Ok(outcome) => eprintln!("planrun serve: run {run_id} · {}", outcome.state.status.as_str()),
            Err(error) => eprintln!("planrun serve: run {run_id} · not driven: {}", error.message),
        }
    });
}

/// Takes up every queued bridge run of the workspace no process holds and
/// drives each in the background; returns how many it took up. Blocking
/// (it reads the store): run it on a blocking thread.
pub fn drive_queued(service: &Arc<Service>) -> usize {
    let Ok(listed) = service.store.list_records(RecordKind::Bridge) else { return 0 };
    let mut taken = 0;
    for listing in listed {
        if !untouched(service, &listing.run_id) {
            continue;
        }
        // Held: the node that accepted it (or another scan) drives it.
        let Ok((records, state)) = bridge::open_records(service, &listing.run_id) else { continue };
        // Read again under the lock: nobody drove it in between.
        if state.status != BridgeStatus::Queued || !untouched(service, &listing.run_id) {
            continue;
        }
        let Some(adapter) = AdapterKind::parse(&state.adapter) else {
            eprintln!("planrun serve: run {} · not driven: unknown adapter `{}`", state.run_id, state.adapter);
            continue;
        };
        eprintln!("planrun serve: run {} · queued, no node driving it: driving it here", state.run_id);
        drive_in_background(service, records, state, adapter);
        taken += 1;
    }
    taken
}

/// Whether bridge run `run_id` is queued and nothing was done for it: its
/// log is its `run_created` alone. A queued record whose log goes further
/// was being driven by a node that died before its next checkpoint (the
/// file store under group commit keeps the checkpoints between the first
/// and the last in memory): it is left as it is, never sent to the
/// adapter a second time.
fn untouched(service: &Service, run_id: &str) -> bool {
    service.store.read_record(RecordKind::Bridge, run_id).is_ok_and(|loaded| {
        loaded.state.get("status").and_then(Value::as_str) == Some(BridgeStatus::Queued.as_str())
            && loaded.audit.len() == 1
    })
}

/// The scan: once now, then every [`SCAN_EVERY`] when `repeat` (a shared
/// store), until the task is aborted.
pub async fn scan(service: Arc<Service>, repeat: bool) {
    loop {
        let scanning = Arc::clone(&service);
        let _ = tokio::task::spawn_blocking(move || drive_queued(&scanning)).await;
        if !repeat {
            return;
        }
        tokio::time::sleep(SCAN_EVERY).await;
    }
}
