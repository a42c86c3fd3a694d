//! Usage errors and exit codes of the command line.

use crate::common::{Sandbox, snapshot_settings};

#[test]
fn usage_errors_exit_2() {
    let sandbox = Sandbox::new();
    let settings = snapshot_settings("cli");
    for (name, args) in [
        ("no_plan_or_goal", vec![]),
        ("plan_and_goal", vec!["--plan", "plans/flow_pwd.toml", "--goal", "x"]),
        ("unknown_flag", vec!["--frobnicate"]),
        ("missing_plan_file", vec!["--plan", "plans/does_not_exist.toml"]),
    ] {
        let output = sandbox.planrun().args(&args).run();
        assert_eq!(output.code, 2, "{name}: {}", output.snapshot());
        settings.bind(|| insta::assert_snapshot!(format!("usage_{name}"), output.snapshot()));
        assert!(!sandbox.workspace().exists(), "{name}: nothing may be created");
    }
}

#[test]
fn help_exits_0() {
    let output = Sandbox::new().planrun().args(["--help"]).run();
    assert_eq!(output.code, 0);
    assert!(output.stdout.contains("--goal"));
}

#[test]
fn check_on_the_repository_is_clean() {
    let output = Sandbox::new().planrun().args(["check"]).expect_code(0).run();
    snapshot_settings("cli").bind(|| insta::assert_snapshot!("check_repository", output.snapshot()));
}

#[test]
fn a_bad_test_clock_is_invalid_input() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["route", "x"]).clock("yesterday").expect_code(2).run();
    assert!(output.stderr.contains("PLANRUN_TEST_CLOCK"), "names the variable: {}", output.stderr);
}

/// The folder options are global: before a command as after it. (The
/// harness adds `--workspace` after the command; this test puts it first.)
#[test]
fn folder_options_may_stand_before_a_command() {
    let sandbox = Sandbox::new();
    sandbox.planrun().args(["--plan", "plans/flow_pwd.toml", "--run-id", "first", "-q"]).expect_code(0).run();
    let workspace = sandbox.workspace().display().to_string();
    let output = sandbox.planrun().args(["--workspace", workspace.as_str(), "show", "first"]).expect_code(0).run();
    assert!(output.stdout.contains("first"), "{}", output.stdout);
}

/// A run's options before a command are refused, and nothing runs.
#[test]
fn run_options_before_a_command_are_refused() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["--plan", "plans/flow_pwd.toml", "runs"]).expect_code(2).run();
    assert!(output.stderr.contains("belong to a run"), "{}", output.stderr);
    assert!(!sandbox.workspace().join("runs").exists(), "nothing ran");
}

/// Issue 22 item 13: `check` said "checked 0 plan(s) and 0 policy file(s)"
/// for one plan with errors and for a service policy file. It counts every
/// file it checked, by kind, errors or not, and `--format json` lists them.
#[test]
fn check_counts_and_names_every_file_it_checked() {
    let sandbox = Sandbox::new();
    let broken = sandbox.planrun().args(["check", "tests/fixtures/broken/unknown_key.toml"]).expect_code(2).run();
    let last = broken.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("checked 1 plan(s) and 0 policy file(s): "), "{}", broken.stdout);

    let service = sandbox.planrun().args(["check", "policies/service/service.toml"]).expect_code(0).run();
    let last = service.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("checked 0 plan(s), 0 policy file(s) and 1 service policy file(s): "), "{last}");

    let unreadable = sandbox.planrun().args(["check", "tests/fixtures/broken/toml_syntax.toml"]).expect_code(2).run();
    let last = unreadable.stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("checked 0 plan(s), 0 policy file(s) and 1 unreadable file(s): "), "{last}");

    let args = ["check", "tests/fixtures/broken/unknown_key.toml", "policies/service/service.toml", "--format", "json"];
    let json = sandbox.planrun().args(args).expect_code(2).run();
    let value: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(
        value["files"],
        serde_json::json!([
            {"kind": "plan", "path": "tests/fixtures/broken/unknown_key.toml", "name": null, "loaded": false},
            {"kind": "service_policy", "path": "policies/service/service.toml", "name": null, "loaded": true},
        ])
    );
    assert_eq!(value["plans"][0]["loaded"], false, "{value}");
}

/// Issue 22 item 14: a build says what it can do. `--version` lists the
/// features built in (and those left out); a build without PostgreSQL says
/// so in `--help` next to everything that needs it, not only on first use.
#[test]
fn the_build_says_what_it_can_do() {
    let sandbox = Sandbox::new();
    let version = sandbox.planrun().args(["--version"]).expect_code(0).run();
    let help = sandbox.planrun().args(["--help"]).expect_code(0).run();
    let line = |needle: &str| -> String {
        help.stdout.lines().find(|line| line.contains(needle)).unwrap_or_default().to_string()
    };
    let needs_postgres =
        [line("  worker "), line("  store "), line("  export "), line("--queue"), line("--store <URL>")];
    if cfg!(feature = "postgres") {
        assert!(version.stdout.contains("features: server, postgres"), "{}", version.stdout);
        for line in &needs_postgres {
            assert!(!line.contains("not in this build"), "{line}");
        }
    } else {
        assert!(version.stdout.contains("not built in: postgres"), "{}", version.stdout);
        for line in &needs_postgres[..4] {
            assert!(line.contains("[not in this build: built without PostgreSQL support"), "{line}");
        }
        assert!(needs_postgres[4].contains("[`postgres://` is not in this build"), "{}", needs_postgres[4]);
    }
    assert_eq!(cfg!(feature = "server"), version.stdout.contains("features: server"), "{}", version.stdout);
}
