//! Pinned MCP tools (`SERVER.TOOL`) as agent tools, against a scripted
//! model and the MCP fixture server (`tests/fixtures/mcp/server.py`, its
//! call log beside it). The step lists its servers' tools first: the
//! prompt offers each pinned tool's input schema, and arguments outside it
//! are refused before anyone is asked to approve. A call is a write that
//! waits for approval, then runs once and its content is the next
//! untrusted observation. A definition that no longer has its pinned digest
//! (at the start, or while the call waits for approval) fails the step
//! with nothing called (the call log absent). The server gets its `env`
//! secrets and the model its `api_key`, and neither reaches a record. An
//! undeclared `SERVER.TOOL` is refused at load with its position.

use std::fs;

use serde_json::json;

use crate::common::fake_model::{FakeModel, action, finish, observations, profile, start};
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, event_types, ticket_sandbox};
use crate::common::{ROOT, Sandbox};
use crate::secrets::{CANARY, hits};

/// The fixture's digests of `search` and `echo_env` (see tests/mcp.rs).
const SEARCH: &str = "sha256:013360898116938ecb113bb59e4e31d413ac26fb4b1188df322e1602e5691501";
const ECHO_ENV: &str = "sha256:2381257455f4d6be28b415c9e4b9f544120745ffef1b793438adce3e7c79aa39";

fn plan(tool: &str) -> String {
    format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"look\"\nkind = \"agent\"\ngoal = \"Search the docs.\"\n\
         tools = [\"{tool}\"]\nmodel = \"fake\"\nmax_turns = 4\nmax_refusals = 3\n\n[[verify]]\nkind = \"ticket_status\"\n\
         ticket_id = \"ticket-7\"\nequals = \"closed\"\n"
    )
}

/// python3 allowed to run exactly the fixture, served as `docs` with
/// `search` pinned, beside the fake model.
fn policy(model: &FakeModel) -> String {
    format!(
        "version = 1\n[shell]\nsearch_path = [\"/usr/bin\", \"/bin\"]\n[[shell.allow]]\nid = \"docs-server\"\n\
         program = \"python3\"\nargs = [[\"mcp/server.py\"]]\n[budget]\nstep_timeout_secs = 5\nmax_output_bytes = 4096\n\n\
         [mcp.servers.docs]\ncommand = [\"python3\", \"mcp/server.py\"]\ntools = {{ search = \"{SEARCH}\" }}\n\n{}",
        profile(model)
    )
}

/// A ticket sandbox (the verify holds) whose workspace holds the fixture
/// server in `mcp/`, with the switches `mode`.
fn sandbox(model: &FakeModel, tool: &str, mode: &str) -> Sandbox {
    let sandbox = ticket_sandbox("closed", 1);
    let fixture = fs::read_to_string(format!("{ROOT}/tests/fixtures/mcp/server.py")).expect("the fixture server");
    sandbox.write("workspace/mcp/server.py", &fixture);
    if !mode.is_empty() {
        sandbox.write("workspace/mcp/mcp-mode", mode);
    }
    sandbox.write_plan(&plan(tool), &policy(model));
    sandbox
}

fn call_log(sandbox: &Sandbox) -> Option<String> {
    fs::read_to_string(sandbox.workspace().join("mcp/mcp-calls.log")).ok()
}

/// Runs to the pause for the call, checks nothing was called, approves and
/// resumes to the end.
fn approve_and_resume(sandbox: &Sandbox) {
    let paused = sandbox.test_plan().expect_code(3).run();
    assert_eq!(call_log(sandbox), None, "nothing called before the approval: {}", paused.snapshot());
    let pending = &sandbox.state(RUN)["pending_action"];
    assert_eq!((pending["kind"].as_str(), pending["required_by"].as_str()), (Some("mcp"), Some("risk")), "{pending}");
    assert_eq!(pending["risk"], "write", "{pending}");
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
}

/// The `agent_tools_listed` events of the run: the tools each listed.
fn listings(sandbox: &Sandbox) -> Vec<serde_json::Value> {
    sandbox
        .record(RUN, "audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("audit line"))
        .filter(|event| event["event_type"] == "agent_tools_listed")
        .map(|event| event["details"]["tools"].clone())
        .collect()
}

/// The fixture's input schema of `search`.
fn search_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 20},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10},
        },
        "required": ["query"],
        "additionalProperties": false,
    })
}

#[test]
fn a_pinned_mcp_tool_is_offered_with_its_schema_called_once_after_approval_and_observed() {
    let model = start(vec![action("docs.search", json!({"query": "hello", "limit": 3})), finish("found it")]);
    let sandbox = sandbox(&model, "docs.search", "");
    approve_and_resume(&sandbox);
    assert_eq!(
        call_log(&sandbox).as_deref(),
        Some("{\"arguments\": {\"limit\": 3, \"query\": \"hello\"}, \"tool\": \"search\"}\n")
    );
    let seen = observations(&sandbox);
    assert_eq!(seen[0].0, "ok", "{seen:?}");
    assert!(seen[0].2.contains("results for hello"), "{seen:?}");
    // The prompt and the answer's JSON Schema offer the listed input schema.
    let body = &model.bodies()[0];
    let first = body["messages"][1]["content"].as_str().expect("prompt").to_string();
    assert!(first.contains("docs.search: call tool `search` of MCP server `docs`"), "{first}");
    assert!(first.contains("the server describes it as \"Search the documents.\""), "{first}");
    assert!(first.contains(&format!("arguments schema: {}", search_schema())), "{first}");
    let member = &body["response_format"]["json_schema"]["schema"]["anyOf"][0]["properties"];
    assert_eq!((&member["tool"], &member["arguments"]), (&json!({"const": "docs.search"}), &search_schema()));
    let second = model.bodies()[1]["messages"][1]["content"].as_str().expect("prompt").to_string();
    assert!(second.contains("source=tool:docs.search trust=untrusted"), "{second}");
    // Listed when the step started and again when it resumed; the calls
    // went to the server once.
    let listed = listings(&sandbox);
    assert_eq!(listed.len(), 2, "{listed:?}");
    for tools in &listed {
        assert_eq!(tools[0]["tool"], "docs.search");
        assert_eq!((tools[0]["digest"].as_str(), &tools[0]["input_schema"]), (Some(SEARCH), &search_schema()));
    }
    sandbox.planrun().args(["verify", RUN]).expect_code(0).run();
}

#[test]
fn arguments_outside_the_input_schema_are_refused_before_anyone_is_asked_and_nothing_is_called() {
    let model = start(vec![action("docs.search", json!({"query": 5})), finish("could not")]);
    let sandbox = sandbox(&model, "docs.search", "");
    let out = sandbox.test_plan().expect_code(0).run();
    assert_eq!(call_log(&sandbox), None, "nothing was called: {}", out.snapshot());
    let types = event_types(&sandbox);
    assert!(!types.contains(&"approval_requested".to_string()), "nobody was asked: {types:?}");
    let seen = observations(&sandbox);
    assert_eq!((seen[0].0.as_str(), seen[0].1.as_str()), ("refused", "agent.arguments"), "{seen:?}");
    assert!(seen[0].2.contains("arguments of `docs.search` do not fit the tool's input schema"), "{seen:?}");
    assert!(seen[0].2.contains("query"), "the problem names the argument: {seen:?}");
    // The refusal went back to the model, which finished.
    assert_eq!(model.requests(), 2);
}

/// The step's failure: its class (the run's history) and the run's error.
fn failed(sandbox: &Sandbox) -> (String, String) {
    let history = sandbox.history(RUN);
    let class = history.last().expect("a step record")["failure_class"].as_str().unwrap_or("").to_string();
    (class, sandbox.state(RUN)["error"].as_str().unwrap_or("").to_string())
}

#[test]
fn a_changed_definition_fails_the_step_before_the_model_is_asked() {
    let model = start(vec![action("docs.search", json!({"query": "hello"})), finish("could not")]);
    let sandbox = sandbox(&model, "docs.search", "describe-changed");
    let out = sandbox.test_plan().expect_code(1).run();
    assert_eq!(model.requests(), 0, "the model was not asked: {}", out.snapshot());
    assert_eq!(call_log(&sandbox), None, "nothing was called");
    let (class, message) = failed(&sandbox);
    assert_eq!(class, "security_denied", "{message}");
    assert!(
        message.contains("the definition of `search` of MCP server `docs` changed: new digest sha256:"),
        "{message}"
    );
    assert!(message.contains("planrun mcp pin docs"), "{message}");
    assert!(listings(&sandbox).is_empty(), "nothing listed is recorded as offered");
}

#[test]
fn a_definition_changed_while_the_call_waits_for_approval_fails_the_step_and_nothing_is_called() {
    let model = start(vec![action("docs.search", json!({"query": "hello"})), finish("could not")]);
    let sandbox = sandbox(&model, "docs.search", "");
    sandbox.test_plan().expect_code(3).run();
    sandbox.write("workspace/mcp/mcp-mode", "describe-changed");
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    let out = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(1).run();
    assert_eq!(call_log(&sandbox), None, "nothing was called: {}", out.snapshot());
    assert_eq!(model.requests(), 1, "the model was not asked again");
    let (class, message) = failed(&sandbox);
    assert_eq!(class, "security_denied", "{message}");
    assert!(message.contains("changed: new digest"), "{message}");
}

#[test]
fn the_servers_secret_reaches_it_the_models_key_reaches_the_model_and_neither_a_record() {
    const MODEL_KEY: &str = "model-key-Hq4 \"k\"ey/+&value";
    let model = start(vec![action("docs.echo_env", json!({"name": "DOCS_TOKEN"})), finish("read it")]);
    let sandbox = sandbox(&model, "docs.echo_env", "");
    let policy = policy(&model)
        .replace(
            &format!("tools = {{ search = \"{SEARCH}\" }}"),
            &format!("env = {{ DOCS_TOKEN = \"{{{{ secrets.TOKEN }}}}\" }}\ntools = {{ echo_env = \"{ECHO_ENV}\" }}"),
        )
        .replace("timeout_secs = 10\n", "timeout_secs = 10\napi_key = \"MODEL_KEY\"\n")
        + "\n[secrets.TOKEN]\nfrom_env = \"PLANRUN_TEST_CANARY\"\n[secrets.MODEL_KEY]\nfrom_env = \"PLANRUN_TEST_MODEL_KEY\"\n";
    sandbox.write_plan(&plan("docs.echo_env"), &policy);
    let secrets = [("PLANRUN_TEST_CANARY", CANARY), ("PLANRUN_TEST_MODEL_KEY", MODEL_KEY)];
    fn with_secrets<'a>(
        planrun: crate::common::planrun::Planrun<'a>,
        secrets: &[(&str, &str)],
    ) -> crate::common::planrun::Planrun<'a> {
        secrets.iter().fold(planrun, |planrun, (name, value)| planrun.env(name, value))
    }
    let paused = with_secrets(sandbox.test_plan(), &secrets).expect_code(3).run();
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    let done = with_secrets(sandbox.planrun().args(["resume", RUN]).clock(T_RESUME), &secrets).expect_code(0).run();
    // The server read the value from its environment; planrun replaced it
    // before the model or any record saw it.
    let seen = observations(&sandbox);
    assert_eq!(seen[0].0, "ok", "{seen:?}");
    assert!(seen[0].2.starts_with("[secret:TOKEN]\n"), "{seen:?}");
    assert_eq!(model.bearers(), vec![Some(MODEL_KEY.to_string()); 2]);
    let bodies = serde_json::to_string(&model.bodies()).expect("bodies");
    let texts = [
        ("first run", paused.stdout.as_str()),
        ("first run stderr", paused.stderr.as_str()),
        ("resume", done.stdout.as_str()),
        ("resume stderr", done.stderr.as_str()),
        ("model requests", bodies.as_str()),
    ];
    for value in [CANARY, MODEL_KEY] {
        assert_eq!(hits(sandbox.path(), &texts, value), Vec::<(String, String)>::new(), "{value}");
    }
}

#[test]
fn an_undeclared_server_or_unpinned_tool_is_refused_at_load_with_its_position() {
    for tool in ["docs.missing", "other.search"] {
        let model = start(Vec::new());
        let sandbox = sandbox(&model, tool, "");
        let out = sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run();
        assert_eq!(out.code, 2, "{}", out.snapshot());
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains(&format!("offers tool `{tool}`")), "{said}");
        assert!(said.contains("plans/test.toml:"), "{said}");
        assert!(said.contains("`docs.search`"), "the known tools name the pinned one: {said}");
        assert_eq!(model.requests(), 0);
    }
}

#[test]
fn replay_decides_mcp_turns_from_the_recorded_listing_and_starts_no_server() {
    let model = start(vec![
        action("docs.search", json!({"query": 5})),
        action("docs.search", json!({"query": "hello"})),
        finish("found it"),
    ]);
    let sandbox = sandbox(&model, "docs.search", "");
    approve_and_resume(&sandbox);
    assert_eq!(call_log(&sandbox).map(|log| log.lines().count()), Some(1));
    // Without the server, replay decides both turns as the run did: it
    // starts nothing and asks no model.
    fs::remove_file(sandbox.workspace().join("mcp/server.py")).expect("remove the server");
    let replay = || sandbox.planrun().in_sandbox().args(["replay", RUN, "--plans", "plans", "--policies", "policies"]);
    let same = replay().expect_code(0).run();
    assert!(same.stdout.contains("unchanged: 0 of 3 steps and turns would differ"), "{}", same.stdout);
    // Re-pinned to another definition: the recorded one is no longer the
    // pinned one, and both recorded calls are named.
    let other = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    sandbox.write_plan(&plan("docs.search"), &policy(&model).replace(SEARCH, other));
    let changed = replay().expect_code(1).run();
    let differing: Vec<&str> = changed.stdout.lines().filter(|line| line.starts_with('≠')).collect();
    assert_eq!(differing.len(), 2, "{}", changed.stdout);
    assert!(differing.iter().all(|line| line.contains("mcp.pin")), "{}", changed.stdout);
    assert_eq!(model.requests(), 3, "replay asked the model nothing");
    assert_eq!(call_log(&sandbox).map(|log| log.lines().count()), Some(1), "replay called nothing");
}

#[test]
fn a_server_that_crashes_hangs_or_answers_garbage_when_listed_fails_the_step_before_the_model_is_asked() {
    for (mode, class) in [("crash", "execution_error"), ("hang", "execution_error"), ("garbage", "invalid_tool_result")]
    {
        let model = start(vec![action("docs.search", json!({"query": "hello"})), finish("could not")]);
        let sandbox = sandbox(&model, "docs.search", mode);
        let out = sandbox.test_plan().expect_code(1).run();
        assert_eq!(model.requests(), 0, "{mode}: the model was not asked: {}", out.snapshot());
        assert_eq!(call_log(&sandbox), None, "{mode}: nothing was called");
        let (failed_class, message) = failed(&sandbox);
        assert_eq!(failed_class, class, "{mode}: {message}");
        assert!(message.contains("MCP server `docs`"), "{mode}: {message}");
        assert!(!out.stderr.contains("panicked"), "{mode}: {}", out.snapshot());
    }
}
