//! A bridge run reads through to its agent run: when the agent run a
//! waiting bridge run names is approved and resumed, rejected or cancelled
//! with the CLI on the same workspace, `GET /runs/{id}` shows the agent
//! run's real status (and records it), and the HTTP approve and reject
//! answer 409 naming it, instead of leaving the bridge run waiting for ever.

use serde_json::{Value, json};

use crate::serve_harness::{Server, audit_events, client, close_count, get_json, post, start_with_tickets};

/// `POST /runs` "close ticket" with the agent adapter: waiting for approval.
async fn waiting_run(server: &Server, client: &reqwest::Client) -> Value {
    let (status, body) = post(client, &server.url("/runs"), json!({"goal": "close ticket", "adapter": "agent"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"], "waiting_approval", "{body}");
    body
}

/// The HTTP approve of a bridge run its agent run has left: 409 naming the
/// real status (the first refusal may bring the record up to date); further
/// approves and rejects change nothing.
async fn approve_is_refused(server: &Server, client: &reqwest::Client, fingerprint: &str, agent_status: &str) {
    let approve = || client.post(server.url("/runs/br-0001/approve")).json(&json!({"fingerprint": fingerprint})).send();
    let response = approve().await.expect("approve");
    assert_eq!(response.status().as_u16(), 409);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "run_not_waiting", "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains(&format!("its agent run `agent-br-0001` is `{agent_status}`")), "{message}");
    let settled = audit_events(server, "br-0001");
    assert_eq!(settled.last().map(String::as_str), Some("run_finished"), "{settled:?}");
    assert_eq!(approve().await.expect("approve").status().as_u16(), 409);
    let (status, _) = post(client, &server.url("/runs/br-0001/reject"), json!({})).await;
    assert_eq!(status, 409);
    assert_eq!(audit_events(server, "br-0001"), settled, "a refused decision logs nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_and_resumed_with_the_cli_shows_done() {
    let server = start_with_tickets(&[]);
    let client = client();
    let waiting = waiting_run(&server, &client).await;
    let fingerprint = waiting["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    let cli = || server.sandbox.planrun();
    cli().args(["approve", "agent-br-0001", "--fingerprint", &fingerprint]).expect_code(0).run();
    cli().args(["resume", "agent-br-0001"]).expect_code(0).run();
    assert_eq!(close_count(&server), 1);

    let (status, shown) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["status"], "done", "{shown}");
    assert_eq!(shown["agent_final_status"], "done");
    assert_eq!(shown["exit_code"], 0);
    assert_eq!(shown["pending_action"], Value::Null);
    let events = audit_events(&server, "br-0001");
    assert_eq!(events[events.len() - 2..], ["agent_run_observed", "run_finished"], "{events:?}");
    // The record now says so itself: a second read changes nothing.
    let (_, again) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(again, shown);
    assert_eq!(audit_events(&server, "br-0001").len(), events.len());

    approve_is_refused(&server, &client, &fingerprint, "done").await;
    assert_eq!(close_count(&server), 1, "the ticket is closed exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_with_the_cli_shows_rejected() {
    let server = start_with_tickets(&[]);
    let client = client();
    let waiting = waiting_run(&server, &client).await;
    let fingerprint = waiting["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    server.sandbox.planrun().args(["reject", "agent-br-0001"]).expect_code(0).run();
    approve_is_refused(&server, &client, &fingerprint, "rejected").await;
    let (_, shown) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(shown["status"], "rejected", "{shown}");
    assert_eq!(shown["agent_final_status"], "rejected");
    assert_eq!(close_count(&server), 0, "a rejected close never runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_with_the_cli_shows_cancelled() {
    let server = start_with_tickets(&[]);
    let client = client();
    waiting_run(&server, &client).await;
    server.sandbox.planrun().args(["cancel", "agent-br-0001"]).expect_code(0).run();
    let (_, shown) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(shown["status"], "cancelled", "{shown}");
    assert_eq!(shown["agent_final_status"], "cancelled");
    assert_eq!(close_count(&server), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approved_but_not_resumed_still_waits() {
    let server = start_with_tickets(&[]);
    let client = client();
    let waiting = waiting_run(&server, &client).await;
    let fingerprint = waiting["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    server.sandbox.planrun().args(["approve", "agent-br-0001", "--fingerprint", &fingerprint]).expect_code(0).run();
    let (_, shown) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(shown, waiting, "the agent run still waits at the same gate");
    assert!(!audit_events(&server, "br-0001").contains(&"agent_run_observed".to_string()));
}
