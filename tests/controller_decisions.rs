//! The controller loop with a model that misbehaves (issue 11), end to end
//! through `planrun serve`: whatever a model answers, only the plan the
//! user's goal routes to runs, a verified done is never run again, a
//! paused run stops the loop, identical retries hit the consecutive-failure
//! guard, and every answer is evidence in state and audit. Also start-up:
//! an explicitly chosen backend that does not answer is an exit-2 error;
//! `auto` falls back to the stub and says why.

use std::io::Read;

use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::serve_harness::{
    Behaviour, FakeModel, Server, client, closed_port, get_json, post, serve_command, start_with_tickets,
};

/// A service whose decisions come from a fake with `behaviour`.
async fn service(behaviour: Behaviour, backend: &str) -> (FakeModel, Server) {
    let fake = FakeModel::start(behaviour).await;
    let envs: Vec<(&str, String)> = match backend {
        "ollama" => vec![("PLANRUN_DECISION_BACKEND", "ollama".into()), ("OLLAMA_HOST", fake.ollama_host())],
        _ => vec![("PLANRUN_DECISION_BACKEND", "openai".into()), ("OPENAI_BASE_URL", fake.openai_base())],
    };
    let envs: Vec<(&str, &str)> = envs.iter().map(|(key, value)| (*key, value.as_str())).collect();
    // The ticket demo's `tickets.json`, for goals that route to it.
    (fake, start_with_tickets(&envs))
}

async fn controller(server: &Server, goal: &str) -> Value {
    let (status, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": goal})).await;
    assert_eq!(status, 201, "{body}");
    body
}

fn plans_run(body: &Value) -> Vec<String> {
    body["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter(|decision| decision["action"] == "run_plan")
        .map(|decision| decision["plan_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placeholder_answers_never_run_a_goal_nobody_asked_for() {
    for backend in ["ollama", "openai"] {
        let (_fake, server) = service(Behaviour::Placeholder, backend).await;
        let body = controller(&server, "test deny bash").await;
        assert_eq!(body["final_status"], "failed", "{backend}: the denied plan fails, as it must");
        assert_eq!(plans_run(&body), ["deny_bash"]);
        assert_eq!(body["bridge_results"][0]["goal"], "test deny bash");
        for decision in body["decisions"].as_array().expect("decisions") {
            assert_eq!(decision["mode"], format!("{backend}-fallback"));
            assert_eq!(decision["evidence"]["verdict"], "rejected");
            assert!(decision["evidence"]["raw_answer"].as_str().is_some_and(|raw| raw.contains("<short reason>")));
        }
        assert!(!server.exists("runs/agent-bri-ctrl-0001-i1"), "nothing ran a second time");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_stops_the_loop_whatever_the_model_says() {
    let (fake, server) = service(Behaviour::AlwaysRun, "ollama").await;
    let body = controller(&server, "close ticket").await;
    assert_eq!((&body["final_status"], &body["stop_reason"]), (&json!("waiting_approval"), &json!("waiting_approval")));
    assert_eq!(body["status"], "waiting_approval");
    assert_eq!(plans_run(&body), ["ticket_close"]);
    assert_eq!(fake.bodies().len(), 1, "no decision after the pause");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_done_is_never_run_again() {
    let (fake, server) = service(Behaviour::AlwaysRun, "openai").await;
    let body = controller(&server, "test flow pwd to file").await;
    assert_eq!((&body["final_status"], &body["iterations"]), (&json!("done"), &json!(1)));
    assert_eq!(body["decisions"][0]["mode"], "openai");
    let second = &body["decisions"][1];
    assert_eq!((&second["action"], &second["mode"]), (&json!("stop"), &json!("openai-fallback")));
    assert_eq!(second["offered"]["actions"], json!(["stop"]));
    assert_eq!(second["offered"]["run_withheld"], "the last run is done and verified");
    assert_eq!(
        fake.bodies()[1]["response_format"]["json_schema"]["schema"]["properties"]["action"]["enum"],
        json!(["stop"])
    );
    assert!(!server.exists("runs/agent-bri-ctrl-0001-i1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_retries_count_as_consecutive_failures() {
    let (_fake, server) = service(Behaviour::AlwaysRun, "ollama").await;
    let body = controller(&server, "test deny bash").await;
    assert_eq!((&body["stop_reason"], &body["iterations"]), (&json!("consecutive_failures"), &json!(1)));
    assert_eq!(body["consecutive_failures"], 2);
    assert_eq!(plans_run(&body), ["deny_bash", "deny_bash"], "the model chose the failed run again");
    let audit = server.record("ctrl-0001", "controller_audit.jsonl");
    assert!(audit.contains("\"event_type\":\"decision_repeated\""), "{audit}");
    assert!(!server.exists("runs/agent-bri-ctrl-0001-i1"), "the repeat never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_outside_the_offered_set_and_two_objects_are_refused() {
    for behaviour in [Behaviour::ForeignPlan, Behaviour::TwoObjects, Behaviour::SchemaEcho] {
        let (_fake, server) = service(behaviour, "ollama").await;
        let body = controller(&server, "test flow pwd to file").await;
        assert_eq!(plans_run(&body), ["flow_pwd"], "{behaviour:?}");
        assert_eq!(body["final_status"], "done");
        assert!(!server.exists("runs/agent-bri-ctrl-0001-i1"));
        let first = &body["decisions"][0];
        assert_eq!((&first["mode"], &first["evidence"]["verdict"]), (&json!("ollama-fallback"), &json!("rejected")));
    }
}

/// A small model's sentence (and fence) around its one JSON object: the
/// object decides, and the record says what was stripped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prose_around_one_object_is_stripped_and_recorded() {
    let (_fake, server) = service(Behaviour::FencedProse, "openai").await;
    let body = controller(&server, "test flow pwd to file").await;
    assert_eq!((&body["final_status"], &body["stop_reason"]), (&json!("done"), &json!("decision_stop")));
    for decision in body["decisions"].as_array().expect("decisions") {
        assert_eq!((&decision["mode"], &decision["parsed_success"]), (&json!("openai"), &json!(true)), "{decision}");
        assert_eq!(decision["evidence"]["stripped"], json!({"chars_before": 9, "chars_after": 5, "fence": true}));
    }
    let audit = server.record("ctrl-0001", "controller_audit.jsonl");
    assert!(audit.contains("\"stripped\":{\"chars_before\":9,\"chars_after\":5,\"fence\":true}"), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_openai_compatible_server_decides() {
    let (fake, server) = service(Behaviour::Valid, "openai").await;
    let body = controller(&server, "test flow pwd to file").await;
    assert_eq!(body["decisions"][0]["mode"], "openai");
    assert_eq!(body["decisions"][1]["mode"], "openai");
    assert!(fake.bodies().iter().all(|body| body["authorization"].is_null()));
    let audit = server.record("ctrl-0001", "controller_audit.jsonl");
    for evidence in
        ["\"raw_answer_trust\":\"untrusted\"", "\"finish_reason\":\"stop\"", "\"request_id\":\"chatcmpl-1\""]
    {
        assert!(audit.contains(evidence), "missing {evidence}: {audit}");
    }
}

/// Starts `serve` with `envs` and `args` expecting it to refuse; returns its
/// stderr.
fn refused_start(envs: &[(&str, &str)], args: &[&str]) -> String {
    let sandbox = Sandbox::new();
    let mut child = serve_command(&sandbox, envs, args).spawn().expect("start serve");
    let status = child.wait().expect("wait");
    let mut stdout = String::new();
    let mut stderr = String::new();
    let _ = child.stdout.take().map(|mut pipe| pipe.read_to_string(&mut stdout));
    let _ = child.stderr.take().map(|mut pipe| pipe.read_to_string(&mut stderr));
    assert_eq!(status.code(), Some(2), "stderr: {stderr}");
    assert!(stdout.is_empty(), "nothing served: {stdout}");
    stderr
}

#[test]
fn an_explicit_backend_that_does_not_answer_is_a_start_up_error() {
    let port = closed_port();
    let ollama = format!("http://127.0.0.1:{port}");
    let stderr = refused_start(&[("PLANRUN_DECISION_BACKEND", "ollama"), ("OLLAMA_HOST", &ollama)], &[]);
    assert!(
        stderr.contains(&format!(
            "decision backend `ollama` (PLANRUN_DECISION_BACKEND) does not answer: tried `GET {ollama}/api/tags`"
        )),
        "{stderr}"
    );
    let openai = format!("http://127.0.0.1:{port}/v1");
    let stderr = refused_start(
        &[("PLANRUN_DECISION_BACKEND", "openai"), ("OPENAI_BASE_URL", &openai), ("OLLAMA_HOST", &ollama)],
        &[],
    );
    assert!(stderr.contains(&format!("tried `GET {openai}/models`")), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_without_ollama_is_the_stub_and_says_why() {
    let port = closed_port();
    let host = format!("http://127.0.0.1:{port}");
    let server = Server::start(&[("PLANRUN_DECISION_BACKEND", "auto"), ("OLLAMA_HOST", &host)]);
    let (_, health) = get_json(&client(), &server.url("/health")).await;
    assert_eq!(health["decision_backend"], "stub");
    let note = health["decision_backend_note"].as_str().unwrap_or_default();
    assert!(note.starts_with(&format!("auto: no Ollama answered `GET {host}/api/tags`")), "{note}");
    let body = controller(&server, "test flow pwd to file").await;
    assert_eq!((&body["decisions"][0]["mode"], &body["decisions"][0]["evidence"]), (&json!("stub"), &json!(null)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_policy_sets_timeout_tokens_temperature_and_system_prompt() {
    let fake = FakeModel::start(Behaviour::Slow).await;
    let sandbox = Sandbox::new();
    let policy = sandbox.write(
        "service.toml",
        "version = 1\n[decision]\ntimeout_secs = 1\nmax_tokens = 48\ntemperature = 0.3\nsystem_prompt = \"choose\"\n",
    );
    let base = fake.openai_base();
    let policy = policy.display().to_string();
    let envs = [("PLANRUN_DECISION_BACKEND", "openai"), ("OPENAI_BASE_URL", base.as_str())];
    let server = Server::start_in_with(sandbox, &envs, &["--service-policy", &policy]);
    let body = controller(&server, "test flow pwd to file").await;
    let first = &body["decisions"][0];
    assert_eq!(first["fallback_reason"], "timed out after 1000 ms (the call was cancelled and its connection closed)");
    assert_eq!(body["final_status"], "done", "the stub decided instead");
    let request = &fake.bodies()[0];
    assert_eq!((&request["max_tokens"], &request["temperature"]), (&json!(48), &json!(0.3)));
    assert_eq!(request["messages"][0], json!({"role": "system", "content": "choose"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_done_bridge_result_has_no_failure_class_from_a_retried_attempt() {
    let server = Server::start(&[]);
    let body = controller(&server, "test retry execution").await;
    let result = &body["bridge_results"][0];
    assert_eq!((&result["status"], &result["failure_class"]), (&json!("done"), &Value::Null));
    // The agent run did fail once: the class was there to leak.
    let history = crate::serve_harness::read(&server.sandbox.workspace(), "runs/agent-bri-ctrl-0001-i0/history.jsonl");
    assert!(history.contains("\"failure_class\":\"execution_error\""), "{history}");
}

#[test]
fn serve_refuses_bad_decision_settings_naming_each() {
    let sandbox = Sandbox::new();
    let policy = sandbox.write(
        "service.toml",
        "version = 1\n[decision]\ntimeout_secs = 0\nmax_tokens = 8\ntemperature = 3\nsystem_prompt = \" \"\nseed = 1\n",
    );
    let policy = policy.display().to_string();
    let stderr = refused_start(&[("PLANRUN_DECISION_BACKEND", "stub")], &["--service-policy", &policy]);
    for expected in [
        "`timeout_secs` in `[decision]` must be between 1 and 3600",
        "`max_tokens` in `[decision]` must be between 16 and 4096",
        "`temperature` in `[decision]` must be between 0.0 and 2.0",
        "`system_prompt` in `[decision]` must hold 1 to 4000 characters",
        "unknown key `seed`",
        "service.toml:3:16",
    ] {
        assert!(stderr.contains(expected), "missing {expected:?} in:\n{stderr}");
    }
}
