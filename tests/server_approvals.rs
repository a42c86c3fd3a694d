//! `POST /runs/{id}/approve|reject` over loopback HTTP: a bridge run whose
//! agent run pauses for approval (the ticket demo, `plans/ticket_close.toml`)
//! waits, is approved (and resumed) or rejected, and refusals change nothing.

use serde_json::{Value, json};

use crate::common::snapshot_settings;
use crate::serve_harness::{Server, audit_events, client, close_count, error_code, get_json, post, start_with_tickets};

const GOAL: &str = "close ticket";

/// The agent run's checkpointed status.
fn agent_status(server: &Server, run_id: &str) -> String {
    let path = server.sandbox.workspace().join("runs").join(run_id).join("state.json");
    let envelope: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("agent state")).expect("JSON");
    envelope["payload"]["status"].as_str().expect("status").to_string()
}

/// Starts the approval-gated goal; returns the waiting bridge state.
async fn start_waiting(server: &Server, client: &reqwest::Client) -> Value {
    let (status, body) = post(client, &server.url("/runs"), json!({"goal": GOAL, "adapter": "agent"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"], "waiting_approval", "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_goal_waits_and_only_the_right_fingerprint_closes_it_once() {
    let server = start_with_tickets(&[]);
    let client = client();
    let waiting = start_waiting(&server, &client).await;
    assert_eq!(waiting["run_id"], "br-0001");
    assert_eq!(waiting["agent_run_id"], "agent-br-0001");
    assert_eq!(waiting["agent_final_status"], "waiting_approval");
    assert_eq!(waiting["exit_code"], 3);
    assert_eq!(waiting["error"], Value::Null);
    let pending = &waiting["pending_action"];
    assert_eq!(pending["step_id"], "close");
    assert_eq!(pending["kind"], "ticket_close");
    assert_eq!(pending["scope"], "ticket:ticket-7");
    assert_eq!(pending["action"]["ticket_id"], "ticket-7");
    let fingerprint = pending["fingerprint"].as_str().expect("fingerprint").to_string();
    assert_eq!(fingerprint.len(), 64);
    let state_version = pending["state_version"].as_u64().expect("state version");
    assert_eq!(close_count(&server), 0, "nothing is closed before approval");
    assert_eq!(agent_status(&server, "agent-br-0001"), "waiting_approval");
    let (_, persisted) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(persisted, waiting);
    snapshot_settings("server").bind(|| {
        insta::assert_snapshot!("approve_flow@waiting_state.json", server.record_snapshot("br-0001", "state.json"));
    });

    let approve = server.url("/runs/br-0001/approve");
    let audit_before = server.record("br-0001", "audit.jsonl");
    for body in [
        json!({"fingerprint": "0".repeat(64)}),
        json!({"fingerprint": fingerprint, "scope": "ticket:ticket-8"}),
        json!({"fingerprint": fingerprint, "state_version": state_version + 1}),
    ] {
        let (status, answer) = post(&client, &approve, body.clone()).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("approval_invalid")), "{body}: {answer}");
        assert_eq!(close_count(&server), 0);
        assert_eq!(agent_status(&server, "agent-br-0001"), "waiting_approval");
        assert_eq!(get_json(&client, &server.url("/runs/br-0001")).await.1, waiting, "the bridge state is unchanged");
        assert_eq!(server.record("br-0001", "audit.jsonl"), audit_before, "nothing is logged");
    }

    let (status, done) = post(
        &client,
        &approve,
        json!({"fingerprint": fingerprint, "scope": "ticket:ticket-7", "state_version": state_version, "approved_by": "ops"}),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "done");
    assert_eq!(done["agent_final_status"], "done");
    assert_eq!(done["exit_code"], 0);
    assert_eq!(done["error"], Value::Null);
    assert!(done.get("pending_action").is_none(), "{done}");
    assert_eq!(close_count(&server), 1);
    assert_eq!(agent_status(&server, "agent-br-0001"), "done");
    assert_eq!(get_json(&client, &server.url("/runs/br-0001")).await.1, done);

    for (url, body) in
        [(&approve, json!({"fingerprint": fingerprint})), (&server.url("/runs/br-0001/reject"), json!({}))]
    {
        let (status, answer) = post(&client, url, body).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("run_not_waiting")), "{answer}");
    }
    assert_eq!(close_count(&server), 1, "a second approval closes nothing");
    server.snapshot_records("approve_flow", "br-0001", &["state.json", "audit.jsonl"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_run_ends_rejected_and_closes_nothing() {
    let server = start_with_tickets(&[]);
    let client = client();
    let waiting = start_waiting(&server, &client).await;
    let fingerprint = waiting["pending_action"]["fingerprint"].clone();
    let (status, rejected) =
        post(&client, &server.url("/runs/br-0001/reject"), json!({"reason": "refund first"})).await;
    assert_eq!(status, 200, "{rejected}");
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(rejected["agent_final_status"], "rejected");
    assert_eq!(rejected["error"], "step `close` was rejected: refund first");
    assert!(rejected.get("pending_action").is_none());
    assert_eq!(close_count(&server), 0);
    assert_eq!(agent_status(&server, "agent-br-0001"), "rejected");
    let (status, answer) =
        post(&client, &server.url("/runs/br-0001/approve"), json!({"fingerprint": fingerprint})).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("run_not_waiting")));
    assert_eq!(close_count(&server), 0, "a rejected action never runs");
    server.snapshot_records("reject_flow", "br-0001", &["state.json", "audit.jsonl"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_approval_leaves_the_run_waiting() {
    // The test clock ticks one second per reading, so a one-second approval
    // has expired by the time the resume checks it.
    let server = start_with_tickets(&[]);
    let client = client();
    let waiting = start_waiting(&server, &client).await;
    let fingerprint = waiting["pending_action"]["fingerprint"].clone();
    let approve = server.url("/runs/br-0001/approve");
    let (status, answer) = post(&client, &approve, json!({"fingerprint": fingerprint, "expires_in_secs": 1})).await;
    assert_eq!((status, answer["error"]["code"].as_str()), (409, Some("approval_invalid")), "{answer}");
    assert!(answer["error"]["message"].as_str().is_some_and(|message| message.contains("expired")), "{answer}");
    assert_eq!(close_count(&server), 0);
    assert_eq!(agent_status(&server, "agent-br-0001"), "waiting_approval");
    let (_, still) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(
        (still["status"].as_str(), &still["pending_action"]),
        (Some("waiting_approval"), &waiting["pending_action"])
    );
    assert_eq!(audit_events(&server, "br-0001")[4..], ["approval_requested", "approval_granted", "resume_refused"]);
    let (status, done) = post(&client, &approve, json!({"fingerprint": fingerprint})).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("done")), "{done}");
    assert_eq!(close_count(&server), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_approvals_close_the_ticket_once() {
    let server = start_with_tickets(&[]);
    let client = client();
    let waiting = start_waiting(&server, &client).await;
    let body = json!({"fingerprint": waiting["pending_action"]["fingerprint"]});
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (client, url, body) = (client.clone(), server.url("/runs/br-0001/approve"), body.clone());
            tokio::spawn(async move { post(&client, &url, body).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        let (status, answer) = task.await.expect("task");
        answers.push((status, answer["status"].as_str().or(answer["error"]["code"].as_str()).map(str::to_string)));
    }
    let succeeded = answers.iter().filter(|(status, _)| *status == 200).count();
    assert_eq!(succeeded, 1, "{answers:?}");
    for (status, code) in &answers {
        assert!(
            *status == 200 || (*status == 409 && matches!(code.as_deref(), Some("run_locked" | "run_not_waiting"))),
            "{answers:?}"
        );
    }
    assert_eq!(close_count(&server), 1);
    assert_eq!(audit_events(&server, "br-0001").iter().filter(|event| *event == "run_resumed").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_approval_requests_get_json_errors() {
    let server = start_with_tickets(&[]);
    let client = client();
    let fingerprint = "a".repeat(64);
    let approve = |id: &str, body: &str| {
        client
            .post(server.url(&format!("/runs/{id}/approve")))
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    let good = json!({"fingerprint": fingerprint}).to_string();
    assert_eq!(error_code(approve("br-0404", &good)).await, (404, "run_not_found".into()));
    assert_eq!(
        error_code(client.post(server.url("/runs/br-0404/reject")).json(&json!({}))).await,
        (404, "run_not_found".into())
    );
    assert_eq!(error_code(approve("a%20b", &good)).await, (400, "invalid_run_id".into()));
    assert_eq!(error_code(approve("br-0404", "{\"fingerprint\": ")).await, (400, "malformed_json".into()));
    assert_eq!(error_code(approve("br-0404", "{}")).await, (422, "invalid_body".into()));
    assert_eq!(error_code(approve("br-0404", "{\"fingerprint\": \"abc\"}")).await, (400, "invalid_request".into()));
    let extra = json!({"fingerprint": fingerprint, "force": true}).to_string();
    assert_eq!(error_code(approve("br-0404", &extra)).await, (422, "invalid_body".into()));
    for expires in [0, 7 * 86_400 + 1] {
        let body = json!({"fingerprint": fingerprint, "expires_in_secs": expires}).to_string();
        assert_eq!(error_code(approve("br-0404", &body)).await, (400, "invalid_request".into()));
    }
    let control = json!({"fingerprint": fingerprint, "approved_by": "ops\nroot"}).to_string();
    assert_eq!(error_code(approve("br-0404", &control)).await, (400, "invalid_request".into()));
    let (_, stub) = post(&client, &server.url("/runs"), json!({"goal": "say hi", "adapter": "stub"})).await;
    assert_eq!(stub["status"], "done");
    assert_eq!(error_code(approve("br-0001", &good)).await, (409, "run_not_waiting".into()));
    assert_eq!(
        error_code(client.post(server.url("/runs/br-0001/reject")).json(&json!({"why": "x"}))).await,
        (422, "invalid_body".into())
    );
    assert_eq!(error_code(client.get(server.url("/runs/br-0001/approve"))).await, (405, "method_not_allowed".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_endpoints_need_the_token() {
    let server = start_with_tickets(&[("PLANRUN_API_TOKEN", "s3cret-token")]);
    let client = client();
    let (status, _) = post(&client, &server.url("/runs/br-0001/approve"), json!({"fingerprint": "a".repeat(64)})).await;
    assert_eq!(status, 401);
    let response = client
        .post(server.url("/runs/br-0001/reject"))
        .bearer_auth("wrong")
        .json(&json!({}))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let response = client
        .post(server.url("/runs"))
        .bearer_auth("s3cret-token")
        .json(&json!({"goal": GOAL, "adapter": "agent"}))
        .send()
        .await
        .expect("send");
    let waiting: Value = response.json().await.expect("JSON");
    assert_eq!(waiting["status"], "waiting_approval");
    let body = json!({"fingerprint": waiting["pending_action"]["fingerprint"]});
    let (status, _) = post(&client, &server.url("/runs/br-0001/approve"), body.clone()).await;
    assert_eq!(status, 401);
    assert_eq!(close_count(&server), 0, "an unauthenticated approval changes nothing");
    let response = client
        .post(server.url("/runs/br-0001/approve"))
        .bearer_auth("s3cret-token")
        .json(&body)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(close_count(&server), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_stops_at_an_approval_gate_and_the_bridge_run_can_be_approved() {
    let server = start_with_tickets(&[]);
    let client = client();
    let (status, controller) = post(&client, &server.url("/controller/runs"), json!({"goal": GOAL})).await;
    assert_eq!(status, 201, "{controller}");
    assert_eq!(controller["final_status"], "waiting_approval", "{controller}");
    assert_eq!(controller["stop_reason"], "waiting_approval");
    assert_eq!(controller["iterations"], 1, "no second iteration while a person decides");
    let bridge_id = controller["bridge_results"][0]["bridge_run_id"].as_str().expect("bridge id").to_string();
    let (_, bridge) = get_json(&client, &server.url(&format!("/runs/{bridge_id}"))).await;
    assert_eq!(bridge["status"], "waiting_approval");
    assert_eq!(close_count(&server), 0);
    let fingerprint = bridge["pending_action"]["fingerprint"].clone();
    let (status, done) =
        post(&client, &server.url(&format!("/runs/{bridge_id}/approve")), json!({"fingerprint": fingerprint})).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "done");
    assert_eq!(close_count(&server), 1);
}
