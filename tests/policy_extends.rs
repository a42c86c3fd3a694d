//! `extends`: a policy built on another of the same folder. Blocked
//! programs and denied paths add up and win, rules add up, budgets take the
//! stricter value; a cycle, a missing parent and a rule id both files give
//! are diagnostics with `file:line:column`; `policy check` and `check` say
//! where each rule came from; an edited parent is a changed policy for `approve`.

use serde_json::Value;

use crate::common::Sandbox;

/// The parent: `touch` is blocked, `pwd` allowed, at most 2 steps.
const PARENT: &str = r#"version = 1
[shell]
blocked = ["touch"]
search_path = ["/usr/bin", "/bin"]
[shell.env]
PATH = "/usr/bin:/bin"
LANG = "C.UTF-8"
[[shell.allow]]
id = "pwd"
program = "pwd"
[budget]
max_steps = 2
"#;

/// The child: allows `echo` and (in vain) `touch canary`; asks for more steps.
const CHILD: &str = r#"version = 1
extends = "parent"
[[shell.allow]]
id = "echo"
program = "echo"
prefix = true
[[shell.allow]]
id = "touch-canary"
program = "touch"
args = [["canary"]]
[budget]
max_steps = 10
"#;

fn sandbox_with(child: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("policies/parent.toml", PARENT);
    sandbox.write("policies/child.toml", child);
    sandbox.write("policies/default.toml", PARENT);
    std::fs::create_dir_all(sandbox.workspace()).expect("workspace");
    sandbox
}

fn plan(commands: &[&str]) -> String {
    let mut plan = String::from("version = 1\nid = \"test\"\npolicy = \"child\"\n");
    for (index, command) in commands.iter().enumerate() {
        plan.push_str(&format!("\n[[steps]]\nid = \"s{index}\"\nkind = \"shell\"\ncommand = {command}\n"));
    }
    plan
}

fn run(sandbox: &Sandbox, plan: &str) -> crate::common::Output {
    sandbox.write("plans/test.toml", plan);
    sandbox.test_plan().run()
}

#[test]
fn a_child_rule_for_a_program_the_parent_blocks_stays_forbidden() {
    let sandbox = sandbox_with(CHILD);
    let output = run(&sandbox, &plan(&[r#"["touch", "canary"]"#]));
    assert_ne!(output.code, 0, "{}", output.snapshot());
    assert!(!sandbox.workspace().join("canary").exists(), "the blocked program ran");
    let output = sandbox
        .planrun()
        .in_sandbox()
        .args(["policy", "check", "--policies", "policies", "--policy", "child"])
        .trailing(["touch", "canary"])
        .run();
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let verdict: Value = serde_json::from_str(&output.stdout).expect("JSON");
    assert_eq!(verdict["rule"], "shell.blocked");
    assert!(!sandbox.workspace().join("canary").exists());
}

#[test]
fn rules_add_up_and_a_run_uses_both() {
    let sandbox = sandbox_with(CHILD);
    let output = run(&sandbox, &plan(&[r#"["pwd"]"#, r#"["echo", "hi"]"#]));
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let rules: Vec<Value> = sandbox.history("t").iter().map(|entry| entry["details"]["rule"].clone()).collect();
    assert_eq!(rules, [Value::from("pwd"), Value::from("echo")], "the parent's rule, then the child's");
}

#[test]
fn budgets_take_the_stricter_value() {
    // The child asks for 10 steps; the parent's 2 stand.
    let sandbox = sandbox_with(CHILD);
    let output = run(&sandbox, &plan(&[r#"["pwd"]"#, r#"["pwd"]"#, r#"["pwd"]"#, r#"["pwd"]"#]));
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert_eq!(sandbox.state("t")["stop_reason"], "budget_exhausted");
    assert_eq!(sandbox.history("t").len(), 2);
    // A child asking for fewer gets fewer.
    let sandbox = sandbox_with(&CHILD.replace("max_steps = 10", "max_steps = 1"));
    let output = run(&sandbox, &plan(&[r#"["pwd"]"#, r#"["pwd"]"#, r#"["pwd"]"#]));
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert_eq!(sandbox.history("t").len(), 1);
}

fn check(sandbox: &Sandbox) -> crate::common::Output {
    sandbox.planrun().in_sandbox().args(["check", "--plans", "plans", "--policies", "policies", "policies"]).run()
}

#[test]
fn a_cycle_is_refused_with_the_chain() {
    let sandbox = sandbox_with(CHILD);
    sandbox.write("policies/parent.toml", &PARENT.replace("version = 1\n", "version = 1\nextends = \"child\"\n"));
    let output = check(&sandbox);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stdout.contains("error[policy-extends-cycle]"), "{}", output.stdout);
    assert!(output.stdout.contains("child → parent → child"), "{}", output.stdout);
    assert!(output.stdout.contains("policies/parent.toml:2:11"), "{}", output.stdout);
    // A run under it never starts.
    let output = run(&sandbox, &plan(&[r#"["pwd"]"#]));
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(!sandbox.workspace().join("runs").join("t").exists());
}

#[test]
fn a_missing_parent_is_named_with_a_suggestion() {
    let sandbox = sandbox_with(&CHILD.replace("\"parent\"", "\"parnet\""));
    let output = check(&sandbox);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stdout.contains("error[unknown-parent-policy]: no policy `parnet` to extend"), "{}", output.stdout);
    assert!(output.stdout.contains("policies/child.toml:2:11"), "{}", output.stdout);
    assert!(output.stdout.contains("did you mean `parent`?"), "{}", output.stdout);
}

#[test]
fn a_rule_id_both_files_give_names_both_files() {
    let sandbox = sandbox_with(&format!("{CHILD}[[shell.allow]]\nid = \"pwd\"\nprogram = \"pwd\"\n"));
    let output = check(&sandbox);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stdout.contains("error[duplicate-rule-id]"), "{}", output.stdout);
    assert!(output.stdout.contains("policies/parent.toml:8"), "{}", output.stdout);
    assert!(output.stdout.contains("policies/child.toml:14:6"), "{}", output.stdout);
    assert!(output.stdout.contains("shell rule id `pwd` is given in"), "{}", output.stdout);

    // The same for `[[http.allow]]` rules.
    let parent = format!("{PARENT}[http]\n[[http.allow]]\nid = \"api\"\nhost = \"api.example.com\"\n");
    let sandbox = sandbox_with(&format!("{CHILD}[http]\n[[http.allow]]\nid = \"api\"\nhost = \"other.example.com\"\n"));
    sandbox.write("policies/parent.toml", &parent);
    let output = check(&sandbox);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stdout.contains("http rule id `api` is given in `policies/parent.toml:"), "{}", output.stdout);
    assert!(output.stdout.contains("policies/child.toml:15:6"), "{}", output.stdout);
}

#[test]
fn policy_check_and_check_show_where_each_rule_came_from() {
    let sandbox = sandbox_with(CHILD);
    for (argv, origin) in [(["pwd"].as_slice(), "policies/parent.toml:8"), (&["echo", "x"], "policies/child.toml:3")] {
        let output = sandbox
            .planrun()
            .in_sandbox()
            .args(["policy", "check", "--policies", "policies", "--policy", "child"])
            .trailing(argv)
            .run();
        assert_eq!(output.code, 0, "{}", output.snapshot());
        let verdict: Value = serde_json::from_str(&output.stdout).expect("JSON");
        assert_eq!(verdict["origin"], origin, "{verdict}");
        assert_eq!(verdict["extends"], serde_json::json!(["policies/parent.toml"]), "{verdict}");
    }
    // A policy that extends none answers as before.
    let output =
        sandbox.planrun().in_sandbox().args(["policy", "check", "--policies", "policies"]).trailing(["pwd"]).run();
    let verdict: Value = serde_json::from_str(&output.stdout).expect("JSON");
    assert!(verdict.get("extends").is_none() && verdict.get("origin").is_none(), "{verdict}");
    let output = check(&sandbox);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert!(
        output.stdout.contains("note[policy-extends]: policy `child` extends `policies/parent.toml`"),
        "{}",
        output.stdout
    );
    assert!(
        output.stdout.contains(
            "rule pwd (policies/parent.toml:8), rule echo (policies/child.toml:3), rule touch-canary (policies/child.toml:7)"
        ),
        "{}",
        output.stdout
    );
}

#[test]
fn an_edited_parent_is_a_changed_policy_for_resume() {
    let sandbox = sandbox_with(CHILD);
    let paused = run(
        &sandbox,
        &plan(&[r#"["pwd"]"#]).replace("command = [\"pwd\"]", "approval = \"required\"\ncommand = [\"pwd\"]"),
    );
    assert_eq!(paused.code, 3, "{}", paused.snapshot());
    let fingerprint = sandbox.state("t")["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    // Only the parent changes; the child's file is the same.
    sandbox.write("policies/parent.toml", &PARENT.replace("max_steps = 2", "max_steps = 3"));
    let approve = sandbox.planrun().in_sandbox().args(["approve", "t", "--fingerprint", &fingerprint]).run();
    assert_eq!(approve.code, 1, "{}", approve.snapshot());
    assert!(
        approve.stderr.contains("(or a policy it extends: policies/parent.toml) changed since run `t` started"),
        "{}",
        approve.stderr
    );
    assert_eq!(sandbox.history("t").len(), 0, "nothing ran");
}
