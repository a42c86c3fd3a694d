//! Run records: run ids, never overwriting a run, checkpoints, `show`.

use std::fs;

use serde_json::Value;

use crate::common::{Sandbox, snapshot_settings};

#[test]
fn a_named_run_is_never_overwritten() {
    let sandbox = Sandbox::new();
    sandbox.planrun().args(["--goal", "inspect project", "--run-id", "my-run-01"]).expect_code(0).run();
    let before: Vec<String> = ["state.json", "audit.jsonl", "history.jsonl", "plan.json"]
        .iter()
        .map(|file| sandbox.record("my-run-01", file))
        .collect();
    let second = sandbox
        .planrun()
        .args(["--goal", "create file hello.txt with text hello world", "--run-id", "my-run-01"])
        .run();
    assert_eq!(second.code, 2, "{}", second.snapshot());
    assert!(second.stderr.contains("already exists"), "{}", second.stderr);
    let after: Vec<String> = ["state.json", "audit.jsonl", "history.jsonl", "plan.json"]
        .iter()
        .map(|file| sandbox.record("my-run-01", file))
        .collect();
    assert_eq!(before, after);
    assert!(!sandbox.workspace().join("hello.txt").exists(), "the refused run must not execute");
}

#[test]
fn invalid_run_ids_are_refused_before_anything_runs() {
    for id in ["..", ".", "../escape", "a/b", "", "sp ace", &"x".repeat(65)] {
        let sandbox = Sandbox::new();
        let output =
            sandbox.planrun().args(["--goal", "create file hello.txt with text hello world", "--run-id", id]).run();
        assert_eq!(output.code, 2, "{id:?}: {}", output.snapshot());
        assert!(output.stderr.contains("invalid run id"), "{id:?}: {}", output.stderr);
        assert!(!sandbox.workspace().join("hello.txt").exists(), "{id:?}");
        assert!(!sandbox.path().join("escape").exists(), "{id:?}");
    }
}

#[test]
fn generated_run_ids_are_sequential_under_the_test_clock_and_never_collide() {
    let sandbox = Sandbox::new();
    for expected in ["run-0001", "run-0002"] {
        // Each process starts counting at 1; the second takes the next free id.
        sandbox.planrun().args(["--goal", "anything else"]).expect_code(0).run();
        assert!(sandbox.workspace().join("runs").join(expected).join("state.json").is_file(), "{expected}");
    }
}

#[test]
fn an_invalid_plan_creates_no_run_folder() {
    let sandbox = Sandbox::new();
    sandbox.write("plans/bad.toml", "version = 2\nid = \"bad\"\n");
    sandbox
        .planrun()
        .in_sandbox()
        .args(["--plan", "plans/bad.toml", "--policies", &format!("{}/policies", crate::common::ROOT)])
        .expect_code(2)
        .run();
    assert!(!sandbox.workspace().exists(), "nothing may be created");
}

#[test]
fn the_final_state_and_the_log_agree() {
    let sandbox = Sandbox::new();
    sandbox.planrun().args(["--plan", "plans/flow_pwd.toml", "--run-id", "r"]).expect_code(0).run();
    let state = sandbox.state("r");
    assert_eq!(state["status"], "done");
    assert_eq!(state["current_step_id"], Value::Null);
    assert_eq!(state["cursor"]["next_step"], 4);
    let audit: Vec<Value> = sandbox
        .record("r", "audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("audit line"))
        .collect();
    for (index, event) in audit.iter().enumerate() {
        assert_eq!(event["seq"], index as u64 + 1, "seq is contiguous");
        for key in ["ts", "run_id", "event_type", "step_id", "status", "details"] {
            assert!(event.get(key).is_some(), "{key} missing in {event}");
        }
    }
    // The checkpoint is the head of the log: written after the closing
    // `state_saved` and `run_finished`, it covers them.
    assert_eq!(state["audit_seq"].as_u64(), Some(audit.len() as u64));
    let types: Vec<&str> = audit.iter().filter_map(|event| event["event_type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"run_started"));
    assert_eq!(types.last(), Some(&"run_finished"));
    let leftovers: Vec<_> = fs::read_dir(sandbox.workspace().join("runs/r"))
        .expect("run dir")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
    let report = fs::read_to_string(sandbox.workspace().join("report.txt")).expect("report.txt");
    assert_eq!(Some(sandbox.filter(&report).as_str()), sandbox.history("r")[0]["output_text"].as_str());
    assert_eq!(sandbox.filter(&report), "[WORKSPACE]\n");
}

#[test]
fn show_prints_a_timeline_and_the_full_state_as_json() {
    let sandbox = Sandbox::new();
    sandbox.planrun().args(["--goal", "test retry execution", "--run-id", "r"]).expect_code(0).run();
    let shown = sandbox.planrun().args(["show", "r"]).expect_code(0).run();
    let json = sandbox.planrun().args(["show", "r", "--json"]).expect_code(0).run();
    let state: Value = serde_json::from_str(&json.stdout).expect("show --json prints JSON");
    assert_eq!(state["plan"]["steps"][0]["status"], "done");
    assert_eq!(state["plan"]["steps"][0]["attempts"], 2);
    assert_eq!(state["history"].as_array().map(Vec::len), Some(3));
    let settings = snapshot_settings("cli");
    settings.bind(|| {
        insta::assert_snapshot!("show_retry_execution", shown.snapshot());
        // The run was started from the repository's folder: its files'
        // absolute paths name it.
        let json = json.snapshot().replace(crate::common::ROOT, "[ROOT]");
        insta::assert_snapshot!("show_retry_execution_json", planrun::snapshot::hash_placeholders(&json));
    });
}

#[test]
fn show_refuses_unknown_and_invalid_run_ids() {
    let sandbox = Sandbox::new();
    for id in ["nope", "../x"] {
        let output = sandbox.planrun().args(["show", id]).run();
        assert_eq!(output.code, 2, "{id}: {}", output.snapshot());
    }
}

#[test]
fn json_prints_the_final_state_to_stdout() {
    let sandbox = Sandbox::new();
    let output =
        sandbox.planrun().args(["--goal", "test flow read to copy", "--run-id", "r", "--json", "--quiet"]).run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert_eq!(output.stderr, "", "--quiet prints no progress");
    let state: Value = serde_json::from_str(&output.stdout).expect("JSON on stdout");
    assert_eq!(state["status"], "done");
    assert_eq!(state["history"][3]["output_text"], "planrun copies this line");
}

/// A sandbox whose workspace is a copy of `tests/fixtures/previous_layout/<name>/`:
/// runs recorded by planrun before the log held the checkpoints (`state.json`
/// after every step, `state_saved` lines without a checkpoint), with the plan
/// and policy files they were recorded with (`previous_layout_files/`).
fn previous_layout(name: &str) -> Sandbox {
    fn copy(from: &std::path::Path, to: &std::path::Path) {
        fs::create_dir_all(to).expect("create");
        for entry in fs::read_dir(from).expect("fixture").flatten() {
            let target = to.join(entry.file_name());
            if entry.path().is_dir() {
                copy(&entry.path(), &target);
            } else {
                fs::copy(entry.path(), &target).expect("copy");
            }
        }
    }
    let sandbox = Sandbox::new();
    let fixtures = std::path::Path::new(crate::common::ROOT).join("tests/fixtures");
    copy(&fixtures.join("previous_layout").join(name), &sandbox.workspace());
    // The plan and policy files as they were when these runs were recorded
    // (their digests are in the records), beside the workspace, where
    // `resume` and `approve` find them when the repository's copies have
    // changed since.
    copy(&fixtures.join("previous_layout_files"), sandbox.path());
    sandbox
}

/// `planrun <args>` at `clock`, with the fixtures' key or without.
fn previous_run(sandbox: &Sandbox, key: Option<&str>, args: &[&str], clock: &str) -> crate::common::Output {
    let command = sandbox.planrun().args(args).clock(clock);
    match key {
        Some(key) => command.env("PLANRUN_HMAC_KEY", key).run(),
        None => command.run(),
    }
}

/// The fixtures' key (`tests/tamper.rs` uses the same).
const FIXTURE_KEY: &str = "s3cret";

#[test]
fn a_finished_run_of_the_previous_layout_still_shows_and_verifies() {
    for (key, name) in [(None, "flow_pwd_done_plain"), (Some(FIXTURE_KEY), "flow_pwd_done_keyed")] {
        let sandbox = previous_layout(name);
        let clock = crate::common::tickets::T_RESUME;
        let verify = previous_run(&sandbox, key, &["verify", "f"], clock);
        assert_eq!(verify.code, 0, "{name}: {}", verify.snapshot());
        assert!(
            verify.stdout.contains("· done · state version 5 · 17 audit events · 4 history records"),
            "{}",
            verify.stdout
        );
        let show = previous_run(&sandbox, key, &["show", "f", "--json"], clock);
        assert_eq!(show.code, 0, "{name}: {}", show.snapshot());
        let shown: Value = serde_json::from_str(&show.stdout).expect("JSON");
        assert_eq!((shown["status"].as_str(), shown["history"].as_array().map(Vec::len)), (Some("done"), Some(4)));
        let resume = previous_run(&sandbox, key, &["resume", "f"], clock);
        assert_eq!(resume.code, 1, "{name}: {}", resume.snapshot());
        assert!(resume.stderr.contains("already ended"), "{}", resume.stderr);
        // An edit of the old layout's files is refused as it was.
        let history = sandbox.workspace().join("runs/f/history.jsonl");
        let text = fs::read_to_string(&history).expect("history");
        fs::write(&history, text.replacen("\"done\"", "\"failed\"", 1)).expect("edit");
        let refused = previous_run(&sandbox, key, &["verify", "f"], clock);
        assert_eq!(refused.code, 2, "{name}: {}", refused.snapshot());
        assert!(refused.stderr.contains("history chain does not match"), "{}", refused.stderr);
    }
}

#[test]
fn a_waiting_run_of_the_previous_layout_is_approved_and_resumed_and_goes_on_in_the_log() {
    use crate::common::tickets::{T_APPROVE, T_RESUME, T_RESUME_AGAIN, close_count};
    for (key, name) in [(None, "ticket_waiting_plain"), (Some(FIXTURE_KEY), "ticket_waiting_keyed")] {
        let sandbox = previous_layout(name);
        let verify = previous_run(&sandbox, key, &["verify", "t"], T_APPROVE);
        assert_eq!(verify.code, 0, "{name}: {}", verify.snapshot());
        assert!(verify.stdout.contains("waiting_approval"), "{}", verify.stdout);
        let approve = previous_run(&sandbox, key, &["approve", "t"], T_APPROVE);
        assert_eq!(approve.code, 0, "{name}: {}", approve.snapshot());
        let resume = previous_run(&sandbox, key, &["resume", "t"], T_RESUME);
        assert_eq!(resume.code, 0, "{name}: {}", resume.snapshot());
        assert_eq!(close_count(&sandbox, "ticket-7"), 1, "{name}");
        // It went on in the log layout: the first head line carries the
        // plan and the look-up recorded before.
        let audit = sandbox.record("t", "audit.jsonl");
        let first_head = audit.lines().find(|line| line.contains("\"checkpoint\":")).expect("a head line");
        let head: Value = serde_json::from_str(first_head).expect("JSON");
        assert_eq!(head["details"]["checkpoint"]["plan"]["id"], "ticket_close", "{name}");
        assert_eq!(head["details"]["checkpoint"]["history"][0]["step_id"], "lookup", "{name}");
        let verify = previous_run(&sandbox, key, &["verify", "t"], T_RESUME_AGAIN);
        assert_eq!(verify.code, 0, "{name}: {}", verify.snapshot());
        assert!(verify.stdout.contains("· done"), "{}", verify.stdout);
        assert_eq!(sandbox.state("t")["status"], "done");
    }
}

#[test]
fn an_interrupted_run_of_the_previous_layout_resumes_without_closing_twice() {
    use crate::common::tickets::{T_RESUME_AGAIN, close_count};
    for (key, name) in [(None, "ticket_interrupted_plain"), (Some(FIXTURE_KEY), "ticket_interrupted_keyed")] {
        let sandbox = previous_layout(name);
        assert_eq!(close_count(&sandbox, "ticket-7"), 1, "{name}: the crash came after the close");
        let verify = previous_run(&sandbox, key, &["verify", "t"], T_RESUME_AGAIN);
        assert_eq!(verify.code, 0, "{name}: {}", verify.snapshot());
        assert!(verify.stdout.contains("crash tail"), "{}", verify.stdout);
        let resume = previous_run(&sandbox, key, &["resume", "t"], T_RESUME_AGAIN);
        assert_eq!(resume.code, 0, "{name}: {}", resume.snapshot());
        assert_eq!(close_count(&sandbox, "ticket-7"), 1, "{name}: not closed twice");
        assert_eq!(sandbox.state("t")["status"], "done");
        let verify = previous_run(&sandbox, key, &["verify", "t"], T_RESUME_AGAIN);
        assert_eq!(verify.code, 0, "{name}: {}", verify.snapshot());
    }
}
