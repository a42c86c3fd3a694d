//! Authoring commands: `list`, `policy check` and `schema`.

use crate::common::{Sandbox, snapshot_settings};

#[test]
fn list_shows_every_plan() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["list"]).expect_code(0).run();
    snapshot_settings("cli").bind(|| insta::assert_snapshot!("list", output.snapshot()));

    let output = sandbox.planrun().args(["list", "--json"]).expect_code(0).run();
    let plans: Vec<serde_json::Value> = serde_json::from_str(&output.stdout).expect("JSON");
    let fallback = plans.iter().find(|plan| plan["id"] == "fallback").expect("fallback listed");
    assert_eq!(fallback["default"], true);
    assert_eq!(fallback["path"], "plans/fallback.toml");
    assert_eq!(plans.iter().filter(|plan| plan["default"] == true).count(), 1);
}

#[test]
fn list_with_invalid_plans_is_exit_2() {
    let output = Sandbox::new().planrun().args(["list", "--plans", "tests/fixtures/broken"]).run();
    assert_eq!(output.code, 2);
    assert!(output.stderr.contains("error["), "{}", output.stderr);
}

/// `program` and `program_canonical` depend on where the machine keeps its
/// programs; the snapshot says only whether one was found.
fn policy_check(sandbox: &Sandbox, argv: &[&str]) -> String {
    let mut output = sandbox.planrun().args(["policy", "check"]).trailing(argv).run();
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
        let output = sandbox.planrun().args(&args).trailing(trailing).run();
        assert_eq!(output.code, 2, "{args:?}: {}", output.snapshot());
        assert!(!output.stderr.is_empty());
    }
}

#[test]
fn the_committed_schemas_are_what_planrun_schema_prints() {
    let sandbox = Sandbox::new();
    for kind in planrun::load::SchemaKind::ALL {
        let name = kind.name();
        let output = sandbox.planrun().args(["schema", name]).expect_code(0).run();
        let path = std::path::Path::new(crate::common::ROOT).join(format!("schemas/{name}.schema.json"));
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == output.stdout,
            "`schemas/{name}.schema.json` is stale: regenerate it with `planrun schema --out-dir schemas`"
        );
        let value: serde_json::Value = serde_json::from_str(&output.stdout).expect("JSON");
        assert_eq!(value["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
    let both = sandbox.planrun().args(["schema"]).run();
    let value: serde_json::Value = serde_json::from_str(&both.stdout).expect("JSON");
    assert_eq!(value["plan"]["title"], "planrun plan");
    assert_eq!(value["policy"]["title"], "planrun policy");
    assert_eq!(value["service"]["title"], "planrun service policy");
    assert_eq!(sandbox.planrun().args(["schema", "manifest"]).run().code, 2);
}

/// Every key the repository's plans and policy use is a property of the
/// schema at its place: the schema accepts the shipped examples.
#[test]
fn the_schemas_know_every_key_of_the_shipped_files() {
    fn walk(value: &toml::Value, schema: &serde_json::Value, at: &str) {
        let toml::Value::Table(table) = value else { return };
        for (key, child) in table {
            let mut found = schema["properties"].get(key);
            if found.is_none() {
                for case in schema["allOf"].as_array().into_iter().flatten() {
                    found = found.or_else(|| case["then"]["properties"].get(key));
                }
            }
            // A map (`shell.env`) takes any key with values of one schema.
            let found = found
                .or_else(|| schema.get("additionalProperties").filter(|value| value.is_object()))
                .unwrap_or_else(|| panic!("`{at}{key}` is not in the schema"));
            match child {
                toml::Value::Table(_) => walk(child, found, &format!("{at}{key}.")),
                toml::Value::Array(items) => {
                    for item in items {
                        walk(item, &found["items"], &format!("{at}{key}[]."));
                    }
                }
                _ => {}
            }
        }
    }
    // Every TOML file of the folder, found by `insta::glob!` (a new example
    // needs no list); YAML plans load to the same model (`diagnostics`).
    for (folder, name) in [("../plans", "plan"), ("../policies", "policy"), ("../policies/service", "service")] {
        let path = std::path::Path::new(crate::common::ROOT).join(format!("schemas/{name}.schema.json"));
        let schema: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("schema")).expect("JSON");
        insta::glob!(folder, "*.toml", |path| {
            let value: toml::Value = toml::from_str(&std::fs::read_to_string(path).expect("read")).expect("toml");
            walk(&value, &schema, "");
        });
    }
}

#[test]
fn show_tells_the_story_of_documented_runs() {
    let sandbox = Sandbox::new();
    let settings = snapshot_settings("cli");
    for (plan, code) in [("flow_pwd", 0), ("deny_bash", 1), ("flow_bad_template", 1)] {
        let run = sandbox.planrun().args(["--plan", &format!("plans/{plan}.toml"), "--run-id", plan]).run();
        assert_eq!(run.code, code, "{}", run.snapshot());
        let shown = sandbox.planrun().args(["show", plan]).expect_code(0).run();
        settings.bind(|| insta::assert_snapshot!(format!("show_{plan}"), shown.snapshot()));
    }
}

#[test]
fn show_is_coloured_only_when_asked_or_on_a_terminal() {
    let sandbox = Sandbox::new();
    sandbox.planrun().args(["--plan", "plans/deny_bash.toml", "--run-id", "r", "--quiet"]).run();
    let plain = sandbox.planrun().args(["show", "r"]).run();
    assert!(!plain.stdout.contains('\u{1b}'), "no escape codes when piped");
    let coloured = sandbox.planrun().args(["show", "r", "--color", "always"]).run();
    assert!(coloured.stdout.contains("\u{1b}["), "{}", coloured.stdout);
}
