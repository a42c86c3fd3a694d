//! The service's durability rule under load: `planrun serve` is killed with
//! `SIGKILL` while concurrent clients create stub and agent runs; after a
//! restart on the same workspace every run that was answered `201` reads
//! back `done` and verifies (bridge record through `GET /runs/{id}`, agent
//! run through `planrun verify`), no record is unreadable, and the restarted
//! service takes new runs (ids of runs cut off by the kill are not reused).
//!
//! A `SIGKILL` keeps the page cache, so this proves the records are whole
//! and consistent wherever the process stops, not that they reached the
//! disk: that rests on the answer waiting for the group commit barrier
//! (`docs/service.md`, counted with `strace` in `tests/bench/wrk.sh`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::common::Sandbox;
use crate::serve_harness::{Server, client, get_json};

/// Answered runs to wait for before the kill.
const ANSWERED_BEFORE_KILL: usize = 40;
const CLIENTS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_under_load_loses_no_answered_run() {
    let mut server = Server::start(&[]);
    let answered: Arc<Mutex<Vec<Value>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for index in 0..CLIENTS {
        let (client, url, answered, stop) = (client(), server.url("/runs"), Arc::clone(&answered), Arc::clone(&stop));
        let adapter = if index % 2 == 0 { "stub" } else { "agent" };
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let body = json!({"goal": "test flow pwd to file", "adapter": adapter});
                // A request cut off by the kill has no answer: nothing is
                // promised for it.
                let Ok(response) = client.post(&url).json(&body).send().await else { break };
                if response.status().as_u16() != 201 {
                    break;
                }
                let Ok(state) = response.json::<Value>().await else { break };
                answered.lock().await.push(state);
            }
        }));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while answered.lock().await.len() < ANSWERED_BEFORE_KILL {
        assert!(tokio::time::Instant::now() < deadline, "the service answered too few runs");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Requests are in flight on every client now.
    server.child.kill().expect("SIGKILL planrun serve");
    server.child.wait().expect("reap planrun serve");
    stop.store(true, Ordering::SeqCst);
    for task in clients {
        task.await.expect("client");
    }
    let answered = answered.lock().await.clone();
    assert!(answered.len() >= ANSWERED_BEFORE_KILL);

    let sandbox = std::mem::replace(&mut server.sandbox, Sandbox::new());
    drop(server);
    let restarted = Server::start_in(sandbox, &[]);
    let client = client();
    for state in &answered {
        let id = state["run_id"].as_str().expect("run id");
        let (status, stored) = get_json(&client, &restarted.url(&format!("/runs/{id}"))).await;
        assert_eq!(status, 200, "answered run {id} after the kill: {stored}");
        assert_eq!(&stored, state, "answered run {id} reads back as answered");
        assert_eq!(stored["status"], "done", "{stored}");
        if let Some(agent_run_id) = stored["agent_run_id"].as_str() {
            restarted.sandbox.planrun().args(["verify", agent_run_id]).expect_code(0).run();
        }
    }
    let (status, page) = get_json(&client, &restarted.url("/runs?limit=100")).await;
    assert_eq!(status, 200, "{page}");
    let runs = page["runs"].as_array().expect("runs");
    assert!(runs.iter().all(|run| run["status"] != "unreadable"), "a record cut off by the kill is whole: {page}");
    let (status, body) = crate::serve_harness::post(
        &client,
        &restarted.url("/runs"),
        json!({"goal": "after the restart", "adapter": "stub"}),
    )
    .await;
    assert_eq!((status, body["status"].as_str()), (201, Some("done")), "{body}");
    let fresh = body["run_id"].as_str().expect("run id");
    assert!(answered.iter().all(|state| state["run_id"] != fresh), "{fresh} was answered before the kill");
}

/// Starts a service that aborts at `crash_at` inside the agent run of a
/// waited-for `POST /runs` (no answer), then a service on the same
/// workspace; returns it, the bridge run's id and the state its scan left.
async fn cut_off_then_restarted(crash_at: &str) -> (Server, String, Value) {
    let server = Server::start(&[("PLANRUN_CRASH_AT", crash_at)]);
    let body = json!({"goal": "test flow pwd to file", "adapter": "agent"});
    let sandbox = server.aborted_during("/runs", &body).await;
    let runs = std::fs::read_dir(sandbox.workspace().join("bridge/runs")).expect("bridge records");
    let ids: Vec<String> = runs.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect();
    let [id] = ids.as_slice() else { panic!("one bridge record: {ids:?}") };
    let restarted = Server::start_in(sandbox, &[]);
    let state = restarted.settled(&format!("/runs/{id}"), "created").await;
    (restarted, id.clone(), state)
}

/// A waited-for agent run cut off mid-drive (the service aborts right after
/// its agent run's write, before recording it): the next service's scan
/// ends the bridge run `failed` (`run_interrupted`, then `run_finished`),
/// naming the agent run, and never sends it to the adapter again (the
/// agent run was started once and is not resumed by the service); the
/// agent run keeps its records and `planrun resume` finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_off_mid_drive_is_ended_interrupted_by_the_next_service() {
    let (restarted, id, state) = cut_off_then_restarted("step-2:after_effect").await;
    let agent_run = format!("agent-{id}");
    assert_eq!(state["status"], "failed", "{state}");
    let error = state["error"].as_str().expect("an error");
    assert!(error.starts_with("interrupted: ") && error.contains(&agent_run), "{error}");
    // The bridge run keeps its link to the agent run its error names.
    assert_eq!(state["agent_run_id"], agent_run.as_str(), "{state}");
    assert_eq!(state["agent_final_status"], "running", "{state}");
    let agent_state = state["agent_state_path"].as_str().expect("the agent run's state path");
    assert!(agent_state.ends_with(&format!("runs/{agent_run}/state.json")), "{agent_state}");
    let events = crate::serve_harness::audit_events(&restarted, &id);
    assert_eq!(events.iter().rev().take(2).collect::<Vec<_>>(), ["run_finished", "run_interrupted"], "{events:?}");
    let agent_audit =
        std::fs::read_to_string(restarted.sandbox.workspace().join(format!("runs/{agent_run}/audit.jsonl")))
            .expect("the agent run's log");
    assert_eq!(agent_audit.matches("\"run_started\"").count(), 1, "started once");
    assert_eq!(agent_audit.matches("\"run_resumed\"").count(), 0, "never continued by the service");
    restarted.sandbox.planrun().args(["resume", &agent_run]).expect_code(0).run();
    restarted.sandbox.planrun().args(["verify", &agent_run]).expect_code(0).run();
    let (_, after) = get_json(&client(), &restarted.url(&format!("/runs/{id}"))).await;
    assert_eq!(after, state, "an ended bridge run stays as it ended");
}

/// Cut off after its agent run ended (before the bridge record's last
/// checkpoint): the scan takes the agent run's result, `done`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_off_after_its_agent_run_ended_takes_its_result() {
    let (restarted, id, state) = cut_off_then_restarted("step-4:after_checkpoint").await;
    assert_eq!(
        (state["status"].as_str(), state["agent_final_status"].as_str()),
        (Some("done"), Some("done")),
        "{state}"
    );
    let events = crate::serve_harness::audit_events(&restarted, &id);
    assert_eq!(events.iter().rev().take(2).collect::<Vec<_>>(), ["run_finished", "agent_run_observed"], "{events:?}");
    restarted.sandbox.planrun().args(["verify", &format!("agent-{id}")]).expect_code(0).run();
}

/// A controller run cut off mid-loop (the service aborts inside its first
/// bridge run's agent run): the next service's scan ends it `failed`
/// (`controller_interrupted`, then `controller_finished`, `stop_reason =
/// "interrupted"`), naming the bridge run it started, which is settled on
/// its own; nothing is decided or run again (one decision, one agent run
/// start, before and after the restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_run_cut_off_mid_loop_is_ended_interrupted_by_the_next_service() {
    let server = Server::start(&[("PLANRUN_CRASH_AT", "step-2:after_effect")]);
    let client = client();
    let sandbox = server.aborted_during("/controller/runs", &json!({"goal": "test flow pwd to file"})).await;
    let records = std::fs::read_dir(sandbox.workspace().join("bridge/runs")).expect("records");
    let mut ids: Vec<String> =
        records.flatten().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect();
    ids.sort();
    let [bridge_id, controller_id] = ids.as_slice() else { panic!("a bridge and a controller record: {ids:?}") };
    assert!(bridge_id.starts_with(&format!("bri-{controller_id}-i0")), "{ids:?}");
    let running = std::fs::read_to_string(
        sandbox.workspace().join(format!("bridge/runs/{controller_id}/controller_audit.jsonl")),
    )
    .expect("controller log");
    assert!(!running.contains("controller_finished"), "cut off before it ended");

    let restarted = Server::start_in(sandbox, &[]);
    let state = restarted.settled(&format!("/controller/runs/{controller_id}"), "running").await;
    assert_eq!(
        (state["status"].as_str(), state["stop_reason"].as_str()),
        (Some("failed"), Some("interrupted")),
        "{state}"
    );
    let error = state["error"].as_str().expect("an error");
    assert!(error.starts_with("interrupted: ") && error.contains(bridge_id.as_str()), "{error}");
    assert_eq!(state["linked_runs"][0]["bridge_run_id"], bridge_id.as_str(), "{state}");
    let log = restarted.record(controller_id, "controller_audit.jsonl");
    let events: Vec<String> = log
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("JSON")["event_type"].as_str().expect("type").to_string()
        })
        .collect();
    assert_eq!(
        events.iter().rev().take(2).collect::<Vec<_>>(),
        ["controller_finished", "controller_interrupted"],
        "{events:?}"
    );
    assert_eq!(events.iter().filter(|event| *event == "decision_made").count(), 1, "decided once: {events:?}");

    // Its bridge run is settled too (by the same scan, before it), and its
    // agent run was started once.
    let (_, bridge) = get_json(&client, &restarted.url(&format!("/runs/{bridge_id}"))).await;
    assert_eq!(bridge["status"], "failed", "{bridge}");
    let agent_audit =
        std::fs::read_to_string(restarted.sandbox.workspace().join(format!("runs/agent-{bridge_id}/audit.jsonl")))
            .expect("the agent run's log");
    assert_eq!(agent_audit.matches("\"run_started\"").count(), 1, "started once");
    let (_, after) = get_json(&client, &restarted.url(&format!("/controller/runs/{controller_id}"))).await;
    assert_eq!(after, state, "an ended controller run stays as it ended");
}
