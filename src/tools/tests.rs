//! The tools against a scratch workspace: shell verdicts, runs and facts,
//! files, `finish` and `flaky`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::*;
use crate::model::{
    ArgMatcher, ArgPattern, Budget, FilePolicy, RetryPolicy, ShellPolicy, ShellRule, SlotKind, SourceRef,
};

fn rule(program: &str, args: Vec<Vec<ArgMatcher>>) -> ShellRule {
    ShellRule {
        name: format!("allow-{program}"),
        program: program.to_owned(),
        args: args.into_iter().map(ArgPattern).collect(),
        prefix: false,
        decision: Decision::Allow,
        reason: None,
        network: crate::model::NetworkAccess::Off,
        origin: None,
    }
}

fn lit(s: &str) -> ArgMatcher {
    ArgMatcher::Literal(s.to_owned())
}

fn test_policy() -> Policy {
    let any = ArgMatcher::Regex(regex::Regex::new("^(?:.*)$").expect("regex"));
    let path = ArgMatcher::Slot { kind: SlotKind::Path, allow_dash: false };
    Policy {
        name: "test".into(),
        shell: ShellPolicy {
            blocked: vec!["bash".into(), "sh".into()],
            allow: vec![
                rule("echo", vec![vec![any.clone()]]),
                rule("ls", vec![vec![path]]),
                rule("sleep", vec![vec![lit("5")]]),
                rule("bash", vec![vec![]]),
                rule("planrun-missing-tool", vec![vec![]]),
                rule("seq", vec![vec![any]]),
            ],
            search_path: vec![PathBuf::from("/usr/bin"), PathBuf::from("/bin")],
            env: BTreeMap::from([("LANG".to_owned(), "C".to_owned())]),
            env_allow: vec![],
            sandbox: crate::model::SandboxMode::Landlock,
            require_sandbox: false,
        },
        files: FilePolicy { deny: vec!["secret/**".into()], max_read_bytes: 1000, max_write_bytes: 1000 },
        retry: RetryPolicy { max_attempts: BTreeMap::new(), cap: 3, backoff: crate::model::RetryBackoff::default() },
        budget: Budget {
            max_steps: 100,
            max_tool_calls: 100,
            max_consecutive_failures: 3,
            step_timeout_secs: 10,
            max_output_bytes: 100,
            max_run_secs: None,
        },
        secrets: BTreeMap::new(),
        source: SourceRef { path: "policies/test.toml".into(), sha256: String::new() },
        mcp: Default::default(),
        extends: Vec::new(),
        http: crate::model::HttpPolicy::default(),
        models: BTreeMap::new(),
    }
}

fn shell(argv: &[&str]) -> ResolvedAction {
    ResolvedAction::Shell {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        env: BTreeMap::new(),
        secrets: Vec::new(),
        cwd: None,
        stdin: None,
    }
}

fn failure(outcome: &ToolOutcome) -> (FailureClass, &str) {
    match &outcome.result {
        Err(failure) => (failure.class, failure.message.as_str()),
        Ok(success) => panic!("expected a failure, got {success:?}"),
    }
}

/// The facts as a step record holds them.
fn facts(outcome: &ToolOutcome) -> Value {
    let details = crate::model::StepDetails::Attempt { tool: outcome.facts.clone(), keyed: None };
    serde_json::to_value(details).expect("facts")
}

fn run(root: &Path, action: ResolvedAction, attempt: u32) -> ToolOutcome {
    let policy = test_policy();
    let ws = Workspace::open(root, &policy.files).expect("open");
    let mut tools = Tools::new(&ws, &policy);
    tools.execute(&action, attempt, Duration::from_secs(10), false)
}

#[test]
fn shell_success_keeps_output_out_of_details() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outcome = run(tmp.path(), shell(&["echo", "hello-output"]), 1);
    let success = outcome.result.as_ref().expect("success");
    assert_eq!(success.output_text, "hello-output\n");
    let details = facts(&outcome);
    assert!(!details.to_string().contains("hello-output"), "{details}");
    assert_eq!(facts(&outcome)["decision"], "allow");
    assert_eq!(facts(&outcome)["rule"], "allow-echo");
    assert_eq!(facts(&outcome)["exit_code"], 0);
    assert_eq!(facts(&outcome)["stdout_bytes"], 13);
    assert_eq!(facts(&outcome)["truncated"], false);
    assert!(facts(&outcome)["program"].as_str().expect("program").ends_with("/echo"));
}

#[test]
fn shell_truncates_to_the_budget() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outcome = run(tmp.path(), shell(&["seq", "1000"]), 1);
    let success = outcome.result.as_ref().expect("success");
    assert_eq!(success.output_text.len(), 100);
    assert_eq!(facts(&outcome)["truncated"], true);
}

#[test]
fn shell_denials_name_their_rule_and_run_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outcome = run(tmp.path(), shell(&["bash"]), 1);
    assert_eq!(
        failure(&outcome),
        (FailureClass::SecurityDenied, "`bash` is blocked by security policy (rule `shell.blocked`)")
    );
    assert_eq!(facts(&outcome)["decision"], "forbidden");
    let outcome = run(tmp.path(), shell(&["touch", "created"]), 1);
    assert_eq!(
        failure(&outcome),
        (FailureClass::SecurityDenied, "`touch created` is not in allowlist (rule `shell.default-deny`)")
    );
    assert!(!tmp.path().join("created").exists());
    let outcome = run(tmp.path(), shell(&["/bin/echo", "x"]), 1);
    assert_eq!(failure(&outcome).0, FailureClass::SecurityDenied);
    assert_eq!(facts(&outcome)["rule"], "shell.bare-name");
    let outcome = run(tmp.path(), shell(&["ls", "../"]), 1);
    assert_eq!(failure(&outcome).0, FailureClass::SecurityDenied);
}

#[test]
fn shell_execution_errors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outcome = run(tmp.path(), shell(&["ls", "missing-file"]), 1);
    let (class, message) = failure(&outcome);
    assert_eq!(class, FailureClass::ExecutionError);
    assert!(message.starts_with("`ls` exited with status 2: ") && message.contains("missing-file"), "{message}");
    assert_eq!(facts(&outcome)["exit_code"], 2);
    let outcome = run(tmp.path(), shell(&["planrun-missing-tool"]), 1);
    assert_eq!(
        failure(&outcome),
        (FailureClass::ExecutionError, "`planrun-missing-tool` was not found in the policy's search path")
    );
}

#[test]
fn shell_timeout() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let policy = test_policy();
    let ws = Workspace::open(tmp.path(), &policy.files).expect("open");
    let mut tools = Tools::new(&ws, &policy);
    let started = std::time::Instant::now();
    let outcome = tools.execute(&shell(&["sleep", "5"]), 1, Duration::from_secs(1), false);
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(failure(&outcome), (FailureClass::ExecutionError, "`sleep` timed out after 1s and was killed"));
    assert_eq!(facts(&outcome)["timed_out"], true);
}

#[test]
fn files() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let write = |path: &str, content: &str| ResolvedAction::WriteFile { path: path.into(), content: content.into() };
    let read = |path: &str| ResolvedAction::ReadFile { path: path.into() };
    let outcome = run(tmp.path(), write("out/data.json", "{\"a\": 1}"), 1);
    assert_eq!(outcome.result.as_ref().expect("ok").output_text, "wrote 8 bytes to out/data.json");
    assert_eq!(facts(&outcome)["bytes"], 8);
    assert_eq!(facts(&outcome)["path"], "out/data.json");
    let outcome = run(tmp.path(), read("out/data.json"), 1);
    let success = outcome.result.as_ref().expect("ok");
    assert_eq!(success.output_text, "{\"a\": 1}");
    assert_eq!(success.output_json, Some(serde_json::json!({"a": 1})));
    run(tmp.path(), write("n.txt", "42"), 1).result.expect("ok");
    let outcome = run(tmp.path(), read("n.txt"), 1);
    assert_eq!(outcome.result.expect("ok").output_json, None);

    let outcome = run(tmp.path(), write("../escape.txt", "x"), 1);
    let (class, message) = failure(&outcome);
    assert_eq!(class, FailureClass::SecurityDenied);
    assert!(message.contains("(rule `files.parent`)"), "{message}");
    assert_eq!(facts(&outcome)["rule"], "files.parent");
    assert!(!tmp.path().parent().expect("parent").join("escape.txt").exists());
    let outcome = run(tmp.path(), write("secret/k", "x"), 1);
    assert_eq!(facts(&outcome)["rule"], "files.deny[0]");
    assert!(!tmp.path().join("secret").exists());
    let outcome = run(tmp.path(), read("missing.txt"), 1);
    assert_eq!(failure(&outcome), (FailureClass::FileError, "`missing.txt` was not found"));
}

#[test]
fn finish_and_flaky() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let outcome = run(tmp.path(), ResolvedAction::Finish { message: None }, 1);
    assert_eq!(outcome.result.expect("ok").output_text, "");
    let outcome = run(tmp.path(), ResolvedAction::Finish { message: Some("bye".into()) }, 1);
    assert_eq!(outcome.result.expect("ok").output_text, "bye");
    let flaky = ResolvedAction::Flaky { failures: 2, output: "fine".into() };
    for attempt in 1..=2 {
        let outcome = run(tmp.path(), flaky.clone(), attempt);
        assert_eq!(
            failure(&outcome),
            (
                FailureClass::ExecutionError,
                format!("flaky: simulated failure on attempt {attempt} (this step fails its first 2)").as_str()
            )
        );
    }
    let outcome = run(tmp.path(), flaky, 3);
    assert_eq!(outcome.result.expect("ok").output_text, "fine");
}
