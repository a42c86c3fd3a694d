//! `planrun route`: every candidate, the winner and why; ambiguity refused.

use crate::common::{Sandbox, snapshot_settings};

#[test]
fn route_explains_each_documented_goal() {
    let sandbox = Sandbox::new();
    let settings = snapshot_settings("cli");
    for (name, goal) in [
        ("route_inspect_project", "inspect project"),
        ("route_russian_uppercase", "ПРОВЕРЬ ЧТО ТУТ ЕСТЬ"),
        ("route_default", "anything else"),
        ("route_two_candidates", "test deny bash or test deny rm"),
    ] {
        let output = sandbox.planrun().args(["route", goal]).run();
        assert_eq!(output.code, 0, "{goal}: {}", output.snapshot());
        settings.bind(|| insta::assert_snapshot!(name, output.snapshot()));
    }
}

#[test]
fn equal_length_matches_are_refused_naming_both_plans() {
    let sandbox = Sandbox::new();
    let plan = |id: &str, keyword: &str, default: bool| {
        format!(
            "version = 1\nid = \"{id}\"\nkeywords = [\"{keyword}\"]\ndefault = {default}\n\n[[steps]]\nid = \"s\"\nkind = \"finish\"\n"
        )
    };
    sandbox.write("plans/a.toml", &plan("alpha", "deploy", false));
    sandbox.write("plans/b.toml", &plan("beta", "report", true));
    sandbox.write("policies/default.toml", "version = 1\n");
    let output = sandbox.planrun().in_sandbox().args(["route", "deploy report"]).expect_code(2).run();
    assert!(output.stdout.contains("`alpha` and `beta`"), "{}", output.stdout);
    let run = sandbox.planrun().in_sandbox().args(["--goal", "deploy report"]).expect_code(2).run();
    assert!(run.stderr.contains("ambiguous"), "{}", run.stderr);
    assert!(!sandbox.workspace().exists(), "an ambiguous goal runs nothing");
}

/// An empty goal would route to the default plan and run it: it is refused
/// as a usage error on every command that takes one, and nothing runs.
#[test]
fn an_empty_or_blank_goal_is_refused_and_runs_nothing() {
    let sandbox = Sandbox::new();
    for goal in ["", "   ", "\t\n"] {
        for command in [&["--goal", goal][..], &["route", goal], &["plan", "--goal", goal]] {
            let output = sandbox.planrun().args(command).expect_code(2).run();
            assert!(output.stderr.contains("a goal must hold a word"), "{command:?}: {}", output.stderr);
        }
    }
    assert!(!sandbox.workspace().exists(), "the default plan did not run");
}

#[test]
fn route_json_lists_candidates() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["route", "test flow ls to file", "--json"]).expect_code(0).run();
    let value: serde_json::Value = serde_json::from_str(&output.stdout).expect("JSON");
    assert_eq!(value["outcome"], "matched");
    assert_eq!(value["plan_id"], "flow_ls");
    assert_eq!(value["candidates"][0]["keyword"], "test flow ls to file");
}
