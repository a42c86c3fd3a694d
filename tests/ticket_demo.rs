//! The ticket demo (`plans/ticket_close.toml`):
//! the close step pauses for approval, approve then resume closes the ticket
//! once and verifies it, an already closed ticket needs nothing, the ticket's
//! own data can neither choose a target nor pass as a valid result, and
//! `planrun demo` runs the whole story. The golden snapshots of the
//! trajectories are declared in `plans/ticket_close.scenarios.toml` and
//! pinned by `tests/scenarios.rs` in `snapshots/bounded/`.

use serde_json::{Value, json};

use crate::common::tickets::{
    PLAN, RUN, T_APPROVE, T_RESUME, T_RUN, close_count, event_types, pause, ticket_sandbox, tickets,
};
use crate::common::{Sandbox, TEST_POLICY};

#[test]
fn the_close_step_pauses_for_approval_with_nothing_closed() {
    let sandbox = ticket_sandbox("open", 0);
    let output = pause(&sandbox);
    assert!(output.stderr.contains("waiting_approval"), "{}", output.stderr);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "waiting_approval");
    assert_eq!(state["pending_action"]["action"], json!({"kind": "ticket_close", "ticket_id": "ticket-7"}));
    assert_eq!(state["pending_action"]["scope"], "ticket:ticket-7");
}

#[test]
fn approve_then_resume_closes_once_and_verifies() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let fingerprint = sandbox.state(RUN)["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    let approve = sandbox
        .planrun()
        .args(["approve", RUN, "--fingerprint", &fingerprint, "--by", "ops"])
        .clock(T_APPROVE)
        .expect_code(0)
        .run();
    assert!(approve.stdout.contains(&fingerprint), "approve shows the fingerprint: {}", approve.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "approving executes nothing");
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(close_count(&sandbox, "ticket-8"), 0, "the malicious note changed no target");
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done");
    let kinds: Vec<&str> =
        state["evidence"].as_array().expect("evidence").iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["receipt", "verify", "verify"]);
}

#[test]
fn an_already_closed_ticket_completes_without_approval_or_write() {
    let sandbox = ticket_sandbox("closed", 1);
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).clock(T_RUN).expect_code(0).run();
    let state = sandbox.state(RUN);
    assert_eq!(state["stop_reason"], "already_satisfied");
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert!(!event_types(&sandbox).contains(&"approval_requested".to_string()));
    assert!(!sandbox.workspace().join(".planrun/receipts").exists(), "no write, no receipt");
}

#[test]
fn the_demo_command_prints_its_summary() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path().join("demo");
    let output = sandbox.planrun().args(["demo", "--dir"]).arg(&dir).expect_code(0).run();
    let summary: Value = serde_json::from_str(&output.stdout).expect("JSON summary");
    assert_eq!(summary["status"], "ok");
    assert_eq!(summary["phase"], "completed");
    assert_eq!(summary["close_count"], 1);
    assert!(
        summary["checklist"].as_object().expect("checklist").values().all(|value| value == &json!(true)),
        "{summary}"
    );
    let again = sandbox.planrun().args(["demo", "--dir"]).arg(&dir).run();
    assert_eq!(again.code, 2, "the demo refuses an existing folder: {}", again.snapshot());
}

#[test]
fn the_customer_note_can_never_choose_a_target() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"lookup\"\nkind = \"ticket_lookup\"\nticket_id = \"ticket-7\"\n\n[[steps]]\nid = \"close\"\nkind = \"ticket_close\"\nticket_id = \"{{ steps.lookup.output_json.customer_note }}\"\n";
    let output = sandbox.run_plan(plan, TEST_POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("untrusted-control-field"), "{}", output.stderr);
    let key = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"lookup\"\nkind = \"ticket_lookup\"\nticket_id = \"ticket-7\"\n\n[[steps]]\nid = \"close\"\nkind = \"ticket_close\"\nticket_id = \"ticket-7\"\nidempotency_key = \"{{ steps.lookup.output_text }}\"\n";
    let output = sandbox.run_plan(key, TEST_POLICY);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(!sandbox.workspace().exists());
}

#[test]
fn a_malformed_ticket_is_an_invalid_tool_result_and_nothing_is_written() {
    let sandbox = ticket_sandbox("open", 0);
    let mut data = tickets(&sandbox);
    data["tickets"]["ticket-7"]["close_count"] = json!("zero");
    sandbox.write("workspace/tickets.json", &serde_json::to_string(&data).expect("JSON"));
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).clock(T_RUN).expect_code(1).run();
    assert_eq!(sandbox.history(RUN)[0]["failure_class"], "invalid_tool_result");
    assert!(!event_types(&sandbox).contains(&"approval_requested".to_string()));
}
