//! The service policy on the one loader: `planrun check` checks it (TOML or
//! YAML, given as a path or found in `<policies>/service/`), and
//! `planrun serve` refuses to start on a broken one, with the same
//! diagnostics as plans.

use std::path::Path;

use crate::common::{ROOT, Sandbox};

/// A broken YAML service policy: a typo'd key, an out-of-range limit, a bad
/// regex and a recovery rule that names no condition.
const BROKEN_YAML: &str = "version: 1\nguard:\n  max_goal_chars: 0\n  forbidden_patterns: [\"(\"]\ncontroller:\n  \
                           max_iteratons: 3\nrecovery:\n  - id: r\n    rewrite: run pwd\n";

fn assert_broken_yaml_findings(stdout: &str, file: &str) {
    for expected in [
        format!(
            "error[invalid-value]: `max_goal_chars` in `[guard]` must be between 1 and 100000, found 0\n --> {file}:3:19"
        ),
        format!("error[invalid-regex]: invalid regex `(`\n --> {file}:4:24"),
        format!("error[unknown-key]: unknown key `max_iteratons` in `[controller]`\n --> {file}:6:3"),
        "did you mean `max_iterations`?".to_string(),
        format!("error[missing-key]: a recovery rule needs `when_failure_class` or `match`\n --> {file}:8:5"),
    ] {
        assert!(stdout.contains(&expected), "missing {expected:?} in:\n{stdout}");
    }
}

#[test]
fn check_reports_every_finding_of_a_yaml_service_policy_given_as_a_path() {
    let sandbox = Sandbox::new();
    let path = sandbox.write("policies/service/service.yaml", BROKEN_YAML);
    let output = sandbox.planrun().args(["check", &path.display().to_string()]).run();
    assert_eq!(output.code, 2, "{}", output.stdout);
    assert_broken_yaml_findings(&output.stdout, "[TMP]/policies/service/service.yaml");
    assert!(output.stdout.contains(": 4 error(s)"), "{}", output.stdout);
}

#[test]
fn check_without_paths_checks_the_service_policy_of_the_policies_folder() {
    let sandbox = Sandbox::new();
    let default_policy = std::fs::read_to_string(Path::new(ROOT).join("policies/default.toml")).expect("read");
    let policies = sandbox.write("policies/default.toml", &default_policy);
    let policies = policies.parent().expect("folder").display().to_string();
    // The shipped folder passes: its service policy is valid.
    let clean = sandbox.planrun().args(["check", "--policies", "policies"]).run();
    assert_eq!(clean.code, 0, "{}", clean.stdout);
    sandbox.write("policies/service/service.yaml", BROKEN_YAML);
    let output = sandbox.planrun().args(["check", "--policies", &policies]).run();
    assert_eq!(output.code, 2, "{}", output.stdout);
    assert_broken_yaml_findings(&output.stdout, "[TMP]/policies/service/service.yaml");
}

#[test]
fn serve_refuses_a_broken_yaml_service_policy_and_serves_nothing() {
    let sandbox = Sandbox::new();
    let path = sandbox.write("service.yaml", BROKEN_YAML);
    let output = sandbox
        .planrun()
        .args(["serve", "--addr", "127.0.0.1:0", "--service-policy", &path.display().to_string()])
        .run();
    assert_eq!(output.code, 2, "{}", output.stderr);
    assert!(output.stderr.contains("[TMP]/service.yaml:3:19"), "{}", output.stderr);
    assert!(output.stderr.contains("error: invalid service policy; nothing served"), "{}", output.stderr);
    assert!(!sandbox.workspace().exists());
}
