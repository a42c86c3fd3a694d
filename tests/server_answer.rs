//! `POST /runs/{id}/answer` over loopback HTTP: a bridge run whose agent
//! run's agent step asks a person (`plans/ticket_agent.toml` against a
//! scripted model) waits `waiting_input` with the question, is answered and
//! runs on to its end; refused answers change nothing and never ask the
//! model again. And a write the model proposes waits for
//! `POST /runs/{id}/approve` with its frozen action and the provenance of
//! its arguments, and runs once when approved.

use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::common::fake_model::{FakeModel, action, ask, finish, start};
use crate::common::tickets::{close_count, ticket_sandbox};
use crate::serve_harness::{Server, audit_events, client, error_code, get_json, post};

const GOAL: &str = "ticket agent";
const QUESTION: &str = "Which ticket should I close?";

/// A model that asks, looks ticket-7 up once answered, and finishes.
fn asking_model() -> FakeModel {
    start(vec![ask(QUESTION), action("ticket_lookup", json!({"ticket_id": "ticket-7"})), finish("ticket-7 is closed")])
}

/// A service over a workspace where ticket-7 is already closed (so the
/// plan's `[[verify]]` holds), every agent step pointed at `model`.
fn serve(model: &FakeModel, envs: &[(&str, &str)]) -> Server {
    serve_tickets(model, "closed", envs)
}

/// As [`serve`], with ticket-7 in `status`.
fn serve_tickets(model: &FakeModel, status: &str, envs: &[(&str, &str)]) -> Server {
    let endpoint = model.endpoint();
    let mut all = vec![("PLANRUN_MODEL_ENDPOINT", endpoint.as_str())];
    all.extend_from_slice(envs);
    Server::start_in(ticket_sandbox(status, u64::from(status == "closed")), &all)
}

/// The agent run's state file as written (sealed envelope and all).
fn agent_state(sandbox: &Sandbox, run_id: &str) -> String {
    std::fs::read_to_string(sandbox.workspace().join("runs").join(run_id).join("state.json")).expect("agent state")
}

/// Everything a refused answer must leave as it was: the bridge record, the
/// agent run's state and audit, and the model's request count.
fn snapshot(server: &Server, model: &FakeModel) -> (String, String, String, String, usize) {
    let agent = server.sandbox.workspace().join("runs/agent-br-0001/audit.jsonl");
    (
        server.record("br-0001", "state.json"),
        server.record("br-0001", "audit.jsonl"),
        agent_state(&server.sandbox, "agent-br-0001"),
        std::fs::read_to_string(agent).expect("agent audit"),
        model.requests(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_question_waits_and_its_answer_runs_the_run_to_its_end() {
    let model = asking_model();
    let server = serve(&model, &[]);
    let client = client();
    let (status, waiting) = post(&client, &server.url("/runs"), json!({"goal": GOAL, "adapter": "agent"})).await;
    assert_eq!(status, 201, "{waiting}");
    assert_eq!(waiting["status"], "waiting_input", "{waiting}");
    assert_eq!(waiting["agent_final_status"], "waiting_input");
    assert_eq!(waiting["exit_code"], 4);
    assert_eq!(waiting["error"], Value::Null);
    assert_eq!(waiting["pending_question"], json!({"step_id": "triage", "turn": 1, "question": QUESTION}));
    assert!(waiting.get("pending_action").is_none(), "{waiting}");
    assert_eq!(model.requests(), 1);
    let (status, read) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!((status, &read), (200, &waiting), "GET shows the question");
    assert!(audit_events(&server, "br-0001").ends_with(&["response_received".into(), "input_requested".into()]));

    let (status, done) =
        post(&client, &server.url("/runs/br-0001/answer"), json!({"answer": "ticket-7 only, please"})).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["agent_final_status"], "done");
    assert_eq!(done["exit_code"], 0);
    assert!(done.get("pending_question").is_none(), "{done}");
    assert_eq!(model.requests(), 3, "the lookup and the finish");
    // The model read the answer as untrusted data, from a person.
    let prompt = model.bodies()[1]["messages"][1]["content"].as_str().expect("prompt").to_string();
    assert!(prompt.contains("source=person trust=untrusted"), "{prompt}");
    assert!(prompt.contains("ticket-7 only, please"), "{prompt}");
    assert_eq!(get_json(&client, &server.url("/runs/br-0001")).await.1, done);
    let events = audit_events(&server, "br-0001");
    assert!(
        events.ends_with(&[
            "input_requested".into(),
            "answer_given".into(),
            "run_resumed".into(),
            "run_finished".into()
        ]),
        "{events:?}"
    );
    // The answer is sealed in the agent run's records (its turn's
    // observation), the bridge log keeps only its size.
    let agent_audit = std::fs::read_to_string(server.sandbox.workspace().join("runs/agent-br-0001/audit.jsonl"))
        .expect("agent audit");
    assert!(agent_audit.contains("ticket-7 only, please"));
    assert!(!server.record("br-0001", "audit.jsonl").contains("ticket-7 only, please"));

    // Answered: a second answer is refused and asks the model nothing.
    let again = client.post(server.url("/runs/br-0001/answer")).json(&json!({"answer": "more"}));
    assert_eq!(error_code(again).await, (409, "run_not_waiting".into()));
    assert_eq!(model.requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_answers_change_nothing_and_never_call_the_model() {
    let model = asking_model();
    let server = serve(&model, &[]);
    let client = client();
    let (status, waiting) = post(&client, &server.url("/runs"), json!({"goal": GOAL})).await;
    assert_eq!((status, waiting["status"].as_str()), (201, Some("waiting_input")), "{waiting}");
    let before = snapshot(&server, &model);
    assert_eq!(before.4, 1);
    let answer = server.url("/runs/br-0001/answer");
    // "é" is two bytes: 1001 of them are 2002 bytes in 1001 characters.
    for (body, code) in [
        (json!({"answer": ""}), "invalid_answer"),
        (json!({"answer": " \n\t\u{3000}"}), "invalid_answer"),
        (json!({"answer": "x".repeat(2001)}), "invalid_answer"),
        (json!({"answer": "é".repeat(1001)}), "invalid_answer"),
        (json!({}), "invalid_body"),
        (json!({"answer": 7}), "invalid_body"),
        (json!({"answer": "ok", "by": "ops"}), "invalid_body"),
    ] {
        assert_eq!(error_code(client.post(&answer).json(&body)).await, (422, code.into()), "{body}");
        assert_eq!(snapshot(&server, &model), before, "{body}: nothing changed");
    }
    let unknown = client.post(server.url("/runs/br-0404/answer")).json(&json!({"answer": "ok"}));
    assert_eq!(error_code(unknown).await, (404, "run_not_found".into()));
    // Approving a run that waits for an answer is refused the same way.
    let approve = client.post(server.url("/runs/br-0001/approve")).json(&json!({"fingerprint": "0".repeat(64)}));
    assert_eq!(error_code(approve).await, (409, "run_not_waiting".into()));
    assert_eq!(snapshot(&server, &model), before);
    // 2000 bytes exactly are accepted.
    let (status, done) = post(&client, &answer, json!({"answer": "é".repeat(1000)})).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("done")), "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_asks_nothing_refuses_an_answer() {
    // The ticket demo pauses for approval, not for an answer; a stub run
    // is done at once.
    let model = asking_model();
    let server = serve_tickets(&model, "open", &[]);
    let client = client();
    let (status, paused) = post(&client, &server.url("/runs"), json!({"goal": "close ticket"})).await;
    assert_eq!((status, paused["status"].as_str()), (201, Some("waiting_approval")), "{paused}");
    let (status, stub) = post(&client, &server.url("/runs"), json!({"goal": "x", "adapter": "stub"})).await;
    assert_eq!((status, stub["status"].as_str()), (201, Some("done")), "{stub}");
    for id in ["br-0001", "br-0002"] {
        let audit = server.record(id, "audit.jsonl");
        let request = client.post(server.url(&format!("/runs/{id}/answer"))).json(&json!({"answer": "yes"}));
        assert_eq!(error_code(request).await, (409, "run_not_waiting".into()), "{id}");
        assert_eq!(server.record(id, "audit.jsonl"), audit, "{id}: nothing logged");
    }
    assert_eq!(model.requests(), 0, "no agent step ran");
    let (_, still) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(still, paused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_needs_the_bearer_token_when_one_is_set() {
    let model = asking_model();
    let server = serve(&model, &[("PLANRUN_API_TOKEN", "s3cret")]);
    let client = client();
    let response =
        client.post(server.url("/runs")).bearer_auth("s3cret").json(&json!({"goal": GOAL})).send().await.expect("send");
    assert_eq!(response.status().as_u16(), 201);
    let before = snapshot(&server, &model);
    let answer = server.url("/runs/br-0001/answer");
    let body = json!({"answer": "ticket-7"});
    assert_eq!(error_code(client.post(&answer).json(&body)).await, (401, "unauthorized".into()));
    assert_eq!(error_code(client.post(&answer).bearer_auth("wrong").json(&body)).await, (401, "unauthorized".into()));
    assert_eq!(snapshot(&server, &model), before, "nothing changed");
    let response = client.post(&answer).bearer_auth("s3cret").json(&body).send().await.expect("send");
    assert_eq!(response.status().as_u16(), 200);
    let done: Value = response.json().await.expect("JSON");
    assert_eq!(done["status"], "done", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_stops_when_its_run_asks_and_the_run_is_answered_by_its_id() {
    let model = asking_model();
    let server = serve(&model, &[]);
    let client = client();
    let (status, controller) = post(&client, &server.url("/controller/runs"), json!({"goal": GOAL})).await;
    assert_eq!(status, 201, "{controller}");
    assert_eq!(controller["status"], "waiting_input", "{controller}");
    assert_eq!(controller["stop_reason"], "waiting_input");
    assert_eq!(controller["iterations"], 1, "the loop stops: a person answers");
    let bridge_run_id = controller["bridge_results"][0]["bridge_run_id"].as_str().expect("bridge run").to_string();
    let (_, waiting) = get_json(&client, &server.url(&format!("/runs/{bridge_run_id}"))).await;
    assert_eq!(waiting["pending_question"]["question"], QUESTION, "{waiting}");
    let (status, done) =
        post(&client, &server.url(&format!("/runs/{bridge_run_id}/answer")), json!({"answer": "ticket-7"})).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("done")), "{done}");
    assert_eq!(model.requests(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_with_the_cli_the_bridge_run_reads_through_and_refuses_a_second_answer() {
    let model = asking_model();
    let server = serve(&model, &[]);
    let client = client();
    let (status, waiting) = post(&client, &server.url("/runs"), json!({"goal": GOAL})).await;
    assert_eq!((status, waiting["status"].as_str()), (201, Some("waiting_input")), "{waiting}");
    let endpoint = model.endpoint();
    let cli = server.sandbox.planrun().env("PLANRUN_MODEL_ENDPOINT", &endpoint);
    cli.args(["answer", "agent-br-0001", "ticket-7"]).expect_code(0).run();
    assert_eq!(model.requests(), 3);
    let (status, shown) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!((status, shown["status"].as_str()), (200, Some("done")), "{shown}");
    assert!(shown.get("pending_question").is_none(), "{shown}");
    let events = audit_events(&server, "br-0001");
    assert_eq!(events[events.len() - 2..], ["agent_run_observed", "run_finished"], "{events:?}");
    let again = client.post(server.url("/runs/br-0001/answer")).json(&json!({"answer": "again"}));
    assert_eq!(error_code(again).await, (409, "run_not_waiting".into()));
    assert_eq!(model.requests(), 3, "no model call for a refused answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposed_write_waits_for_approval_with_its_provenance_and_runs_once_when_approved() {
    let model = start(vec![
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
        action("ticket_close", json!({"ticket_id": "ticket-7"})),
        finish("ticket-7 is closed"),
    ]);
    let server = serve_tickets(&model, "open", &[]);
    let client = client();
    let (status, waiting) = post(&client, &server.url("/runs"), json!({"goal": GOAL, "adapter": "agent"})).await;
    assert_eq!((status, waiting["status"].as_str()), (201, Some("waiting_approval")), "{waiting}");
    let pending = &waiting["pending_action"];
    assert_eq!(
        (pending["kind"].as_str(), pending["risk"].as_str()),
        (Some("ticket_close"), Some("write")),
        "{pending}"
    );
    assert_eq!(pending["required_by"], "risk", "{pending}");
    assert_eq!(pending["action"]["ticket_id"], "ticket-7", "{pending}");
    assert_eq!(
        pending["provenance"],
        json!([{"argument": "ticket_id", "value": "ticket-7", "source": "goal (trusted)"}]),
        "{pending}"
    );
    assert_eq!(close_count(&server.sandbox, "ticket-7"), 0, "nothing closed before the approval");
    assert_eq!(model.requests(), 2);

    let approve = server.url("/runs/br-0001/approve");
    let wrong = client.post(&approve).json(&json!({"fingerprint": "0".repeat(64)}));
    assert_eq!(error_code(wrong).await, (409, "approval_invalid".into()));
    assert_eq!((close_count(&server.sandbox, "ticket-7"), model.requests()), (0, 2), "a wrong approval runs nothing");

    let (status, done) = post(&client, &approve, json!({"fingerprint": pending["fingerprint"]})).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("done")), "{done}");
    assert_eq!(close_count(&server.sandbox, "ticket-7"), 1);
    assert_eq!(close_count(&server.sandbox, "ticket-8"), 0);
    assert_eq!(model.requests(), 3, "the turn was not asked again: only the finish");
}
