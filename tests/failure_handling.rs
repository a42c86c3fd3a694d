//! Failure handling: `on_failure = "continue"` records a step's last failed
//! attempt and lets the run go on (later steps read its `status`,
//! `exit_code`, `output_text` and `stderr_text`), the run ends `done` with
//! `failed_steps`, shown by `show`, `runs` and the final line; the default
//! `fail` still ends the run; continued failures in a row still exhaust
//! `max_consecutive_failures`; `expect.exit_codes` accepts a set of codes.

use crate::common::{Sandbox, TEST_POLICY};

/// `cat` of a missing file fails (exit 1, a message on stderr); the policy
/// gives `execution_error` two attempts.
const FAILING: &str = "[[steps]]\nid = \"test\"\nkind = \"shell\"\ncommand = [\"cat\", \"missing.txt\"]\n";

fn plan(body: &str) -> String {
    format!("version = 1\nid = \"test\"\n\n{body}")
}

const REPORT: &str = "[[steps]]\nid = \"report\"\nkind = \"write_file\"\npath = \"report.txt\"\ncontent = \"status={{ steps.test.status }} code={{ steps.test.exit_code }} err={{ steps.test.stderr_text }}\"\n";

#[test]
fn a_continued_failure_is_recorded_and_later_steps_read_it() {
    let sandbox = Sandbox::new();
    let output = sandbox.run_plan(&plan(&format!("{FAILING}on_failure = \"continue\"\n\n{REPORT}")), TEST_POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let state = sandbox.state("t");
    assert_eq!(state["status"], "done");
    assert_eq!(state["stop_reason"], "end_of_plan");
    assert_eq!(state["failed_steps"], serde_json::json!(["test"]));
    assert!(output.stderr.contains("ended with failed steps: test"), "{}", output.stderr);
    // Both attempts of the failing step ran (its retries first), then the report.
    let history = sandbox.history("t");
    let statuses: Vec<_> = history.iter().map(|record| record["status"].as_str().unwrap_or_default()).collect();
    assert_eq!(statuses, ["failed", "failed", "done"]);
    let report = std::fs::read_to_string(sandbox.workspace().join("report.txt")).expect("the report was written");
    assert!(report.starts_with("status=failed code=1 err="), "{report}");
    assert!(report.contains("No such file or directory"), "{report}");
    assert!(report.contains("missing.txt"), "{report}");

    let show = sandbox.planrun().args(["show", "t"]).run();
    assert!(show.stdout.contains("failed steps (on_failure = \"continue\"): test"), "{}", show.snapshot());
    let runs = sandbox.planrun().args(["runs"]).run();
    assert!(runs.stdout.contains("end_of_plan, 1 failed"), "{}", runs.snapshot());
    let listed = sandbox.planrun().args(["runs", "--json"]).run();
    assert!(listed.stdout.contains("\"failed_steps\""), "{}", listed.snapshot());
    let verify = sandbox.planrun().args(["verify", "t"]).run();
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
}

#[test]
fn the_default_on_failure_ends_the_run_and_nothing_later_runs() {
    let sandbox = Sandbox::new();
    let output = sandbox.run_plan(&plan(&format!("{FAILING}\n{REPORT}")), TEST_POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let state = sandbox.state("t");
    assert_eq!(state["status"], "failed");
    assert_eq!(state["stop_reason"], "step_failed");
    assert!(state.get("failed_steps").is_none(), "{state}");
    assert!(!sandbox.workspace().join("report.txt").exists(), "a step after the failure ran");
}

#[test]
fn continued_failures_in_a_row_still_exhaust_the_budget() {
    let sandbox = Sandbox::new();
    let second = FAILING.replace("id = \"test\"", "id = \"again\"");
    let body = format!(
        "[budget]\nmax_consecutive_failures = 3\n\n{FAILING}on_failure = \"continue\"\n\n{second}on_failure = \"continue\"\n\n{REPORT}"
    );
    let output = sandbox.run_plan(&plan(&body), TEST_POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let state = sandbox.state("t");
    assert_eq!(state["stop_reason"], "budget_exhausted", "{state}");
    assert_eq!(state["failed_steps"], serde_json::json!(["test"]));
    assert!(!sandbox.workspace().join("report.txt").exists(), "a step after the exhausted budget ran");
}

#[test]
fn a_security_denial_never_continues() {
    let sandbox = Sandbox::new();
    let body = format!(
        "[[steps]]\nid = \"test\"\nkind = \"shell\"\ncommand = [\"git\", \"push\"]\non_failure = \"continue\"\n\n{REPORT}"
    );
    let output = sandbox.run_plan(&plan(&body), TEST_POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert_eq!(sandbox.state("t")["stop_reason"], "step_failed");
    assert!(!sandbox.workspace().join("report.txt").exists(), "a step after a denial ran");
}

#[test]
fn expect_exit_codes_accepts_a_set() {
    let accepted = Sandbox::new();
    let body = "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"false\"]\n[steps.expect]\nexit_codes = [0, 1]\n";
    let output = accepted.run_plan(&plan(body), TEST_POLICY);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(accepted.state("t")["stop_reason"], "end_of_plan");

    let refused = Sandbox::new();
    let body =
        "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"echo\", \"x\"]\n[steps.expect]\nexit_codes = [1, 2]\n";
    let output = refused.run_plan(&plan(body), TEST_POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let history = refused.history("t");
    assert_eq!(history[0]["failure_class"], "verification_failed");
    assert_eq!(history[0]["error"], "expected exit code one of 1, 2, got 0");
}

#[test]
fn the_loader_refuses_bad_failure_keys_with_their_place() {
    let cases = [
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"false\"]\n[steps.expect]\nexit_code = 1\nexit_codes = [0, 1]\n",
            "`expect` has both `exit_code` and `exit_codes`",
            "plans/test.toml:10:",
        ),
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"false\"]\n[steps.expect]\nexit_codes = [0, \"one\"]\n",
            "`expect.exit_codes[1]`",
            "plans/test.toml:9:",
        ),
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"false\"]\n[steps.expect]\nexit_codes = [300]\n",
            "`expect.exit_codes[0]` is 300",
            "plans/test.toml:9:",
        ),
        (
            "[[steps]]\nid = \"a\"\nkind = \"write_file\"\npath = \"a\"\ncontent = \"a\"\n[steps.expect]\nexit_codes = [0]\n",
            "`expect.exit_codes` on a `write_file` step",
            "plans/test.toml:",
        ),
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"false\"]\non_failure = \"ignore\"\n",
            "unknown `on_failure` `ignore`",
            "plans/test.toml:8:",
        ),
    ];
    for (body, message, place) in cases {
        let sandbox = Sandbox::new();
        let output = sandbox.run_plan(&plan(body), TEST_POLICY);
        assert_eq!(output.code, 2, "{body}\n{}", output.snapshot());
        assert!(output.stderr.contains(message), "{body}\n{}", output.stderr);
        assert!(output.stderr.contains(place), "{body}\n{}", output.stderr);
        assert!(!sandbox.workspace().join("runs").join("t").exists(), "a refused plan started a run");
    }
}

#[test]
fn a_resumed_run_reads_the_continued_failure_from_its_history() {
    let sandbox = Sandbox::new();
    let gate = "[[steps]]\nid = \"gate\"\nkind = \"write_file\"\napproval = \"required\"\npath = \"gate.txt\"\ncontent = \"g\"\n";
    let body = format!("{FAILING}on_failure = \"continue\"\n\n{gate}\n{REPORT}");
    let output = sandbox.run_plan(&plan(&body), TEST_POLICY);
    assert_eq!(output.code, 3, "{}", output.snapshot());
    assert!(!sandbox.workspace().join("report.txt").exists(), "the report ran before the approval");
    sandbox.planrun().in_sandbox().args(["approve", "t"]).expect_code(0).run();
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    let report = std::fs::read_to_string(sandbox.workspace().join("report.txt")).expect("the report was written");
    assert!(report.starts_with("status=failed code=1 err="), "{report}");
    assert!(report.contains("missing.txt"), "{report}");
    assert_eq!(sandbox.state("t")["failed_steps"], serde_json::json!(["test"]));
}
