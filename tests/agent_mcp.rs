//! Pinned MCP tools (`SERVER.TOOL`) as agent tools, against a scripted
//! model and the MCP fixture server (`tests/fixtures/mcp/server.py`, its
//! call log beside it): a call is a write that waits for approval, then
//! runs once and its content is the next untrusted observation; arguments
//! outside the tool's input schema or a changed definition are refused with
//! nothing called (the call log absent); an undeclared `SERVER.TOOL` is
//! refused at load with its position.

use std::fs;

use serde_json::json;

use crate::common::fake_model::{FakeModel, action, finish, observations, profile, start};
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, ticket_sandbox};
use crate::common::{ROOT, Sandbox};

/// The fixture's digest of `search` (see tests/mcp.rs).
const SEARCH: &str = "sha256:013360898116938ecb113bb59e4e31d413ac26fb4b1188df322e1602e5691501";

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

#[test]
fn a_pinned_mcp_tool_is_called_once_after_approval_and_its_content_is_the_next_observation() {
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
    let first = model.bodies()[0]["messages"][1]["content"].as_str().expect("prompt").to_string();
    assert!(first.contains("docs.search"), "the tool is offered: {first}");
    let second = model.bodies()[1]["messages"][1]["content"].as_str().expect("prompt").to_string();
    assert!(second.contains("source=tool:docs.search trust=untrusted"), "{second}");
}

#[test]
fn arguments_outside_the_input_schema_are_refused_and_nothing_is_called() {
    let model = start(vec![action("docs.search", json!({"query": 5})), finish("could not")]);
    let sandbox = sandbox(&model, "docs.search", "");
    approve_and_resume(&sandbox);
    assert_eq!(call_log(&sandbox), None, "nothing was called");
    let seen = observations(&sandbox);
    assert_eq!((seen[0].0.as_str(), seen[0].1.as_str()), ("refused", "docs-server"), "{seen:?}");
    assert!(seen[0].2.contains("do not fit the input schema of tool `search`"), "{seen:?}");
}

#[test]
fn a_changed_tool_description_is_refused_and_nothing_is_called() {
    let model = start(vec![action("docs.search", json!({"query": "hello"})), finish("could not")]);
    let sandbox = sandbox(&model, "docs.search", "describe-changed");
    approve_and_resume(&sandbox);
    assert_eq!(call_log(&sandbox), None, "nothing was called");
    let seen = observations(&sandbox);
    assert_eq!(seen[0].0, "refused", "{seen:?}");
    assert!(seen[0].2.contains("definition of `search` changed: new digest sha256:"), "{seen:?}");
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
