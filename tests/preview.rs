//! `planrun plan`: previews of documented scenarios, and proof that a
//! preview executes and creates nothing.

use crate::common::{Sandbox, snapshot_settings};

#[test]
fn previews_of_documented_plans() {
    let sandbox = Sandbox::new();
    let settings = snapshot_settings("preview");
    for name in [
        "flow_pwd",
        "deny_bash",
        "flow_bad_template",
        "retry_execution",
        "inspect_project",
        "traversal",
        "ticket_close",
        "ticket_agent",
        "inspect_agent",
    ] {
        let output = sandbox.planrun().args(["plan", "--plan", &format!("plans/{name}.toml")]).run();
        assert_eq!(output.code, 0, "{name}: {}", output.snapshot());
        settings.bind(|| insta::assert_snapshot!(format!("plan_{name}"), output.snapshot()));
    }
    assert!(!sandbox.workspace().exists(), "a preview creates no workspace");
}

#[test]
fn preview_of_a_goal_shows_the_route() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["plan", "--goal", "please TEST FLOW LS TO FILE now"]).expect_code(0).run();
    assert!(output.stdout.contains("route: goal"), "{}", output.stdout);
    snapshot_settings("preview").bind(|| insta::assert_snapshot!("plan_goal_flow_ls", output.snapshot()));
}

#[test]
fn preview_json_marks_runtime_references_and_decisions() {
    let output =
        Sandbox::new().planrun().args(["plan", "--plan", "plans/flow_pwd.toml", "--json"]).expect_code(0).run();
    let value: serde_json::Value = serde_json::from_str(&output.stdout).expect("JSON");
    let steps = value["steps"].as_array().expect("steps");
    assert_eq!(steps[0]["verdict"]["decision"], "allow");
    assert_eq!(steps[0]["verdict"]["rule"], "pwd");
    assert_eq!(steps[1]["payload"][1]["shown"], "⟨last.output_text⟩");
    assert_eq!(steps[1]["payload"][1]["runtime"][0], "last.output_text");
    assert_eq!(steps[0]["max_attempts"]["execution_error"], 2);
    assert_eq!(steps[0]["max_attempts"]["security_denied"], 1);
    assert_eq!(steps[0]["timeout_secs"], 30);
    snapshot_settings("preview").bind(|| insta::assert_snapshot!("plan_flow_pwd_json", output.snapshot()));
}

#[test]
fn effective_values_follow_the_policy_caps_and_runtime_arguments_are_decided_at_run_time() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "policies/default.toml",
        "version = 1\n[[shell.allow]]\nprogram = \"echo\"\nprefix = true\n[retry]\nexecution_error = 3\ncap = 2\n[budget]\nstep_timeout_secs = 10\n",
    );
    sandbox.write(
        "plans/p.toml",
        r#"version = 1
id = "p"
keywords = ["p"]

[[steps]]
id = "a"
kind = "shell"
command = ["echo", "hi"]
retry = 5
timeout_secs = 99

[[steps]]
id = "b"
kind = "shell"
command = ["echo", "{{ steps.a.output_text }}"]
timeout_secs = 3

[[steps]]
id = "c"
kind = "shell"
command = ["cat", "{{ last.output_text }}"]

[[steps]]
id = "d"
kind = "write_file"
path = "out/{{ run.id }}.txt"
content = "{{ last.output_text }}"

[[steps]]
id = "e"
kind = "finish"

[[steps]]
id = "f"
kind = "finish"
"#,
    );
    let output = sandbox.planrun().in_sandbox().args(["plan", "--plan", "plans/p.toml", "--json"]).expect_code(0).run();
    let value: serde_json::Value = serde_json::from_str(&output.stdout).expect("JSON");
    let step = |index: usize| &value["steps"][index];
    assert_eq!(step(0)["max_attempts"]["execution_error"], 2, "the cap holds whatever the step asks");
    assert_eq!(step(0)["timeout_secs"], 10, "the budget bounds the step's timeout");
    assert_eq!(step(1)["timeout_secs"], 3);
    assert_eq!(step(1)["verdict"]["decision"], "runtime");
    assert_eq!(step(2)["verdict"]["decision"], "forbidden", "no rule names `cat`");
    assert_eq!(step(2)["verdict"]["rule"], "shell.default-deny");
    assert_eq!(step(3)["verdict"]["decision"], "runtime");
    assert_eq!(step(3)["payload"][0]["shown"], "out/⟨run.id⟩.txt");
    assert_eq!(step(4)["reachable"], true);
    assert_eq!(step(5)["reachable"], false);
    assert_eq!(sandbox.tree(), ["plans", "plans/p.toml", "policies", "policies/default.toml"]);
}

#[test]
fn a_preview_of_a_write_plan_executes_and_creates_nothing() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.workspace()).expect("workspace");
    for args in [
        vec!["plan", "--plan", "plans/create_hello.toml"],
        vec!["plan", "--goal", "create file hello.txt with text hello world"],
        vec!["plan", "--plan", "plans/deny_bash.toml", "--json"],
    ] {
        sandbox.planrun().args(&args).expect_code(0).run();
    }
    assert_eq!(sandbox.tree(), ["workspace"], "no hello.txt, no runs/");
}

#[test]
fn bad_input_to_plan_is_exit_2() {
    let sandbox = Sandbox::new();
    for args in [
        vec!["plan"],
        vec!["plan", "--plan", "plans/missing.toml"],
        vec!["plan", "--plan", "tests/fixtures/broken/unknown_key.toml"],
        vec!["plan", "--plan", "plans/flow_pwd.toml", "--goal", "x"],
        vec!["plan", "--goal", "x", "--plans", "tests/fixtures/broken/route_overlap"],
    ] {
        let output = sandbox.planrun().args(&args).run();
        assert_eq!(output.code, 2, "{args:?}: {}", output.snapshot());
        assert!(!output.stderr.is_empty(), "{args:?}: says why");
    }
    assert!(!sandbox.workspace().exists());
}
