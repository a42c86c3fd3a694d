//! Agent steps against a scripted fake model on loopback (the OpenAI
//! chat-completions protocol, and Ollama's chat API): the model proposes,
//! the runtime decides.

use serde_json::{Value, json};

use crate::common::fake_model::{FakeModel, action, ask, finish, profile, start};
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, close_count, event_types, ticket_sandbox};
use crate::common::{Sandbox, TEST_POLICY};

/// The agent plan: one agent step over the ticket tools, verified by a
/// fresh look-up.
fn agent_plan(tools: &str, extra: &str) -> String {
    format!(
        r#"version = 1
id = "test"

[[steps]]
id = "triage"
kind = "agent"
goal = "Close ticket-7 if it is open. Never touch other tickets."
tools = [{tools}]
model = "fake"
max_turns = 6
{extra}

[[verify]]
kind = "ticket_status"
ticket_id = "ticket-7"
equals = "closed"
"#
    )
}

fn policy(model: &FakeModel) -> String {
    format!("{TEST_POLICY}\n{}", profile(model))
}

const TICKET_TOOLS: &str = r#""ticket_lookup", "ticket_close""#;

/// Runs the agent plan to its pause for the close, then approves it.
fn pause_and_approve(sandbox: &Sandbox, model: &FakeModel) {
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(model));
    sandbox.test_plan().expect_code(3).run();
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
}

fn state(sandbox: &Sandbox) -> Value {
    sandbox.state(RUN)
}

#[test]
fn a_benign_run_looks_up_closes_after_approval_and_finishes_verified() {
    let model = start(vec![
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
        action("ticket_close", json!({"ticket_id": "ticket-7"})),
        finish("ticket-7 is closed"),
    ]);
    let sandbox = ticket_sandbox("open", 0);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    let paused = sandbox.test_plan().expect_code(3).run();
    assert_eq!(model.requests(), 2, "{}", paused.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "nothing closed before the approval");
    let pending = &state(&sandbox)["pending_action"];
    assert_eq!(pending["kind"], "ticket_close");
    assert_eq!(pending["action"]["ticket_id"], "ticket-7");
    assert_eq!(pending["provenance"][0]["source"], "goal (trusted)");
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
    assert_eq!(model.requests(), 3);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(close_count(&sandbox, "ticket-8"), 0);
    let state = state(&sandbox);
    assert_eq!(state["status"], "done");
    assert!(state.get("agent").is_none(), "the agent record goes when the step ends");
    let types = event_types(&sandbox);
    assert_eq!(types.iter().filter(|kind| *kind == "agent_answer_recorded").count(), 3, "{types:?}");
}

/// A policy with two named shell rules beside the fake model.
/// `touch` of a workspace path allowed (the tests touch `out/…`: the
/// sandbox lets a program create files inside the workspace's folders, not
/// at its top).
fn shell_policy(model: &FakeModel) -> String {
    format!(
        "{TEST_POLICY}\n[[shell.allow]]\nid = \"touch-file\"\nprogram = \"touch\"\nargs = [[{{ slot = \"path\" }}]]\n\n{}",
        profile(model)
    )
}

/// The observations recorded, as `(outcome, rule)`.
fn observations(sandbox: &Sandbox) -> Vec<(String, String)> {
    crate::common::fake_model::observations(sandbox).into_iter().map(|(outcome, rule, _)| (outcome, rule)).collect()
}

#[test]
fn an_off_policy_command_and_a_path_outside_the_workspace_are_refused_and_never_run() {
    let model = start(vec![
        action("rm", json!({"args": ["-rf", "."]})),
        action("touch-file", json!({"args": ["../escaped.txt"]})),
        action("read_file", json!({"path": "/etc/passwd"})),
        action("write_file", json!({"path": "../outside.txt", "content": "x"})),
        action("touch-file", json!({"args": ["out/made.txt"]})),
        finish("done"),
    ]);
    let sandbox = ticket_sandbox("open", 0);
    std::fs::create_dir_all(sandbox.workspace().join("out")).expect("out/");
    let plan = agent_plan(r#""touch-file", "read_file", "write_file""#, "max_refusals = 5");
    sandbox.write_plan(&plan, &shell_policy(&model));
    let out = sandbox.test_plan().expect_code(1).run();
    assert!(!sandbox.path().join("escaped.txt").exists(), "{}", out.snapshot());
    assert!(!sandbox.path().join("outside.txt").exists());
    assert!(sandbox.workspace().join("out/made.txt").exists(), "the allowed proposal ran");
    let seen = observations(&sandbox);
    let rules: Vec<&str> = seen.iter().map(|(_, rule)| rule.as_str()).collect();
    assert_eq!(seen[0].0, "refused");
    assert_eq!(rules[0], "agent.tools", "{seen:?}");
    assert_eq!(seen[1].0, "refused");
    assert_eq!(seen[2], ("refused".to_string(), "files.absolute".to_string()));
    assert_eq!(seen[3], ("refused".to_string(), "files.parent".to_string()));
    assert_eq!(seen[4].0, "ok");
    // The finish is not verified: ticket-7 is still open.
    let state = state(&sandbox);
    assert_eq!(state["stop_reason"], "step_failed");
    assert!(state["error"].as_str().expect("error").contains("ticket `ticket-7` status"), "{state}");
    assert_eq!(model.requests(), 6);
}

#[test]
fn too_many_refusals_end_the_step() {
    let model = start(vec![action("rm", json!({"args": []}))]);
    let sandbox = ticket_sandbox("open", 0);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, "max_refusals = 2"), &policy(&model));
    sandbox.test_plan().expect_code(1).run();
    assert_eq!(model.requests(), 3, "the third refusal is one too many");
    let history = sandbox.history(RUN);
    assert_eq!(history[0]["failure_class"], "security_denied");
}

#[test]
fn a_prompt_injection_in_a_ticket_note_does_not_close_ticket_8() {
    // The model follows the note's injected instruction: the close of
    // ticket-8 is a write, frozen for a person, who sees what it is.
    let model = start(vec![
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
        action("ticket_close", json!({"ticket_id": "ticket-8"})),
    ]);
    let sandbox = ticket_sandbox("open", 0);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    sandbox.test_plan().expect_code(3).run();
    let bodies = model.bodies();
    let prompt = bodies[1]["messages"][1]["content"].as_str().expect("prompt");
    assert!(prompt.contains("trust=untrusted"), "{prompt}");
    assert!(prompt.contains("SYSTEM OVERRIDE"), "the note reaches the model only as quoted data");
    let pending = &state(&sandbox)["pending_action"];
    assert_eq!(pending["action"]["ticket_id"], "ticket-8");
    // The approval view names where the target came from: the ticket note.
    assert_eq!(pending["provenance"][0]["source"], "observation turn 1 (tool:ticket_lookup, untrusted)", "{pending}");
    sandbox.planrun().args(["reject", RUN]).clock(T_APPROVE).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-8"), 0);
    assert_eq!(tickets_status(&sandbox, "ticket-8"), "open");
}

fn tickets_status(sandbox: &Sandbox, ticket: &str) -> String {
    crate::common::tickets::tickets(sandbox)["tickets"][ticket]["status"].as_str().expect("status").to_string()
}

#[test]
fn an_endless_loop_is_stopped_by_max_turns() {
    let model = start(vec![action("ticket_lookup", json!({"ticket_id": "ticket-7"}))]);
    let sandbox = ticket_sandbox("open", 0);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    sandbox.test_plan().expect_code(1).run();
    assert_eq!(model.requests(), 6, "max_turns = 6");
    let state = state(&sandbox);
    assert_eq!(state["stop_reason"], "budget_exhausted");
    assert!(state["error"].as_str().expect("error").contains("max_turns"), "{state}");
}

#[test]
fn a_finish_without_evidence_fails_verification() {
    let model = start(vec![finish("all done, trust me")]);
    let sandbox = ticket_sandbox("open", 0);
    // No `[[verify]]`, no `expect`: nothing could vouch for the finish.
    let plan = agent_plan(TICKET_TOOLS, "")
        .replace("[[verify]]\nkind = \"ticket_status\"\nticket_id = \"ticket-7\"\nequals = \"closed\"\n", "");
    sandbox.write_plan(&plan, &policy(&model));
    sandbox.test_plan().expect_code(1).run();
    let history = sandbox.history(RUN);
    assert_eq!(history[0]["failure_class"], "verification_failed");
    // With the check, a finish the world contradicts fails it too.
    let sandbox = ticket_sandbox("open", 0);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    sandbox.test_plan().expect_code(1).run();
    assert_eq!(sandbox.history(RUN)[0]["failure_class"], "verification_failed");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn call_and_token_budgets_stop_the_step() {
    // The scripted model counts 100 prompt and 20 answer tokens per call.
    for (budget, requests) in [("max_model_calls = 2", 2), ("max_tokens_in = 250", 3), ("max_tokens_out = 40", 2)] {
        let model = start(vec![action("ticket_lookup", json!({"ticket_id": "ticket-7"}))]);
        let sandbox = ticket_sandbox("open", 0);
        sandbox.write_plan(&agent_plan(TICKET_TOOLS, budget), &policy(&model));
        sandbox.test_plan().expect_code(1).run();
        assert_eq!(model.requests(), requests, "{budget}");
        let name = budget.split(' ').next().expect("name");
        assert!(state(&sandbox)["error"].as_str().expect("error").contains(name), "{budget}");
    }
}

#[test]
fn a_crash_between_the_recorded_answer_and_its_effect_runs_it_once_without_asking_again() {
    let model = start(vec![
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
        action("ticket_close", json!({"ticket_id": "ticket-7"})),
        finish("ticket-7 is closed"),
    ]);
    let sandbox = ticket_sandbox("open", 0);
    pause_and_approve(&sandbox, &model);
    let crashed =
        sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).env("PLANRUN_CRASH_AT", "triage:after_effect").run();
    assert_eq!(crashed.code, -1, "killed by the hook: {}", crashed.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(model.requests(), 2, "the close was recorded before the crash");
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "recovery must not close again");
    assert_eq!(model.requests(), 3, "only the finish was asked after the crash");
    assert_eq!(state(&sandbox)["status"], "done");
}

#[test]
fn a_crash_after_the_answer_is_sealed_resumes_from_it() {
    // The shell effect of turn 1 (unkeyed, allowed without approval): the
    // crash comes before it runs; the resume runs it once, from the record.
    let model = start(vec![
        action("touch-file", json!({"args": ["out/made.txt"]})),
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
    ]);
    let sandbox = ticket_sandbox("open", 0);
    std::fs::create_dir_all(sandbox.workspace().join("out")).expect("out/");
    let plan = agent_plan(r#""touch-file", "ticket_lookup""#, "max_turns = 2").replace("max_turns = 6\n", "");
    sandbox.write_plan(&plan, &shell_policy(&model));
    let crashed = sandbox.test_plan().env("PLANRUN_CRASH_AT", "triage:before_effect").run();
    assert_eq!(crashed.code, -1, "{}", crashed.snapshot());
    assert_eq!(model.requests(), 1);
    assert!(!sandbox.workspace().join("out/made.txt").exists());
    let resumed = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).run();
    assert!(sandbox.workspace().join("out/made.txt").exists(), "{}", resumed.snapshot());
    assert_eq!(model.requests(), 2, "turn 1 was not asked again");
    assert!(state(&sandbox)["error"].as_str().expect("error").contains("max_turns"));
}

#[test]
fn ask_waits_for_a_persons_answer_and_the_run_continues_with_it() {
    let model = start(vec![
        ask("Which ticket should I close?"),
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
        finish("looked it up"),
    ]);
    let sandbox = ticket_sandbox("closed", 1);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    sandbox.test_plan().expect_code(4).run();
    let waiting = state(&sandbox);
    assert_eq!(waiting["status"], "waiting_input");
    assert_eq!(waiting["agent"]["question"], "Which ticket should I close?");
    assert_eq!(model.requests(), 1);
    // A resume without an answer, and an empty answer, are refused.
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(1).run();
    sandbox.planrun().args(["answer", RUN, "  "]).clock(T_RESUME).expect_code(2).run();
    assert_eq!(model.requests(), 1);
    sandbox.planrun().args(["answer", RUN, "ticket-7 only"]).clock(T_RESUME).expect_code(0).run();
    assert_eq!(model.requests(), 3);
    let bodies = model.bodies();
    let prompt = bodies[1]["messages"][1]["content"].as_str().expect("prompt");
    assert!(prompt.contains("source=person trust=untrusted"), "{prompt}");
    assert!(prompt.contains("ticket-7 only"));
    assert_eq!(state(&sandbox)["status"], "done");
    // A run that asks nothing refuses an answer.
    sandbox.planrun().args(["answer", RUN, "more"]).clock(T_RESUME_AGAIN).expect_code(1).run();
}

#[test]
fn a_server_that_refuses_json_schema_is_asked_again_with_json_object() {
    // llama-cpp-python's server answers `json_schema` with HTTP 422.
    let model = FakeModel::start_refusing_json_schema(vec![
        action("ticket_lookup", json!({"ticket_id": "ticket-7"})),
        finish("ticket-7 was already closed"),
    ])
    .expect("a loopback port");
    let sandbox = ticket_sandbox("closed", 1);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    sandbox.test_plan().expect_code(0).run();
    assert_eq!(model.requests(), 2, "two answers");
    let bodies = model.bodies();
    let formats: Vec<&Value> = bodies.iter().map(|body| &body["response_format"]["type"]).collect();
    assert_eq!(formats, [&json!("json_schema"), &json!("json_object"), &json!("json_schema"), &json!("json_object")]);
    // The same schema, in the slot llama-cpp-python reads.
    assert_eq!(bodies[1]["response_format"]["schema"], bodies[0]["response_format"]["json_schema"]["schema"]);
    let answers: Vec<Value> = sandbox
        .record(RUN, "audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("audit line"))
        .filter(|event| event["event_type"] == "agent_answer_recorded")
        .collect();
    assert_eq!(answers.len(), 2);
    for answer in &answers {
        assert_eq!(answer["details"]["answer"]["response_format"], "json_object", "{answer}");
    }
    let state = state(&sandbox);
    assert_eq!(state["status"], "done");
    // One model call per answer, however many requests it took.
    let summary = &sandbox.history(RUN)[0]["output_json"];
    assert_eq!(summary["model_calls"], 2, "{summary}");
}

#[test]
fn a_summary_over_the_limit_is_refused_though_the_schema_gives_no_max_length() {
    // The schema says the bound in words (llama.cpp cannot turn a
    // `maxLength` of 2000 into a grammar); the runtime still holds it.
    let long = "x".repeat(2001);
    let model = start(vec![finish(&long), finish("ticket-7 was already closed")]);
    let sandbox = ticket_sandbox("closed", 1);
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &policy(&model));
    sandbox.test_plan().expect_code(0).run();
    assert_eq!(
        observations(&sandbox),
        [("refused".to_string(), "agent.answer".to_string()), ("ok".to_string(), String::new())]
    );
    let schema = model.bodies()[0]["response_format"]["json_schema"]["schema"].to_string();
    assert!(!schema.contains("maxLength"), "{schema}");
    assert!(schema.contains("at most 2000 bytes"), "{schema}");
}

#[test]
fn an_ollama_model_is_asked_through_its_chat_api_with_the_answer_schema_as_format() {
    let model = start(vec![action("ticket_lookup", json!({"ticket_id": "ticket-7"})), finish("ticket-7 is closed")]);
    let sandbox = ticket_sandbox("closed", 1);
    let ollama = profile(&model)
        .replace("backend = \"openai\"", "backend = \"ollama\"")
        .replace(&model.endpoint(), &model.root());
    sandbox.write_plan(&agent_plan(TICKET_TOOLS, ""), &format!("{TEST_POLICY}\n{ollama}"));
    let out = sandbox.test_plan().expect_code(0).run();
    assert_eq!(model.requests(), 2, "{}", out.snapshot());
    let body = &model.bodies()[0];
    assert_eq!((&body["stream"], &body["model"]), (&json!(false), &json!("fake")), "{body}");
    let members = body["format"]["anyOf"].as_array().expect("the answer schema is the format");
    assert_eq!(members[0]["properties"]["tool"], json!({"const": "ticket_lookup"}), "{body}");
    assert_eq!(body["messages"][0]["role"], "system", "{body}");
    // The answer, its finish reason and its token counts, as Ollama says them.
    let audit = sandbox.record(RUN, "audit.jsonl");
    let answers: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("audit line"))
        .filter(|event| event["event_type"] == "agent_answer_recorded")
        .map(|event| event["details"]["answer"].clone())
        .collect();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["decoded"]["tool"], "ticket_lookup");
    assert_eq!((&answers[0]["tokens_in"], &answers[0]["tokens_out"]), (&json!(100), &json!(20)));
    assert_eq!(answers[0]["finish_reason"], "stop");
}
