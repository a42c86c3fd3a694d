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
