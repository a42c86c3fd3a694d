//! `POST /controller/runs` over loopback HTTP: the controller runs the
//! agent through bridge runs, applies a recovery rewrite at most once, stops
//! on the decision backend's word, and a blocked goal runs nothing. Golden
//! snapshots of controller and bridge records are in `snapshots/server/`.

use serde_json::{Value, json};

use crate::serve_harness::{Server, client, get_json, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_runs_the_agent_and_stops_on_success() {
    let server = Server::start(&[]);
    let client = client();
    let (status, body) = post(&client, &server.url("/controller/runs"), json!({"goal": "test flow pwd to file"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["controller_run_id"], "ctrl-0001");
    assert_eq!(body["final_status"], "done");
    assert_eq!(body["stop_reason"], "decision_stop");
    assert_eq!(
        body["linked_runs"],
        json!([{"bridge_run_id": "bri-ctrl-0001-i0", "agent_run_id": "agent-bri-ctrl-0001-i0"}])
    );
    assert!(server.exists("runs/agent-bri-ctrl-0001-i0/state.json"));
    let (status, persisted) = get_json(&client, &server.url("/controller/runs/ctrl-0001")).await;
    assert_eq!((status, &persisted), (200, &body));
    let (_, bridge) = get_json(&client, &server.url("/runs/bri-ctrl-0001-i0")).await;
    assert_eq!(bridge["controller_run_id"], "ctrl-0001");
    server.snapshot_records("controller_success", "ctrl-0001", &["controller_state.json", "controller_audit.jsonl"]);
    server.snapshot_records("controller_success_bridge", "bri-ctrl-0001-i0", &["state.json", "audit.jsonl"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_applies_a_recovery_rewrite_once() {
    let server = Server::start(&[]);
    let (_, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": "test flow bad template"})).await;
    assert_eq!(body["final_status"], "done");
    assert_eq!(body["iterations"], 2);
    assert_eq!(body["recovery_attempted"], true);
    assert_eq!(body["current_goal"], "test flow pwd to file");
    assert_eq!(body["bridge_results"][0]["failure_class"], "template_error");
    server.snapshot_records("controller_recovery", "ctrl-0001", &["controller_state.json", "controller_audit.jsonl"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_skips_recovery_without_a_rule_and_stops_failed() {
    let server = Server::start(&[]);
    let (_, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": "test deny rm"})).await;
    assert_eq!(body["final_status"], "failed");
    assert_eq!(body["stop_reason"], "decision_stop");
    assert_eq!(body["iterations"], 1);
    assert_eq!(body["bridge_results"][0]["failure_class"], "security_denied");
    let audit = server.record("ctrl-0001", "controller_audit.jsonl");
    let events: Vec<String> = audit
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("JSON")["event_type"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(
        events,
        [
            "controller_started",
            "decision_made",
            "bridge_run_started",
            "bridge_run_finished",
            "recovery_considered",
            "recovery_skipped",
            "decision_made",
            "controller_finished"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_controller_goal_runs_nothing() {
    let server = Server::start(&[]);
    let (_, body) =
        post(&client(), &server.url("/controller/runs"), json!({"goal": "please rm -rf the workspace"})).await;
    assert_eq!(body["final_status"], "failed");
    assert_eq!(body["stop_reason"], "prompt_blocked");
    assert_eq!(body["iterations"], 0);
    assert!(!server.exists("runs"));
}
