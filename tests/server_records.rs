//! Bridge and controller records are kept by the run store: sealed, chained
//! and verified when read back. A tampered record is refused over HTTP, and
//! a decision on it changes nothing.

use serde_json::{Value, json};

use crate::serve_harness::{Server, client, error_code, get_json, post, start_with_tickets};

fn record_path(server: &Server, run_id: &str, name: &str) -> std::path::PathBuf {
    server.sandbox.workspace().join("bridge/runs").join(run_id).join(name)
}

/// Replaces `from` by `to` in a record file; returns the original text.
fn tamper(server: &Server, run_id: &str, name: &str, from: &str, to: &str) -> String {
    let path = record_path(server, run_id, name);
    let text = std::fs::read_to_string(&path).expect("record");
    assert!(text.contains(from), "{name} holds {from}");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("tamper");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_bridge_or_controller_record_is_refused_when_read_back() {
    let server = Server::start(&[]);
    let client = client();
    let (status, body) = post(&client, &server.url("/runs"), json!({"goal": "say hi", "adapter": "local_echo"})).await;
    assert_eq!((status, body["status"].as_str()), (201, Some("done")), "{body}");
    let (status, persisted) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!((status, &persisted), (200, &body), "the intact record answers its payload, without store fields");
    assert!(persisted.get("state_version").is_none() && persisted.get("audit_hash").is_none());

    let original = tamper(&server, "br-0001", "state.json", "\"status\": \"done\"", "\"status\": \"failed\"");
    assert_eq!(error_code(client.get(server.url("/runs/br-0001"))).await, (409, "records_invalid".into()));
    std::fs::write(record_path(&server, "br-0001", "state.json"), original).expect("restore");
    let original = tamper(&server, "br-0001", "audit.jsonl", "run_created", "run_CREATED");
    assert_eq!(error_code(client.get(server.url("/runs/br-0001"))).await, (409, "records_invalid".into()));
    std::fs::write(record_path(&server, "br-0001", "audit.jsonl"), original).expect("restore");
    assert_eq!(get_json(&client, &server.url("/runs/br-0001")).await.0, 200, "restored, it verifies again");

    let (status, body) = post(&client, &server.url("/controller/runs"), json!({"goal": "test flow pwd to file"})).await;
    assert_eq!(status, 201, "{body}");
    tamper(&server, "ctrl-0001", "controller_state.json", "\"iterations\": 1", "\"iterations\": 9");
    assert_eq!(error_code(client.get(server.url("/controller/runs/ctrl-0001"))).await, (409, "records_invalid".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_on_a_tampered_bridge_record_changes_nothing() {
    let server = start_with_tickets(&[]);
    let client = client();
    let (status, waiting) =
        post(&client, &server.url("/runs"), json!({"goal": "close ticket", "adapter": "agent"})).await;
    assert_eq!((status, waiting["status"].as_str()), (201, Some("waiting_approval")), "{waiting}");
    let fingerprint = waiting["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    tamper(&server, "br-0001", "state.json", "\"adapter\": \"agent\"", "\"adapter\": \"stub\"");
    let audit_before = server.record("br-0001", "audit.jsonl");
    let agent_state = server.sandbox.workspace().join("runs/agent-br-0001/state.json");
    let agent_before = std::fs::read_to_string(&agent_state).expect("agent state");
    let approve = client.post(server.url("/runs/br-0001/approve")).json(&json!({"fingerprint": fingerprint}));
    assert_eq!(error_code(approve).await, (409, "records_invalid".into()));
    let reject = client.post(server.url("/runs/br-0001/reject")).json(&json!({}));
    assert_eq!(error_code(reject).await, (409, "records_invalid".into()));
    assert_eq!(server.record("br-0001", "audit.jsonl"), audit_before, "nothing logged");
    assert_eq!(std::fs::read_to_string(&agent_state).expect("agent state"), agent_before, "the agent run is untouched");
    let tickets: Value = serde_json::from_str(
        &std::fs::read_to_string(server.sandbox.workspace().join("tickets.json")).expect("tickets"),
    )
    .expect("JSON");
    assert_eq!(tickets["tickets"]["ticket-7"]["close_count"], 0, "nothing closed");
}
