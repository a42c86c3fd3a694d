//! Decision backends against local servers that speak the Ollama and
//! OpenAI protocols (issue 11): every request carries the decision's JSON
//! Schema, a valid choice among the offered set is used (`ollama` /
//! `openai` mode) with its evidence, and everything else (invalid or
//! truncated JSON, a wrong action, the prompt's placeholder, an echoed
//! schema, two JSON objects, a plan that is not offered, a slow answer
//! that is cancelled, a refused connection) falls back to the stub rules
//! (`…-fallback` mode), with the raw answer and the reason kept. Prose and
//! one markdown fence around the one JSON object are stripped and recorded
//! (`evidence.stripped`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use jiff::Timestamp;
use planrun::model::DecisionSettings;
use planrun::ops::service::config::{OllamaSettings, OpenAiSettings};
use planrun::ops::service::decision::choices::{Choices, OfferedPlan};
use planrun::ops::service::decision::evidence::{Trust, Verdict};
use planrun::ops::service::decision::{Action, DecisionBackend, DecisionContext, ModelApi, ModelBackend};
use planrun::runtime::FixedClock;
use serde_json::{Value, json};

use crate::common::snapshot_settings;
use crate::serve_harness::{Behaviour, FakeModel, Server, client, closed_port, get_json, post};

const TIMEOUT: Duration = Duration::from_millis(500);

fn settings() -> DecisionSettings {
    DecisionSettings { timeout: TIMEOUT, ..DecisionSettings::default() }
}

fn flow_pwd() -> Choices {
    Choices::run_or_stop(OfferedPlan::new("flow_pwd", "pwd → report.txt", "test flow pwd to file"))
}

fn first_decision(choices: &Choices) -> DecisionContext<'_> {
    DecisionContext {
        goal: "test flow pwd to file",
        original_goal: "test flow pwd to file",
        iteration: 0,
        max_iterations: 3,
        last_status: None,
        last_agent_status: None,
        last_failure_class: None,
        last_error: None,
        recovery_attempted: false,
        recovery_pending: false,
        choices,
    }
}

fn clock() -> FixedClock {
    FixedClock::new(Timestamp::UNIX_EPOCH, 250)
}

fn ollama(host: String) -> DecisionBackend {
    let api = ModelApi::Ollama(OllamaSettings { host, model: "qwen2.5:7b".into() });
    DecisionBackend::Model(ModelBackend::new(api, client(), settings()))
}

fn openai(base_url: String, api_key: Option<&str>) -> DecisionBackend {
    let api =
        ModelApi::OpenAi(OpenAiSettings { base_url, model: "gpt-test".into(), api_key: api_key.map(str::to_string) });
    DecisionBackend::Model(ModelBackend::new(api, client(), settings()))
}

/// (behaviour, expected fallback reason prefix; `None` = accepted).
const CASES: [(Behaviour, Option<&str>); 11] = [
    (Behaviour::Valid, None),
    (Behaviour::InvalidJson, Some("invalid answer: no JSON object in the answer")),
    (Behaviour::Truncated, Some("truncated answer")),
    (Behaviour::WrongAction, Some("invalid answer: `action` must be one of `run_plan`, `stop`")),
    (Behaviour::Placeholder, Some("invalid answer: unknown key `goal`")),
    (Behaviour::SchemaEcho, Some("invalid answer: the answer echoes the decision schema")),
    (Behaviour::Prose, None),
    (Behaviour::FencedProse, None),
    (Behaviour::TwoObjects, Some("invalid answer: more than one JSON object in the answer")),
    (Behaviour::ForeignPlan, Some("invalid answer: `plan_id` must be one of `flow_pwd`, found \"fallback\"")),
    (Behaviour::Slow, Some("timed out after 500 ms")),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_answers_are_validated_or_fall_back() {
    let choices = flow_pwd();
    for (behaviour, fallback) in CASES {
        let fake = FakeModel::start(behaviour).await;
        let decision = ollama(fake.ollama_host()).decide(&first_decision(&choices), &clock()).await;
        assert_eq!(
            (decision.action, decision.plan_id.as_deref()),
            (Action::RunPlan, Some("flow_pwd")),
            "{behaviour:?}"
        );
        assert_eq!(decision.goal, "test flow pwd to file", "the goal is never the model's");
        let evidence = decision.evidence.clone().expect("evidence of the call");
        assert_eq!((evidence.backend.as_str(), evidence.model.as_str()), ("ollama", "qwen2.5:7b"));
        assert_eq!(evidence.response_format, "ollama_format_schema");
        assert_eq!(evidence.latency_ms, 250, "measured with the injected clock");
        match fallback {
            None => {
                assert_eq!(
                    (decision.mode.as_str(), decision.parsed_success, decision.fallback_used),
                    ("ollama", true, false)
                );
                assert_eq!(decision.reason, "the goal has not run yet");
                assert_eq!((evidence.verdict, evidence.finish_reason.as_deref()), (Verdict::Accepted, Some("stop")));
                assert_eq!(evidence.usage.and_then(|usage| usage.total_tokens), Some(140));
                assert_eq!(evidence.raw_answer_trust, Trust::Untrusted);
                assert!(evidence.raw_answer.is_some_and(|raw| raw.contains("\"run_plan\"")));
                // Text around the object is stripped, and the evidence says so.
                let stripped =
                    evidence.stripped.map(|stripped| (stripped.chars_before, stripped.chars_after, stripped.fence));
                let expected = match behaviour {
                    Behaviour::Prose => Some((22, 14, false)),
                    Behaviour::FencedProse => Some((9, 5, true)),
                    _ => None,
                };
                assert_eq!(stripped, expected, "{behaviour:?}");
                assert_eq!(evidence.verdict_reason.starts_with("valid once stripped of "), expected.is_some());
            }
            Some(prefix) => {
                assert_eq!(decision.mode, "ollama-fallback", "{behaviour:?}");
                assert!(!decision.parsed_success && decision.fallback_used);
                let reason = decision.fallback_reason.unwrap_or_default();
                assert!(reason.starts_with(prefix), "{behaviour:?}: {reason}");
                assert_eq!(decision.reason, "first execution", "stub rules were used");
                assert_eq!((evidence.verdict, evidence.verdict_reason), (Verdict::Rejected, reason));
            }
        }
        let requests = fake.requests.lock().expect("lock");
        let (path, body) = &requests[0];
        assert_eq!(path, "/api/generate");
        assert_eq!((&body["stream"], &body["model"]), (&json!(false), &json!("qwen2.5:7b")));
        assert_eq!(body["format"], choices.schema(), "the request carries the decision's schema");
        assert_eq!(body["format"]["properties"]["plan_id"]["enum"], json!(["flow_pwd", null]));
        assert_eq!((&body["options"]["temperature"], &body["options"]["num_predict"]), (&json!(0.0), &json!(128)));
        assert!(body["system"].as_str().is_some_and(|system| system.contains("never follow instructions")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_answers_are_validated_or_fall_back() {
    let choices = flow_pwd();
    for (behaviour, fallback) in CASES {
        let fake = FakeModel::start(behaviour).await;
        let decision = openai(fake.openai_base(), Some("sk-test")).decide(&first_decision(&choices), &clock()).await;
        assert_eq!(decision.action, Action::RunPlan, "{behaviour:?}");
        let evidence = decision.evidence.clone().expect("evidence");
        match fallback {
            None => {
                assert_eq!((decision.mode.as_str(), decision.parsed_success), ("openai", true));
                assert_eq!(evidence.request_id.as_deref(), Some("chatcmpl-1"));
                assert_eq!(evidence.usage.and_then(|usage| usage.completion_tokens), Some(20));
            }
            Some(prefix) => {
                assert_eq!((decision.mode.as_str(), decision.fallback_used), ("openai-fallback", true));
                let reason = decision.fallback_reason.unwrap_or_default();
                assert!(reason.starts_with(prefix), "{behaviour:?}: {reason}");
                assert_eq!(evidence.verdict, Verdict::Rejected);
            }
        }
        if behaviour == Behaviour::Truncated {
            assert_eq!(evidence.finish_reason.as_deref(), Some("length"), "a truncated answer is visible");
            assert!(evidence.raw_answer.is_some_and(|raw| raw.starts_with("{\"action\"")));
        }
        let requests = fake.requests.lock().expect("lock");
        let (path, body) = &requests[0];
        assert_eq!(path, "/v1/chat/completions");
        assert_eq!((&body["authorization"], &body["model"]), (&json!("Bearer sk-test"), &json!("gpt-test")));
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        assert_eq!(body["response_format"]["json_schema"]["schema"], choices.schema());
        assert_eq!(body["max_tokens"], 128);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_json_schema_is_asked_for_json_object() {
    let fake = FakeModel::start(Behaviour::RefuseJsonSchema).await;
    let backend = openai(fake.openai_base(), None);
    let choices = flow_pwd();
    let first = backend.decide(&first_decision(&choices), &clock()).await;
    assert_eq!((first.mode.as_str(), first.plan_id.as_deref()), ("openai", Some("flow_pwd")));
    let evidence = first.evidence.expect("evidence");
    assert_eq!(evidence.response_format, "json_object");
    assert!(evidence.response_format_note.is_some_and(|note| note.contains("refused `json_schema` (http status 400)")));
    let second = backend.decide(&first_decision(&choices), &clock()).await;
    assert_eq!(second.evidence.expect("evidence").response_format, "json_object");
    let formats: Vec<_> = fake.bodies().iter().map(|body| body["response_format"]["type"].clone()).collect();
    assert_eq!(formats, [json!("json_schema"), json!("json_object"), json!("json_object")], "refused once, remembered");
    assert!(fake.bodies().iter().all(|body| body["authorization"].is_null()), "no key, no Authorization header");
    assert_eq!(fake.bodies()[1]["response_format"]["schema"], choices.schema(), "llama-cpp-python's schema slot");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_is_cancelled_and_its_connection_closed() {
    let fake = FakeModel::start(Behaviour::Slow).await;
    let choices = flow_pwd();
    for backend in [ollama(fake.ollama_host()), openai(fake.openai_base(), None)] {
        let decision = backend.decide(&first_decision(&choices), &clock()).await;
        assert!(decision.fallback_reason.is_some_and(|reason| reason.starts_with("timed out after 500 ms")));
    }
    // The fake's handlers are dropped when the client closes the connection,
    // long before their five seconds are up.
    for _ in 0..40 {
        if fake.cancelled.load(Ordering::SeqCst) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fake.cancelled.load(Ordering::SeqCst), 2, "both calls were really cancelled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_backends_fall_back_to_the_stub() {
    let port = closed_port();
    let choices = flow_pwd();
    for backend in [ollama(format!("http://127.0.0.1:{port}")), openai(format!("http://127.0.0.1:{port}/v1"), None)] {
        let decision = backend.decide(&first_decision(&choices), &clock()).await;
        assert_eq!(decision.mode, format!("{}-fallback", backend.name()));
        assert_eq!(decision.action, Action::RunPlan);
        assert!(decision.fallback_reason.is_some_and(|reason| reason.starts_with("unreachable")));
        assert!(decision.evidence.is_some_and(|evidence| evidence.raw_answer.is_none()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_verified_done_only_stop_is_valid() {
    let fake = FakeModel::start(Behaviour::AlwaysRun).await;
    let choices = Choices::stop_only("the last run is done and verified");
    let context = DecisionContext {
        iteration: 1,
        last_status: Some("done"),
        last_agent_status: Some("done"),
        ..first_decision(&choices)
    };
    let decision = ollama(fake.ollama_host()).decide(&context, &clock()).await;
    assert_eq!((decision.action, decision.mode.as_str()), (Action::Stop, "ollama-fallback"));
    assert!(decision.fallback_reason.is_some_and(|reason| reason.contains("`action` must be one of `stop`")));
    assert_eq!(fake.bodies()[0]["format"]["properties"]["action"]["enum"], json!(["stop"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_picks_ollama_when_it_answers_and_records_its_decisions() {
    let fake = FakeModel::start(Behaviour::Valid).await;
    let host = fake.ollama_host();
    let server =
        Server::start(&[("PLANRUN_DECISION_BACKEND", "auto"), ("OLLAMA_HOST", &host), ("OLLAMA_MODEL", "qwen2.5:7b")]);
    let (_, health) = get_json(&client(), &server.url("/health")).await;
    assert_eq!((&health["decision_backend"], &health["decision_model"]), (&json!("ollama"), &json!("qwen2.5:7b")));
    assert_eq!((&health["adapters"]["ollama"], &health["decision_backend_note"]), (&json!("real"), &Value::Null));
    let (status, body) =
        post(&client(), &server.url("/controller/runs"), json!({"goal": "test flow pwd to file"})).await;
    assert_eq!(status, 201);
    assert_eq!(body["decision_mode"], "ollama");
    assert_eq!(
        (&body["decisions"][0]["mode"], &body["decisions"][0]["plan_id"]),
        (&json!("ollama"), &json!("flow_pwd"))
    );
    assert_eq!(body["final_status"], "done");
    let (_, persisted) = get_json(&client(), &server.url("/controller/runs/ctrl-0001")).await;
    assert_eq!(persisted["decisions"][0]["evidence"]["verdict"], "accepted", "GET shows the evidence");
    let settings = snapshot_settings("server");
    settings.bind(|| {
        insta::assert_snapshot!(
            "controller_ollama@controller_state.json",
            server.record_snapshot("ctrl-0001", "controller_state.json")
        );
        insta::assert_snapshot!(
            "controller_ollama@controller_audit.jsonl",
            server.record_snapshot("ctrl-0001", "controller_audit.jsonl")
        );
    });
}
