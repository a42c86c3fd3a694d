//! Bridge runs accepted with `"wait": false` (`POST /runs` answered 202):
//! driven in the background by the node that accepted them, holding their
//! record throughout; and the scan that drives the ones left `queued` by a
//! node that died (or stopped) before driving them, and settles the ones a
//! node stopped driving before they ended (waited for or accepted), and
//! the controller runs a service stopped driving before they ended.
//!
//! The scan runs when the service starts and, with a database store (whose
//! records any node of the workspace may take), every
//! [`SCAN_EVERY`] after that. A record another process holds (its node is
//! driving it) is skipped: opening it is refused while the lock or lease is
//! held, so a run is driven by one node at a time.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::model::RunStatus;
use crate::ops::service::Service;
use crate::ops::service::ServiceError;
use crate::ops::service::adapters::{AdapterKind, AdapterResult};
use crate::ops::service::bridge::{self, BridgeState, BridgeStatus};
use crate::ops::service::bridge_event::{AgentRunObserved, BridgeEvent, RunInterrupted};
use crate::ops::service::controller::{self, ControllerStatus};
use crate::ops::service::durable_task::{Then, run_in_slot};
use crate::ops::service::ids::agent_run_id;
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
            Err(error) => eprintln!("planrun serve: run {run_id} · not driven: {error}"),
        }
    });
}

/// Takes up every unfinished bridge run of the workspace no process holds:
/// a queued one nothing was done for is driven in the background (returns
/// how many); one a service stopped driving before it ended is settled
/// (`settle_interrupted`); so is every controller run a service stopped
/// driving (`settle_interrupted_controllers`). Blocking (it reads the
/// store): run it on a blocking thread.
pub fn drive_queued(service: &Arc<Service>) -> usize {
    let taken = drive_bridge_runs(service);
    settle_interrupted_controllers(service);
    taken
}

/// The bridge runs' part of [`drive_queued`].
fn drive_bridge_runs(service: &Arc<Service>) -> usize {
    let Ok(listed) = service.store.unfinished_records(RecordKind::Bridge) else { return 0 };
    let mut taken = 0;
    for run_id in listed {
        // Held: the node that accepted it (or another scan) drives it.
        // Opened (locked, then read and verified) once: what has ended is
        // let go again at once.
        let Ok((records, state, lines)) = bridge::open_records_and_log(service, &run_id) else { continue };
        match scanned(state.status, lines) {
            Scanned::Final => continue,
            Scanned::Interrupted => {
                // Its agent run, read once: what decides whether to wait and
                // what the bridge run then takes.
                let agent = ObservedAgent::of(service, &state);
                let running = agent.as_ref().and_then(ObservedAgent::status) == Some(RunStatus::Running);
                if service.works_agent_runs && running {
                    // A worker (this node's, or the one holding it now)
                    // drives the agent run on until it pauses or ends; a
                    // later scan then settles the bridge run with that
                    // result. Settled now, it would end `failed` while its
                    // work goes on and succeeds.
                    continue;
                }
                match settle_interrupted(service, records, state, agent) {
                    Ok(state) => {
                        eprintln!("planrun serve: run {} · interrupted: {}", state.run_id, state.status.as_str())
                    }
                    Err(error) => eprintln!("planrun serve: run {run_id} · not settled: {error}"),
                }
                continue;
            }
            Scanned::Untouched => {}
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

/// What the scan finds in a bridge record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scanned {
    /// Queued and nothing was done for it: its log is its `run_created` alone.
    Untouched,
    /// Created, queued or running with more in its log: a service was
    /// driving it and stopped before it ended (under group commit the file
    /// store keeps the checkpoints between the first and the last in
    /// memory, so its state can be the first one).
    Interrupted,
    /// Ended, waiting for a decision, or unreadable (left as it is).
    Final,
}

/// What a bridge record in `status` whose audit log holds `lines` lines is
/// to the scan.
fn scanned(status: BridgeStatus, lines: usize) -> Scanned {
    match status {
        BridgeStatus::Queued if lines == 1 => Scanned::Untouched,
        BridgeStatus::Created | BridgeStatus::Queued | BridgeStatus::Running => Scanned::Interrupted,
        _ => Scanned::Final,
    }
}

/// The agent run of an interrupted bridge run, read once by the scan: its
/// id, and its result when it can be read (it may never have been created).
struct ObservedAgent {
    run_id: String,
    result: Option<AdapterResult>,
}

impl ObservedAgent {
    /// Bridge run `state`'s agent run (`None` for another adapter's run).
    fn of(service: &Service, state: &BridgeState) -> Option<ObservedAgent> {
        (state.adapter == AdapterKind::Agent.name()).then(|| {
            let run_id = agent_run_id(&state.run_id);
            let result = service.adapters.agent.observe(&run_id).ok();
            ObservedAgent { run_id, result }
        })
    }

    /// The status the agent run has reached.
    fn status(&self) -> Option<RunStatus> {
        self.result.as_ref()?.agent.as_ref()?.agent_final_status
    }
}

/// Settles a bridge run whose service stopped driving it, never sending it
/// to the adapter again: when its agent run paused or ended, the bridge run
/// takes its result (`agent_run_observed`, then `approval_requested`,
/// `input_requested` or `run_finished`, as when the agent run is continued outside the
/// service); otherwise it ends `failed` (`run_interrupted`, `run_finished`)
/// with an error that names its agent run, which keeps its own records
/// (`planrun show`, `planrun resume`).
fn settle_interrupted(
    service: &Service,
    mut records: RecordWriter,
    mut state: BridgeState,
    agent: Option<ObservedAgent>,
) -> Result<BridgeState, ServiceError> {
    let ended = agent.as_ref().and_then(ObservedAgent::status).filter(|status| {
        status.is_terminal() || matches!(status, RunStatus::WaitingApproval | RunStatus::WaitingInput)
    });
    if let (Some(agent_final_status), Some(ObservedAgent { run_id, result: Some(result) })) = (ended, &agent) {
        records.event(
            service.now(),
            &BridgeEvent::AgentRunObserved(AgentRunObserved {
                agent_run_id: run_id.clone(),
                agent_final_status: Some(agent_final_status),
                reason: "the service driving the bridge run stopped before it ended".to_string(),
            }),
        )?;
        bridge::apply_result(&mut state, result);
        return Ok(bridge::settle(service, &mut records, state, result)?.state);
    }
    let mut reason = "interrupted: the service driving this run stopped before it ended; it is not sent to the \
                      adapter again"
        .to_string();
    if let Some(ObservedAgent { run_id: agent_run_id, result }) = &agent {
        reason.push_str(&format!(
            " (its agent run `{agent_run_id}` keeps its own records: `planrun show {agent_run_id}`)"
        ));
        // The link stays: the state the record held may be its first
        // checkpoint (under group commit), from before the agent run began.
        state.agent_run_id = Some(agent_run_id.clone());
        if let Some(observed) = result.as_ref().and_then(|result| result.agent.as_ref()) {
            state.agent_final_status = observed.agent_final_status;
            state.agent_state_path = observed.agent_state_path.clone();
        }
    }
    records.event(
        service.now(),
        &BridgeEvent::RunInterrupted(RunInterrupted { last_status: state.status, reason: reason.clone() }),
    )?;
    state.status = BridgeStatus::Failed;
    state.error = Some(reason);
    Ok(bridge::finish(service, &mut records, state, None)?.state)
}

/// Ends every controller run of the workspace left `running` that no
/// process holds: the service driving it stopped before it ended
/// ([`controller::settle_interrupted`]). A controller run is never driven
/// again: its loop decided with what it knew then, and its last bridge run
/// is settled on its own.
fn settle_interrupted_controllers(service: &Service) {
    let Ok(listed) = service.store.unfinished_records(RecordKind::Controller) else { return };
    // Only the status is read here: the whole state is read (as a type)
    // when the run is settled.
    #[derive(serde::Deserialize)]
    struct Status {
        status: ControllerStatus,
    }
    let running = |state: &serde_json::Value| {
        Status::deserialize(state).is_ok_and(|state| state.status == ControllerStatus::Running)
    };
    for run_id in listed {
        // Held: a service is driving it.
        let Ok((handle, loaded)) = service.store.open_record(RecordKind::Controller, &run_id) else { continue };
        if !running(&loaded.state) {
            continue;
        }
        match controller::settle_interrupted(service, RecordWriter::new(handle), loaded) {
            Ok(_) => eprintln!("planrun serve: controller run {run_id} · interrupted: failed"),
            Err(error) => eprintln!("planrun serve: controller run {run_id} · not settled: {error}"),
        }
    }
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
