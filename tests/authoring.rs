//! Authoring commands: `list`, `policy check` and `schema`.

use crate::common::{Sandbox, snapshot_settings};

#[test]
fn list_shows_every_plan() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun(&["list"]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    snapshot_settings("cli").bind(|| insta::assert_snapshot!("list", output.snapshot()));

    let output = sandbox.planrun(&["list", "--json"]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let plans: Vec<serde_json::Value> = serde_json::from_str(&output.stdout).expect("JSON");
    let fallback = plans.iter().find(|plan| plan["id"] == "fallback").expect("fallback listed");
    assert_eq!(fallback["default"], true);
    assert_eq!(fallback["path"], "plans/fallback.toml");
    assert_eq!(plans.iter().filter(|plan| plan["default"] == true).count(), 1);
}

#[test]
fn list_with_invalid_plans_is_exit_2() {
    let output = Sandbox::new().planrun(&["list", "--plans", "tests/fixtures/broken"]);
    assert_eq!(output.code, 2);
    assert!(output.stderr.contains("error["), "{}", output.stderr);
}

/// `program` and `program_canonical` depend on where the machine keeps its
/// programs; the snapshot says only whether one was found.
fn policy_check(sandbox: &Sandbox, argv: &[&str]) -> String {
    let mut output = sandbox.planrun_trailing(&["policy", "check"], argv);
    if let Ok(mut value) = serde_json::from_str::<serde_json::Value>(&output.stdout) {
        for key in ["program", "program_canonical"] {
            if value[key].is_string() {
                value[key] = "[PROGRAM]".into();
            }
        }
        output.stdout = format!("{}\n", serde_json::to_string_pretty(&value).expect("JSON"));
    }
    output.snapshot()
}

#[test]
fn policy_check_decides_and_names_the_rule() {
    let sandbox = Sandbox::new();
    let settings = snapshot_settings("cli");
    for (name, argv, code) in [
        ("allowed", vec!["ls", "-la"], 0),
        ("blocked", vec!["rm", "-rf", "notes"], 1),
        ("default_deny", vec!["git", "push"], 1),
        ("not_bare", vec!["/bin/rm", "x"], 1),
        ("path_outside", vec!["cat", "../secret"], 1),
    ] {
        let snapshot = policy_check(&sandbox, &argv);
        assert!(snapshot.starts_with(&format!("exit_code: {code}\n")), "{name}: {snapshot}");
        settings.bind(|| insta::assert_snapshot!(format!("policy_check_{name}"), snapshot));
    }
    assert!(!sandbox.workspace().exists(), "policy check creates nothing");
}

#[test]
fn policy_check_bad_input_is_exit_2() {
    let sandbox = Sandbox::new();
    for args in [
        vec!["policy", "check"],
        vec!["policy", "check", "--policy", "nope"],
        vec!["policy", "check", "--policy", "../default"],
        vec!["policy", "check", "--policies", "tests/fixtures/broken", "--policy", "policy_errors"],
    ] {
        let trailing: &[&str] = if args.len() > 2 { &["ls"] } else { &[] };
        let output = sandbox.planrun_trailing(&args, trailing);
        assert_eq!(output.code, 2, "{args:?}: {}", output.snapshot());
        assert!(!output.stderr.is_empty());
    }
}
