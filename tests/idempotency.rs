//! Idempotency and crash recovery: an effect that already happened is
//! found by its receipt and never repeated (the ticket demo's crash
//! trajectory, keyed writes), the same key with another intent is a
//! conflict, an unknowable outcome ends uncertain instead of being retried
//! blindly, and an interrupted run resumes at its checkpoint.

use std::fs;

use serde_json::Value;

use crate::common::tickets::{
    RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, close_count, event_types, pause, ticket_sandbox,
};
use crate::common::{Sandbox, TEST_POLICY};

#[test]
fn a_crash_after_the_close_is_recovered_from_the_receipt_without_a_second_close() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    let crashed =
        sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).env("PLANRUN_CRASH_AT", "close:after_effect").run();
    assert_eq!(crashed.code, -1, "the process is killed by the hook: {}", crashed.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "the close happened before the crash");
    assert_eq!(sandbox.state(RUN)["status"], "waiting_approval", "the checkpoint predates the close");
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "recovery must not close again");
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done");
    assert_eq!(state["evidence"][0]["kind"], "recovered_from_receipt");
    let types = event_types(&sandbox);
    assert!(
        types.contains(&"receipt_lookup".to_string()) && types.contains(&"receipt_reused".to_string()),
        "{types:?}"
    );
}

fn keyed_write_plan(key: &str, content: &str) -> String {
    format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"out.txt\"\ncontent = \"{content}\"\nidempotency_key = \"{key}\"\n"
    )
}

/// The sandbox's `plans/test.toml` again, as run `t2`.
fn second_run(sandbox: &Sandbox) -> crate::common::Planrun<'_> {
    sandbox.planrun().in_sandbox().args(["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t2"])
}

#[test]
fn the_same_key_and_intent_reuses_the_receipt_without_repeating_the_effect() {
    let sandbox = Sandbox::new();
    assert_eq!(sandbox.run_plan(&keyed_write_plan("report-1", "v1"), TEST_POLICY).code, 0);
    fs::write(sandbox.workspace().join("out.txt"), "edited by hand").expect("edit");
    sandbox.write("plans/test.toml", &keyed_write_plan("report-1", "v1"));
    second_run(&sandbox).expect_code(0).run();
    assert_eq!(
        fs::read_to_string(sandbox.workspace().join("out.txt")).expect("out"),
        "edited by hand",
        "the write ran again"
    );
    assert_eq!(sandbox.history("t2")[0]["details"]["receipt"], "reused_receipt");
}

#[test]
fn the_same_key_with_another_intent_is_a_conflict() {
    let sandbox = Sandbox::new();
    assert_eq!(sandbox.run_plan(&keyed_write_plan("report-1", "v1"), TEST_POLICY).code, 0);
    sandbox.write("plans/test.toml", &keyed_write_plan("report-1", "v2"));
    second_run(&sandbox).expect_code(1).run();
    let history = sandbox.history("t2");
    assert_eq!(history.len(), 1, "a conflict is never retried");
    assert_eq!(history[0]["failure_class"], "idempotency_conflict");
    assert_eq!(sandbox.state("t2")["stop_reason"], "idempotency_conflict");
    assert_eq!(fs::read_to_string(sandbox.workspace().join("out.txt")).expect("out"), "v1");
}

#[test]
fn a_keyed_write_interrupted_before_its_receipt_is_recovered_by_the_target_digest() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&keyed_write_plan("report-{{ run.id }}", "v1"), TEST_POLICY);
    sandbox.test_plan().env("PLANRUN_CRASH_AT", "write:before_receipt").expect_code(-1).run();
    // The file holds exactly the intended content: the write vouches for
    // itself and is not repeated.
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    let state = sandbox.state("t");
    assert_eq!(state["status"], "done");
    assert_eq!(state["evidence"][0]["kind"], "recovered_from_receipt");
    let history = sandbox.history("t");
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["details"]["vouched_by"], "target_digest");
    assert_eq!(fs::read_to_string(sandbox.workspace().join("out.txt")).expect("out"), "v1");
}

#[test]
fn an_unknowable_write_outcome_ends_uncertain_with_a_reconciliation_record() {
    let sandbox = Sandbox::new();
    sandbox.write_plan(&keyed_write_plan("report-{{ run.id }}", "v1"), TEST_POLICY);
    sandbox.test_plan().env("PLANRUN_CRASH_AT", "write:before_receipt").expect_code(-1).run();
    // Someone changed the target since: its digest can no longer tell
    // whether the write was applied.
    fs::write(sandbox.workspace().join("out.txt"), "edited by hand").expect("edit");
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(1).run();
    assert_eq!(fs::read_to_string(sandbox.workspace().join("out.txt")).expect("out"), "edited by hand");
    let state = sandbox.state("t");
    assert_eq!(state["stop_reason"], "tool_result_uncertain");
    assert_eq!(state["reconciliation"]["idempotency_key"], "report-t");
    let history = sandbox.history("t");
    assert_eq!(history.len(), 1, "never a blind retry");
    assert_eq!(history[0]["failure_class"], "tool_result_uncertain");
}

#[test]
fn an_interrupted_run_without_keys_resumes_at_its_cursor() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"one\"\nkind = \"write_file\"\npath = \"one.txt\"\ncontent = \"1\"\n\n[[steps]]\nid = \"two\"\nkind = \"write_file\"\npath = \"two.txt\"\ncontent = \"2\"\n";
    sandbox.write_plan(plan, TEST_POLICY);
    sandbox.test_plan().env("PLANRUN_CRASH_AT", "two:after_effect").expect_code(-1).run();
    assert_eq!(sandbox.state("t")["status"], "running");
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    let ids: Vec<String> =
        sandbox.history("t").iter().map(|record| record["step_id"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(ids, ["one", "two"], "step one is not repeated");
}

#[test]
fn history_lines_past_the_checkpoint_are_dropped_on_resume() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"one\"\nkind = \"write_file\"\npath = \"one.txt\"\ncontent = \"1\"\n";
    sandbox.write_plan(plan, TEST_POLICY);
    sandbox.test_plan().env("PLANRUN_CRASH_AT", "one:after_effect").expect_code(-1).run();
    // As if the process had died after appending the attempt's history line
    // but before its checkpoint.
    let history = sandbox.workspace().join("runs/t/history.jsonl");
    let line = r#"{"step_id":"one","kind":"write_file","status":"done","attempt":1,"failure_class":null,"action":null,"output_text":"ghost","error":null,"details":{},"started_at":"2026-01-01T00:00:00Z","finished_at":"2026-01-01T00:00:00Z","duration_ms":0}"#;
    fs::write(&history, format!("{line}\n")).expect("append");
    sandbox.planrun().in_sandbox().args(["resume", "t"]).expect_code(0).run();
    let records = sandbox.history("t");
    assert_eq!(records.len(), 1, "the uncovered line was dropped, the attempt re-run");
    assert_ne!(records[0]["output_text"], "ghost");
    let resumed_event = sandbox
        .record("t", "audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("line"))
        .find(|event| event["event_type"] == "run_resumed")
        .expect("run_resumed");
    assert_eq!(resumed_event["details"]["discarded_history_records"], 1);
}
