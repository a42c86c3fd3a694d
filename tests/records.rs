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
fn show_prints_a_timeline_and_the_seed_shaped_state() {
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
        insta::assert_snapshot!("show_retry_execution_json", json.snapshot());
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
