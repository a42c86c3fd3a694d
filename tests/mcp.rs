//! MCP tools: a fixture server (`tests/fixtures/mcp/server.py`, two tools,
//! a call log, switches in `mcp-mode` beside it, copied into the
//! workspace's `mcp/`) started, inside the sandbox, by `mcp`
//! steps and by `planrun mcp pin`. Nothing is called when a definition
//! changed or the arguments do not fit the schema (the call log stays
//! absent); a crash, a hang, garbage or an answer too large ends the step
//! with its own message; the server's secret reaches it and no record; a
//! call in flight when the run is killed is made again by `resume`.

use std::fs;

use serde_json::json;

use crate::common::{Output, ROOT, Sandbox, snapshot_settings};
use crate::secrets::{CANARY, check, hits};

/// The fixture's digests (the canonical form of docs/effects-mcp.md).
const SEARCH: &str = "sha256:013360898116938ecb113bb59e4e31d413ac26fb4b1188df322e1602e5691501";
const ECHO_ENV: &str = "sha256:2381257455f4d6be28b415c9e4b9f544120745ffef1b793438adce3e7c79aa39";

/// The server as the policy runs it: a copy of the fixture in the
/// workspace (the sandbox lets a server read the workspace, not the
/// repository), started in the workspace.
fn server() -> String {
    "mcp/server.py".to_string()
}

/// A sandbox whose workspace holds the fixture server in `mcp/`.
fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let fixture = fs::read_to_string(format!("{ROOT}/tests/fixtures/mcp/server.py")).expect("the fixture server");
    sandbox.write("workspace/mcp/server.py", &fixture);
    sandbox
}

/// The policy: python3 allowed to run exactly the fixture, the fixture as
/// server `docs` with the canary secret in its environment.
fn policy(tools: &str) -> String {
    let server = server();
    format!(
        r#"version = 1
[shell]
search_path = ["/usr/bin", "/bin"]
[[shell.allow]]
id = "docs-server"
program = "python3"
args = [["{server}"]]
[retry]
execution_error = 1
[budget]
step_timeout_secs = 3
max_output_bytes = 4096
[secrets.TOKEN]
from_env = "PLANRUN_TEST_CANARY"

[mcp.servers.docs]
command = ["python3", "{server}"]
env = {{ DOCS_TOKEN = "{{{{ secrets.TOKEN }}}}" }}
{tools}
"#
    )
}

fn pinned() -> String {
    policy(&format!("tools = {{ search = \"{SEARCH}\", echo_env = \"{ECHO_ENV}\" }}"))
}

/// A plan whose first step is the given `mcp` step, then `finish`.
fn plan(step: &str) -> String {
    format!(
        "version = 1\nid = \"test\"\ndefault = true\nexpected_status = \"failed\"\n\n[[steps]]\nid = \"call\"\nkind = \"mcp\"\nserver = \"docs\"\n{step}\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\nmessage = \"{{{{ steps.call.output_text }}}}\"\n"
    )
}

const SEARCH_STEP: &str = "tool = \"search\"\narguments = { query = \"hello\", limit = 3 }";

fn run(sandbox: &Sandbox, plan: &str, policy: &str, mode: &str) -> Output {
    sandbox.write_plan(plan, policy);
    if !mode.is_empty() {
        sandbox.write("workspace/mcp/mcp-mode", mode);
    }
    sandbox.test_plan().env("PLANRUN_TEST_CANARY", CANARY).run()
}

fn call_log(sandbox: &Sandbox) -> Option<String> {
    fs::read_to_string(sandbox.workspace().join("mcp/mcp-calls.log")).ok()
}

#[test]
fn a_pinned_tool_is_called_and_its_content_is_the_untrusted_output() {
    let sandbox = sandbox();
    let output = run(&sandbox, &plan(SEARCH_STEP), &pinned(), "notify");
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(
        call_log(&sandbox).as_deref(),
        Some("{\"arguments\": {\"limit\": 3, \"query\": \"hello\"}, \"tool\": \"search\"}\n")
    );
    let history = sandbox.history("t");
    assert_eq!(history[0]["output_text"], "results for hello");
    let json = &history[0]["output_json"];
    assert_eq!(json["untrusted_fields"], json!(["content", "structured_content"]));
    assert_eq!(json["structured_content"], json!({"hits": 1}));
    assert_eq!(
        history[0]["action"],
        json!({"kind": "mcp", "server": "docs", "tool": "search", "arguments": {"query": "hello", "limit": 3}})
    );
    assert!(output.stderr.contains("results for hello"), "{}", output.snapshot());
}

/// The server runs in the shell steps' sandbox: it cannot write outside the
/// workspace, and the step's record says which sandbox applied.
#[test]
fn the_server_runs_sandboxed() {
    let sandbox = sandbox();
    let output = run(&sandbox, &plan(SEARCH_STEP), &pinned(), "escape");
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let history = sandbox.history("t");
    let text = history[0]["output_text"].as_str().unwrap_or_default();
    assert!(text.starts_with("results for hello (escape refused: "), "{text}");
    assert!(!sandbox.path().join("escaped.txt").exists(), "the server wrote outside the workspace");
    assert_eq!(history[0]["details"]["sandbox"]["kind"], "landlock", "{}", history[0]["details"]);
}

#[test]
fn a_changed_description_is_refused_and_nothing_is_called() {
    let sandbox = sandbox();
    let output = run(&sandbox, &plan(SEARCH_STEP), &pinned(), "describe-changed");
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let history = sandbox.history("t");
    let error = history[0]["error"].as_str().expect("an error");
    assert!(error.starts_with("definition of `search` changed: new digest sha256:"), "{error}");
    assert!(error.ends_with("; review it and pin it with `planrun mcp pin docs`"), "{error}");
    assert_eq!(history[0]["failure_class"], "security_denied");
    assert_eq!(call_log(&sandbox), None);
}

#[test]
fn arguments_outside_the_schema_are_refused_and_nothing_is_called() {
    let cases = [
        ("arguments = { query = \"\" }", "`arguments.query` must have at least 1 characters, has 0"),
        ("arguments = { query = \"a\", limit = 11 }", "`arguments.limit` must be at most 10, found 11"),
        ("arguments = { query = \"a\", mail_to = \"x@example.com\" }", "`arguments.mail_to` is not a property"),
        ("arguments = { limit = 1 }", "`arguments.query` is required"),
    ];
    for (arguments, expected) in cases {
        let sandbox = sandbox();
        let output = run(&sandbox, &plan(&format!("tool = \"search\"\n{arguments}")), &pinned(), "");
        assert_eq!(output.code, 1, "{arguments}: {}", output.snapshot());
        let error = sandbox.history("t")[0]["error"].as_str().expect("an error").to_string();
        assert!(error.starts_with("the arguments do not fit the input schema of tool `search`: "), "{error}");
        assert!(error.contains(expected), "{arguments}: {error}");
        assert_eq!(call_log(&sandbox), None, "{arguments}");
    }
}

#[test]
fn a_crash_a_hang_garbage_or_an_answer_too_large_ends_the_step_with_its_own_message() {
    let cases = [
        (
            "crash",
            "MCP server `docs`: the server ended (exit status: 3) before it answered; its stderr ends with: fixture: crashing as asked",
            "execution_error",
        ),
        (
            "hang",
            "MCP server `docs`: the server did not answer `tools/list` before the step's timeout",
            "execution_error",
        ),
        (
            "garbage",
            "MCP server `docs`: the server answered garbage: the server wrote something that is not JSON while planrun waited for `tools/list`",
            "invalid_tool_result",
        ),
        (
            "big",
            "MCP server `docs`: the server's answer to `tools/call` is larger than 4096 bytes",
            "invalid_tool_result",
        ),
        ("crash-on-call", "MCP server `docs`: the server ended (exit status: 4) before it answered", "execution_error"),
        ("is-error", "MCP tool `search` of server `docs` reported an error: the index is offline", "execution_error"),
    ];
    for (mode, expected, class) in cases {
        let sandbox = sandbox();
        let started = std::time::Instant::now();
        let output = run(&sandbox, &plan(SEARCH_STEP), &pinned(), mode);
        assert_eq!(output.code, 1, "{mode}: {}", output.snapshot());
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "{mode}");
        let history = sandbox.history("t");
        assert_eq!(history[0]["error"], expected, "{mode}");
        assert_eq!(history[0]["failure_class"], class, "{mode}");
        assert!(!output.stderr.contains("panicked"), "{mode}: {}", output.snapshot());
    }
}

#[test]
fn the_servers_secret_reaches_it_and_no_record_or_output() {
    let sandbox = sandbox();
    let output = run(&sandbox, &plan("tool = \"echo_env\"\narguments = { name = \"DOCS_TOKEN\" }"), &pinned(), "");
    assert_eq!(output.code, 0, "{}", output.snapshot());
    // The server read the value from its environment; planrun replaced it.
    assert_eq!(sandbox.history("t")[0]["output_text"], "[secret:TOKEN]");
    let show = sandbox.planrun().in_sandbox().args(["show", "t", "--json"]).run();
    let pin = sandbox
        .planrun()
        .in_sandbox()
        .args(["mcp", "pin", "docs", "--policies", "policies", "--json"])
        .env("PLANRUN_TEST_CANARY", CANARY)
        .run();
    assert_eq!(pin.code, 0, "{}", pin.snapshot());
    let texts = [
        ("run stdout", output.stdout.as_str()),
        ("run stderr", output.stderr.as_str()),
        ("show", show.stdout.as_str()),
        ("pin", pin.stdout.as_str()),
    ];
    assert_eq!(hits(sandbox.path(), &texts, CANARY), Vec::<(String, String)>::new());
}

#[test]
fn an_unknown_server_or_tool_is_refused_at_load_with_its_place() {
    let unknown_server = plan(SEARCH_STEP).replace("server = \"docs\"", "server = \"doc\"");
    let output = check(&unknown_server, &pinned());
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(
        output.stdout.contains(
            "error[unknown-mcp-server]: step `call` names MCP server `doc`, which policy `default` does not declare"
        ),
        "{}",
        output.stdout
    );
    assert!(output.stdout.contains("plans/test.toml:9:10"), "{}", output.stdout);
    assert!(output.stdout.contains("did you mean `docs`?"), "{}", output.stdout);

    let output = check(&plan("tool = \"serch\""), &pinned());
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(
        output
            .stdout
            .contains("error[unknown-mcp-tool]: step `call` calls tool `serch`, which MCP server `docs` does not pin"),
        "{}",
        output.stdout
    );
    assert!(output.stdout.contains("plans/test.toml:10:8"), "{}", output.stdout);
}

#[test]
fn the_loader_checks_every_key_of_a_server_and_of_a_step() {
    let digest = format!("tools = {{ search = \"{SEARCH}\" }}");
    let policies = [
        (
            policy("tools = { search = \"sha256:abc\" }"),
            "error[invalid-value]: `mcp.servers.docs.tools.search` is not a digest",
        ),
        (
            policy(&format!("{digest}\ndescriptio = \"x\"")),
            "error[unknown-key]: unknown key `descriptio` in `mcp.servers.docs`",
        ),
        (
            pinned().replace("{{ secrets.TOKEN }}", "{{ run.id }}"),
            "error[untrusted-control-field]: `mcp.servers.docs.env.DOCS_TOKEN` may hold `{{ secrets.NAME }}` only",
        ),
        (
            pinned().replace("{{ secrets.TOKEN }}", "{{ secrets.TOKN }}"),
            "error[unknown-secret]: `{{ secrets.TOKN }}` names no secret of this policy",
        ),
        (
            pinned().replace("command = [\"python3\"", "command = [\"/usr/bin/python3\""),
            "error[invalid-program]: `/usr/bin/python3` is not a bare program name",
        ),
        (
            pinned().replace("command = [\"python3\", ", "command = [\"python3\", \"-u\", "),
            "error[mcp-server-not-allowed]: MCP server `docs` runs `python3 -u",
        ),
        (
            pinned().replace("[mcp.servers.docs]", "[mcp.servers.\"do cs\"]"),
            "error[invalid-value]: `do cs` is not a valid server name",
        ),
        (
            pinned().replace("command = [\"python3\", ", "command = [\"python3\", \"{{ run.id }}\", "),
            "error[untrusted-control-field]: a server's `command` must be literal",
        ),
        (
            format!(
                "{}\nmcp.server = 1\n",
                pinned().replace("[mcp.servers.docs]", "[mcp.servers.other]\ncommand = [\"true\"]\n[mcp.servers.docs]")
            ),
            "error",
        ),
    ];
    for (policy, expected) in &policies {
        let output = check(&plan(SEARCH_STEP), policy);
        assert_eq!(output.code, 2, "{expected}: {}", output.snapshot());
        assert!(output.stdout.contains(expected), "{expected}: {}", output.stdout);
        assert!(output.stdout.contains("policies/default.toml:"), "{expected}: {}", output.stdout);
    }
    let steps = [
        ("tool = \"search\"\narguments = \"query\"", "error[wrong-type]: `arguments` must be a table, found a string"),
        ("tool = \"{{ run.id }}\"", "error[untrusted-control-field]: `tool` names a target and must be literal"),
        ("tool = \"search\"\nargs = {}", "error[unknown-key]: unknown key `args` in step `call`"),
        ("tool = \"search\"\narguments = { query = \"{{ secrets.TOKEN }}\" }", "error[secret-outside-env]"),
        ("", "error[missing-key]"),
    ];
    for (step, expected) in steps {
        let output = check(&plan(step), &pinned());
        assert_eq!(output.code, 2, "{step}: {}", output.snapshot());
        assert!(output.stdout.contains(expected), "{step}: {}", output.stdout);
        assert!(output.stdout.contains("plans/test.toml:"), "{step}: {}", output.stdout);
    }
}

#[test]
fn extends_merges_the_servers_of_both_policies() {
    let sandbox = sandbox();
    sandbox
        .write("plans/test.toml", &plan(SEARCH_STEP).replace("id = \"test\"\n", "id = \"test\"\npolicy = \"child\"\n"));
    sandbox.write("policies/default.toml", &pinned());
    sandbox.write(
        "policies/child.toml",
        "version = 1\nextends = \"default\"\n\n[mcp.servers.other]\ncommand = [\"python3\", \"x\"]\n",
    );
    let output = sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies"]).run();
    // `other` runs an argv the merged allowlist refuses; `docs` came from the parent.
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stdout.contains("error[mcp-server-not-allowed]: MCP server `other`"), "{}", output.stdout);
    assert!(!output.stdout.contains("unknown-mcp-server"), "{}", output.stdout);
    sandbox.write("policies/child.toml", "version = 1\nextends = \"default\"\n");
    let output = sandbox.test_plan().env("PLANRUN_TEST_CANARY", CANARY).run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(call_log(&sandbox).map(|log| log.lines().count()), Some(1));
}

#[test]
fn mcp_pin_shows_each_definition_and_digest_and_writes_them_keeping_the_file() {
    let sandbox = sandbox();
    let before = policy(&format!("# pinned after review\ntools = {{ search = \"{ECHO_ENV}\" }}  # old\n\n[budget.x]"))
        .replace("\n[budget.x]", "");
    sandbox.write_plan(&plan(SEARCH_STEP), &before);
    sandbox.write("workspace/notes.txt", "the server starts in the workspace\n");
    let pin = |args: &[&str]| {
        sandbox
            .planrun()
            .in_sandbox()
            .args(["mcp", "pin", "docs", "--policies", "policies"])
            .args(args)
            .env("PLANRUN_TEST_CANARY", CANARY)
            .run()
    };
    let review = pin(&[]);
    assert_eq!(review.code, 0, "{}", review.snapshot());
    snapshot_settings("mcp").bind(|| insta::assert_snapshot!("mcp_pin_review", review.snapshot()));
    // Nothing was written without `--write`.
    assert_eq!(fs::read_to_string(sandbox.path().join("policies/default.toml")).expect("policy"), before);

    let written = pin(&["--write"]);
    assert_eq!(written.code, 0, "{}", written.snapshot());
    let after = fs::read_to_string(sandbox.path().join("policies/default.toml")).expect("policy");
    let line = format!("tools = {{ echo_env = \"{ECHO_ENV}\", search = \"{SEARCH}\" }}");
    assert_eq!(after, before.replace(&format!("tools = {{ search = \"{ECHO_ENV}\" }}  # old"), &line));
    let output = sandbox.test_plan().env("PLANRUN_TEST_CANARY", CANARY).run();
    assert_eq!(output.code, 0, "{}", output.snapshot());

    let unknown = sandbox.planrun().in_sandbox().args(["mcp", "pin", "doc", "--policies", "policies"]).run();
    assert_eq!(unknown.code, 2, "{}", unknown.snapshot());
    assert!(
        unknown.stderr.contains("policy `default` declares no MCP server `doc` (known: `docs`)"),
        "{}",
        unknown.stderr
    );
    sandbox.write("workspace/mcp/mcp-mode", "crash");
    let crashed = pin(&[]);
    assert_eq!(crashed.code, 2, "{}", crashed.snapshot());
    assert!(crashed.stderr.contains("the server ended (exit status: 3) before it answered"), "{}", crashed.stderr);
}

/// A run killed (`SIGKILL`) while its `mcp` call is in flight: an `mcp`
/// step keeps no receipt (docs/effects-mcp.md), so `resume` calls the tool
/// again; the step's one record is the second call's, untrusted, its
/// secret replaced, and the canary is in no file of the run.
#[test]
fn a_call_in_flight_when_the_run_is_killed_is_made_again_by_resume() {
    use std::time::{Duration, Instant};
    let sandbox = sandbox();
    sandbox.write_plan(&plan("tool = \"echo_env\"\narguments = { name = \"DOCS_TOKEN\" }"), &pinned());
    sandbox.write("workspace/mcp/mcp-mode", "slow-first-call");
    let mut holder = sandbox.test_plan().env("PLANRUN_TEST_CANARY", CANARY).spawn();
    let started = Instant::now();
    while call_log(&sandbox).is_none() {
        assert!(started.elapsed() < Duration::from_secs(20), "the call never reached the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    assert!(sandbox.history("t").iter().all(|record| record["step_id"] != "call"), "a record before the kill");

    let output = sandbox
        .planrun()
        .in_sandbox()
        .args(["resume", "t", "--policies", "policies"])
        .env("PLANRUN_TEST_CANARY", CANARY)
        .run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let calls = call_log(&sandbox).expect("the call log");
    assert_eq!(calls.lines().count(), 2, "called again: {calls}");
    let history = sandbox.history("t");
    let records: Vec<_> = history.iter().filter(|record| record["step_id"] == "call").collect();
    assert_eq!(records.len(), 1, "{history:?}");
    assert_eq!(records[0]["status"], "done");
    assert_eq!(records[0]["output_text"], "[secret:TOKEN]");
    assert_eq!(records[0]["output_json"]["untrusted_fields"], json!(["content"]));
    let texts = [("resume stdout", output.stdout.as_str()), ("resume stderr", output.stderr.as_str())];
    assert_eq!(hits(sandbox.path(), &texts, CANARY), Vec::<(String, String)>::new());
}
