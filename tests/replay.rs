//! `planrun replay`: a recorded run decided again under today's plans and
//! policies, executing nothing. Planned steps (denied, newly needing
//! approval, rendered differently, removed and new steps), agent turns
//! against the scripted model's recorded answers (the model is never
//! asked), the goal's route, `--json`, a run exported as files, and bad
//! input.

use serde_json::{Value, json};

use crate::common::fake_model::{FakeModel, action, finish, profile, start};
use crate::common::{Output, Sandbox, TEST_POLICY};

/// A shell step whose output a `write_file` step writes, then `finish`.
const PLAN: &str = r#"version = 1
id = "test"

[[steps]]
id = "greet"
kind = "shell"
command = ["echo", "hello"]

[[steps]]
id = "keep"
kind = "write_file"
path = "out/greeting.txt"
content = "{{ last.output_text }}"

[[steps]]
id = "done"
kind = "finish"
"#;

/// A rule that matches `echo hello` exactly, deciding `decision`: the
/// strictest matching rule decides, so it wins over the `echo` prefix rule.
fn echo_hello_rule(decision: &str) -> String {
    format!(
        "{TEST_POLICY}\n[[shell.allow]]\nid = \"echo-hello\"\nprogram = \"echo\"\nargs = [[\"hello\"]]\ndecision = \"{decision}\"\n"
    )
}

/// A sandbox whose plan ran to `done` as run `t`.
fn recorded() -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace().join("out")).expect("out/");
    sandbox.write_plan(PLAN, TEST_POLICY);
    sandbox.test_plan().expect_code(0).run();
    sandbox
}

/// `planrun replay t` over the sandbox's plans and policies.
fn replay(sandbox: &Sandbox, code: i32, extra: &[&str]) -> Output {
    sandbox
        .planrun()
        .in_sandbox()
        .args(["replay", "t", "--plans", "plans", "--policies", "policies"])
        .args(extra)
        .expect_code(code)
        .run()
}

fn replay_json(sandbox: &Sandbox, code: i32) -> Value {
    let out = replay(sandbox, code, &["--json"]);
    serde_json::from_str(&out.stdout).expect("replay --json prints JSON")
}

/// The report line of step `id` (` turn N` included for a turn).
fn line<'o>(out: &'o Output, id: &str) -> &'o str {
    out.stdout.lines().find(|line| line.contains(&format!(" {id} ("))).unwrap_or_else(|| panic!("{}", out.stdout))
}

#[test]
fn an_unchanged_run_replays_identical() {
    let sandbox = recorded();
    let out = replay(&sandbox, 0, &[]);
    for id in ["greet", "keep", "done"] {
        assert!(line(&out, id).starts_with("= "), "{}", out.stdout);
    }
    assert!(out.stdout.contains("unchanged: 0 of 3 steps and turns would differ"), "{}", out.stdout);
}

#[test]
fn a_policy_edit_that_denies_a_recorded_shell_step_names_the_step_and_the_rule() {
    let sandbox = recorded();
    sandbox.write("policies/default.toml", &echo_hello_rule("forbidden"));
    let out = replay(&sandbox, 1, &[]);
    let greet = line(&out, "greet");
    assert!(greet.starts_with("≠ greet (shell): allow → deny (rule `echo-hello`)"), "{greet}");
    assert!(greet.contains("now denied by rule `echo-hello`"), "{greet}");
    assert!(line(&out, "keep").starts_with("= "), "{}", out.stdout);
}

#[test]
fn a_rule_that_now_says_prompt_or_a_step_that_requires_approval_newly_needs_approval() {
    let sandbox = recorded();
    sandbox.write("policies/default.toml", &echo_hello_rule("prompt"));
    let out = replay(&sandbox, 1, &[]);
    assert!(line(&out, "greet").contains("now needs approval (required by policy)"), "{}", out.stdout);
    sandbox.write("policies/default.toml", TEST_POLICY);
    sandbox.write(
        "plans/test.toml",
        &PLAN.replace("path = \"out/greeting.txt\"", "path = \"out/greeting.txt\"\napproval = \"required\""),
    );
    let out = replay(&sandbox, 1, &[]);
    assert!(line(&out, "keep").contains("now needs approval (required by step)"), "{}", out.stdout);
    assert!(line(&out, "greet").starts_with("= "), "{}", out.stdout);
}

#[test]
fn a_changed_template_renders_differently_and_removed_and_new_steps_are_named() {
    let sandbox = recorded();
    let changed = PLAN
        .replace("content = \"{{ last.output_text }}\"", "content = \"said: {{ last.output_text }}\"")
        .replace("id = \"done\"", "id = \"finished\"");
    sandbox.write("plans/test.toml", &changed);
    let report = replay_json(&sandbox, 1);
    let steps = report["steps"].as_array().expect("steps");
    let keep = steps.iter().find(|step| step["step_id"] == "keep").expect("keep");
    let rendered = &keep["differences"][0];
    assert_eq!(rendered["kind"], "rendered_differently", "{keep}");
    assert_eq!(rendered["fields"][0], json!({"field": "content", "old": "hello\n", "new": "said: hello\n"}));
    let done = steps.iter().find(|step| step["step_id"] == "done").expect("done");
    assert_eq!(done["differences"], json!([{"kind": "step_removed"}]));
    assert_eq!(done["new"]["decision"], "absent");
    let finished = steps.iter().find(|step| step["step_id"] == "finished").expect("finished");
    assert_eq!(finished["differences"], json!([{"kind": "new_step"}]));
    assert_eq!(report["changed"], 3);
    let out = replay(&sandbox, 1, &[]);
    assert!(
        line(&out, "keep").contains(r#"rendered differently: content "hello\n" → "said: hello\n""#),
        "{}",
        out.stdout
    );
}

#[test]
fn replay_executes_nothing() {
    // A canary: the recorded run's program and write, their files removed
    // since; a replay that ran either would bring one back.
    let plan = PLAN.replace(
        "[[steps]]\nid = \"done\"",
        "[[steps]]\nid = \"touch\"\nkind = \"shell\"\ncommand = [\"touch\", \"out/canary.txt\"]\n\n[[steps]]\nid = \"done\"",
    );
    let policy = format!("{TEST_POLICY}\n[[shell.allow]]\nprogram = \"touch\"\nargs = [[{{ slot = \"path\" }}]]\n");
    let sandbox = Sandbox::new();
    let out_dir = sandbox.workspace().join("out");
    std::fs::create_dir_all(&out_dir).expect("out/");
    sandbox.write_plan(&plan, &policy);
    sandbox.test_plan().expect_code(0).run();
    for file in ["canary.txt", "greeting.txt"] {
        std::fs::remove_file(out_dir.join(file)).expect("the run made it");
    }
    let before = sandbox.tree();
    replay(&sandbox, 0, &[]);
    replay(&sandbox, 0, &["--json"]);
    assert!(!out_dir.join("canary.txt").exists(), "replay started no program");
    assert!(!out_dir.join("greeting.txt").exists(), "replay wrote no file");
    assert_eq!(sandbox.tree(), before, "replay changed nothing in the sandbox (records included)");
}

#[test]
fn the_json_report_has_its_documented_shape() {
    let sandbox = recorded();
    sandbox.write("policies/default.toml", &echo_hello_rule("forbidden"));
    let report = replay_json(&sandbox, 1);
    assert_eq!(report["run_id"], "t");
    assert_eq!(report["plan"], "test");
    assert_eq!(report["policy"], "default");
    assert_eq!(report["goal"], Value::Null);
    assert_eq!(report["route"], Value::Null);
    assert_eq!(report["changed"], 1);
    let greet = &report["steps"][0];
    assert_eq!(greet["step_id"], "greet");
    assert_eq!(greet["kind"], "shell");
    assert!(greet.get("turn").is_none(), "a planned step has no turn");
    assert_eq!(greet["old"], json!({"decision": "allow", "rule": "shell.allow[1]"}));
    assert_eq!(greet["new"]["decision"], "deny");
    assert_eq!(greet["new"]["rule"], "echo-hello");
    assert_eq!(greet["differences"][0]["kind"], "denied");
    assert_eq!(greet["differences"][0]["rule"], "echo-hello");
    assert!(greet["differences"][0]["reason"].is_string());
}

#[test]
fn a_goal_that_now_routes_to_another_plan_differs() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace().join("out")).expect("out/");
    sandbox.write_plan(
        &PLAN.replace("id = \"test\"", "id = \"test\"\nkeywords = [\"greet me\"]\ndefault = true"),
        TEST_POLICY,
    );
    let other = "version = 1\nid = \"other\"\nkeywords = [\"greet me please\"]\n\n[[steps]]\nid = \"done\"\nkind = \"finish\"\n";
    sandbox
        .planrun()
        .in_sandbox()
        .args(["--goal", "greet me please", "--run-id", "t"])
        .args(["--plans", "plans", "--policies", "policies"])
        .expect_code(0)
        .run();
    let out = replay(&sandbox, 0, &[]);
    assert!(out.stdout.contains("goal \"greet me please\" still routes to `test`"), "{}", out.stdout);
    sandbox.write("plans/other.toml", other);
    let out = replay(&sandbox, 1, &[]);
    assert!(out.stdout.contains("now routes to `other`, not `test`"), "{}", out.stdout);
    assert!(line(&out, "greet").starts_with("= "), "the steps are replayed against the plan the run ran");
}

/// An agent plan: a shell rule and `read_file`, verified by the file the
/// shell rule makes.
const AGENT_PLAN: &str = r#"version = 1
id = "test"

[[steps]]
id = "triage"
kind = "agent"
goal = "Make out/made.txt."
tools = ["touch-file", "read_file"]
model = "fake"
max_turns = 6
max_refusals = 3

[[verify]]
kind = "file"
path = "out/made.txt"
"#;

fn agent_policy(model: &FakeModel, touch_decision: &str) -> String {
    format!(
        "{TEST_POLICY}\n[[shell.allow]]\nid = \"touch-file\"\nprogram = \"touch\"\nargs = [[{{ slot = \"path\" }}]]\ndecision = \"{touch_decision}\"\n\n{}",
        profile(model)
    )
}

#[test]
fn an_agent_run_replays_from_its_recorded_answers_without_asking_the_model() {
    let model = start(vec![
        action("read_file", json!({"path": "../secret.txt"})),
        action("touch-file", json!({"args": ["out/made.txt"]})),
        finish("made it"),
    ]);
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace().join("out")).expect("out/");
    sandbox.write_plan(AGENT_PLAN, &agent_policy(&model, "allow"));
    sandbox.test_plan().expect_code(0).run();
    assert_eq!(model.requests(), 3);
    std::fs::remove_file(sandbox.workspace().join("out/made.txt")).expect("the run made it");

    let out = replay(&sandbox, 0, &[]);
    assert_eq!(model.requests(), 3, "replay asks the model nothing");
    assert!(
        line(&out, "triage turn 1").starts_with("= triage turn 1 (agent): deny (rule `files.parent`)"),
        "{}",
        out.stdout
    );
    assert!(line(&out, "triage turn 2").starts_with("= triage turn 2 (agent): allow → allow"), "{}", out.stdout);
    assert!(line(&out, "triage turn 3").starts_with("= triage turn 3 (agent): finish → finish"), "{}", out.stdout);

    // The policy now forbids the recorded action of turn 2.
    sandbox.write("policies/default.toml", &agent_policy(&model, "forbidden"));
    let out = replay(&sandbox, 1, &[]);
    assert_eq!(model.requests(), 3, "replay asks the model nothing");
    let turn = line(&out, "triage turn 2");
    assert!(turn.starts_with("≠ triage turn 2 (agent): allow → deny (rule `touch-file`)"), "{turn}");
    assert!(turn.contains("now denied by rule `touch-file`"), "{turn}");
    assert!(line(&out, "triage turn 1").starts_with("= "), "{}", out.stdout);
    assert!(!sandbox.workspace().join("out/made.txt").exists(), "replay ran no action");

    // A rule that says `prompt`: the turn would wait for a person.
    sandbox.write("policies/default.toml", &agent_policy(&model, "prompt"));
    let report = replay_json(&sandbox, 1);
    let turn = &report["steps"][1];
    assert_eq!(turn["turn"], 2);
    assert_eq!(turn["new"], json!({"decision": "approval", "required_by": "policy", "rule": "touch-file"}));
    assert_eq!(turn["differences"], json!([{"kind": "newly_needs_approval", "required_by": "policy"}]));
}

#[test]
fn a_run_copied_as_files_into_another_workspace_replays() {
    // What `planrun export` writes for a database run: `DIR/runs/<id>/`.
    let sandbox = recorded();
    let exported = Sandbox::new();
    std::fs::create_dir_all(exported.workspace().join("runs")).expect("runs/");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(sandbox.workspace().join("runs/t"))
        .arg(exported.workspace().join("runs/t"))
        .status()
        .expect("cp");
    assert!(status.success());
    sandbox.write("policies/default.toml", &echo_hello_rule("forbidden"));
    let out = exported
        .planrun()
        .current_dir(sandbox.path())
        .args(["replay", "t", "--plans", "plans", "--policies", "policies"])
        .expect_code(1)
        .run();
    assert!(line(&out, "greet").contains("now denied by rule `echo-hello`"), "{}", out.stdout);
}

#[test]
fn bad_input_exits_2_and_says_which() {
    let sandbox = recorded();
    let out = sandbox
        .planrun()
        .in_sandbox()
        .args(["replay", "nope", "--plans", "plans", "--policies", "policies"])
        .expect_code(2)
        .run();
    assert!(out.stderr.contains("nope"), "{}", out.stderr);
    // Invalid policies: nothing is replayed.
    sandbox.write("policies/default.toml", "version = 1\n[shell\n");
    let out = replay(&sandbox, 2, &[]);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(out.stderr.contains("default.toml"), "{}", out.stderr);
    sandbox.write("policies/default.toml", TEST_POLICY);
    // A plan the given plans lack.
    sandbox.write("plans/test.toml", &PLAN.replace("id = \"test\"", "id = \"renamed\""));
    let out = replay(&sandbox, 2, &[]);
    assert!(out.stderr.contains("no plan `test`"), "{}", out.stderr);
    sandbox.write("plans/test.toml", PLAN);
    // A record that fails verification.
    let history = sandbox.workspace().join("runs/t/history.jsonl");
    let text = std::fs::read_to_string(&history).expect("history");
    std::fs::write(&history, text.replace("hello", "HELLO")).expect("tamper");
    let out = replay(&sandbox, 2, &[]);
    assert!(out.stderr.contains("failed verification") || out.stderr.contains("tamper"), "{}", out.stderr);
}

#[cfg(feature = "postgres")]
#[test]
fn pg_replay_reads_a_database_run_directly_and_as_exported_files() {
    let sandbox = Sandbox::new();
    let Some(schema) = crate::pg_store::Schema::migrated("replay", &sandbox) else { return };
    std::fs::create_dir_all(sandbox.workspace().join("out")).expect("out/");
    sandbox.write_plan(PLAN, TEST_POLICY);
    let store = ["--store", schema.url.as_str()];
    sandbox.test_plan().args(store).expect_code(0).run();
    assert!(!sandbox.workspace().join("runs").exists(), "the database holds the run");
    replay(&sandbox, 0, &store);
    let exported = Sandbox::new();
    let out = exported.workspace();
    sandbox.planrun().args(["export", "t", "--store", &schema.url, "--out"]).arg(&out).expect_code(0).run();
    sandbox.write("policies/default.toml", &echo_hello_rule("forbidden"));
    let direct = replay(&sandbox, 1, &store);
    assert!(line(&direct, "greet").contains("now denied by rule `echo-hello`"), "{}", direct.stdout);
    let from_files = exported
        .planrun()
        .current_dir(sandbox.path())
        .args(["replay", "t", "--plans", "plans", "--policies", "policies"])
        .expect_code(1)
        .run();
    assert_eq!(from_files.stdout, direct.stdout, "the export replays as the database run does");
}
