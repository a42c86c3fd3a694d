//! Decision backends against local servers that speak the Ollama and
//! OpenAI protocols: a valid decision is used (`ollama` / `openai` mode);
//! invalid JSON, truncated JSON, a wrong action, a timeout and a refused
//! connection all fall back to the stub rules (`…-fallback` mode).

use std::time::Duration;

use planrun::server::config::{OllamaSettings, OpenAiSettings};
use planrun::server::decision::{Action, DecisionBackend, DecisionContext};
use serde_json::json;

use crate::common::snapshot_settings;
use crate::serve_harness::{Behaviour, FakeModel, Server, client, closed_port, post};

const TIMEOUT: Duration = Duration::from_millis(500);

fn first_decision() -> DecisionContext<'static> {
    DecisionContext {
        goal: "test flow pwd to file",
        original_goal: "test flow pwd to file",
        iteration: 0,
        max_iterations: 3,
        last_status: None,
        last_agent_status: None,
        recovery_attempted: false,
        recovery_pending: false,
    }
}

fn ollama(host: String) -> DecisionBackend {
    DecisionBackend::Ollama {
        client: client(),
        settings: OllamaSettings { host, model: "qwen2.5:7b".into() },
        timeout: TIMEOUT,
    }
}

fn openai(base_url: String) -> DecisionBackend {
    DecisionBackend::OpenAi {
        client: client(),
        settings: OpenAiSettings { base_url, model: "gpt-test".into(), api_key: Some("sk-test".into()) },
        timeout: TIMEOUT,
    }
}

/// (behaviour, expected fallback reason prefix; `None` = accepted).
const CASES: [(Behaviour, Option<&str>); 5] = [
    (Behaviour::Valid, None),
    (Behaviour::InvalidJson, Some("invalid answer: no JSON object in the answer")),
    (Behaviour::Truncated, Some("truncated answer")),
    (Behaviour::WrongAction, Some("invalid answer: `action` must be `run_agent` or `stop`")),
    (Behaviour::Slow, Some("timed out after 500 ms")),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_answers_are_validated_or_fall_back() {
    for (behaviour, fallback) in CASES {
        let fake = FakeModel::start(behaviour).await;
        let decision = ollama(fake.ollama_host()).decide(&first_decision()).await;
        assert_eq!(decision.action, Action::RunAgent, "{behaviour:?}");
        assert_eq!(decision.goal, "test flow pwd to file");
        match fallback {
            None => {
                assert_eq!(
                    (decision.mode.as_str(), decision.parsed_success, decision.fallback_used),
                    ("ollama", true, false)
                );
                assert_eq!(decision.reason, "the goal has not run yet");
            }
            Some(prefix) => {
                assert_eq!(decision.mode, "ollama-fallback", "{behaviour:?}");
                assert!(!decision.parsed_success && decision.fallback_used);
                let reason = decision.fallback_reason.unwrap_or_default();
                assert!(reason.starts_with(prefix), "{behaviour:?}: {reason}");
                assert_eq!(decision.reason, "first execution", "stub rules were used");
            }
        }
        let requests = fake.requests.lock().expect("lock");
        let (path, body) = &requests[0];
        assert_eq!(path, "/api/generate");
        assert_eq!(
            (&body["stream"], &body["format"], &body["model"]),
            (&json!(false), &json!("json"), &json!("qwen2.5:7b"))
        );
        assert!(body["options"]["temperature"].as_f64().is_some_and(|t| t <= 0.2));
        assert!(body["prompt"].as_str().is_some_and(|prompt| prompt.contains("iteration: 0/3")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_answers_are_validated_or_fall_back() {
    for (behaviour, fallback) in CASES {
        let fake = FakeModel::start(behaviour).await;
        let decision = openai(fake.openai_base()).decide(&first_decision()).await;
        assert_eq!(decision.action, Action::RunAgent, "{behaviour:?}");
        match fallback {
            None => assert_eq!((decision.mode.as_str(), decision.parsed_success), ("openai", true)),
            Some(prefix) => {
                assert_eq!((decision.mode.as_str(), decision.fallback_used), ("openai-fallback", true));
                let reason = decision.fallback_reason.unwrap_or_default();
                assert!(reason.starts_with(prefix), "{behaviour:?}: {reason}");
            }
        }
        let requests = fake.requests.lock().expect("lock");
        let (path, body) = &requests[0];
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!(body["authorization"], "Bearer sk-test");
        assert_eq!(body["model"], "gpt-test");
        assert_eq!(body["messages"][0]["role"], "system");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_backends_fall_back_to_the_stub() {
    let port = closed_port();
    for backend in [ollama(format!("http://127.0.0.1:{port}")), openai(format!("http://127.0.0.1:{port}/v1"))] {
        let decision = backend.decide(&first_decision()).await;
        assert_eq!(decision.mode, format!("{}-fallback", backend.name()));
        assert_eq!(decision.action, Action::RunAgent);
        assert!(decision.fallback_reason.is_some_and(|reason| reason.starts_with("unreachable")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_picks_ollama_when_it_answers_and_records_its_decisions() {
    let fake = FakeModel::start(Behaviour::Valid).await;
    let host = fake.ollama_host();
    let server =
        Server::start(&[("PLANRUN_DECISION_BACKEND", "auto"), ("OLLAMA_HOST", &host), ("OLLAMA_MODEL", "qwen2.5:7b")]);
    let (_, health) = crate::serve_harness::get_json(&client(), &server.url("/health")).await;
    assert_eq!((&health["decision_backend"], &health["decision_model"]), (&json!("ollama"), &json!("qwen2.5:7b")));
    assert_eq!(health["adapters"]["ollama"], "real");
    let (status, body) =
        post(&client(), &server.url("/controller/runs"), json!({"goal": "run the pwd flow please"})).await;
    assert_eq!(status, 201);
    assert_eq!(body["decision_mode"], "ollama");
    assert_eq!(body["decisions"][0]["mode"], "ollama");
    assert_eq!(body["bridge_results"][0]["goal"], "test flow pwd to file", "the model's goal was used");
    assert_eq!(body["final_status"], "done");
    let settings = snapshot_settings("server");
    settings.bind(|| {
        insta::assert_snapshot!(
            "controller_ollama@controller_state.json",
            server.record("ctrl-0001", "controller_state.json")
        );
        insta::assert_snapshot!(
            "controller_ollama@controller_audit.jsonl",
            server.record("ctrl-0001", "controller_audit.jsonl")
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_model_answers_are_recorded_as_fallbacks() {
    let fake = FakeModel::start(Behaviour::WrongAction).await;
    let host = fake.ollama_host();
    let server = Server::start(&[("PLANRUN_DECISION_BACKEND", "ollama"), ("OLLAMA_HOST", &host)]);
    let (_, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": "test flow pwd to file"})).await;
    assert_eq!(body["decision_mode"], "ollama");
    for decision in body["decisions"].as_array().expect("decisions") {
        assert_eq!((&decision["mode"], &decision["fallback_used"]), (&json!("ollama-fallback"), &json!(true)));
    }
    assert_eq!(body["final_status"], "done");
    let audit = server.record("ctrl-0001", "controller_audit.jsonl");
    assert!(audit.contains("\"mode\":\"ollama-fallback\",\"parsed_success\":false,\"fallback_used\":true"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_ollama_at_start_up_means_the_stub() {
    let port = closed_port();
    let host = format!("http://127.0.0.1:{port}");
    let server = Server::start(&[("PLANRUN_DECISION_BACKEND", "ollama"), ("OLLAMA_HOST", &host)]);
    let (_, health) = crate::serve_harness::get_json(&client(), &server.url("/health")).await;
    assert_eq!(health["decision_backend"], "stub");
    assert_eq!(health["adapters"]["ollama"], "stub");
    let (_, body) = post(&client(), &server.url("/controller/runs"), json!({"goal": "test flow pwd to file"})).await;
    assert_eq!(body["decisions"][0]["mode"], "stub");
}
