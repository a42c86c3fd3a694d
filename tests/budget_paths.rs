//! Budgets on every path (issue 8 item 5): the approved action of a paused
//! run, its receipt look-up and the verifier's fresh look-ups are tool calls
//! checked before they run, so a resume can never end `done` past
//! `max_tool_calls`, and what would exceed the budget is never applied.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::common::tickets::{PLAN, RUN, T_APPROVE, T_RESUME, T_RUN, close_count, event_types, ticket_sandbox};
use crate::common::{ROOT, Sandbox};

/// The ticket demo in a sandbox with `max_tool_calls = limit` in its own
/// copy of the plan (and the repository's default policy).
fn demo_with_tool_calls(limit: u64) -> Sandbox {
    let sandbox = ticket_sandbox("open", 0);
    let plan = fs::read_to_string(Path::new(ROOT).join(PLAN))
        .expect("plan")
        .replace("max_tool_calls = 6", &format!("max_tool_calls = {limit}"));
    sandbox.write("plans/ticket_close.toml", &plan);
    sandbox.write(
        "policies/default.toml",
        &fs::read_to_string(Path::new(ROOT).join("policies/default.toml")).expect("policy"),
    );
    sandbox
}

/// Pause, approve, resume the sandbox's own plan; returns the resume's exit
/// code after checking the pause and the approval went as documented.
fn pause_approve_resume(sandbox: &Sandbox) -> i32 {
    let args = ["--plan", "plans/ticket_close.toml", "--policies", "policies", "--run-id", RUN];
    sandbox.planrun().in_sandbox().args(args).clock(T_RUN).expect_code(3).run();
    sandbox.planrun().in_sandbox().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    assert_eq!(close_count(sandbox, "ticket-7"), 0, "approving executes nothing");
    sandbox.planrun().in_sandbox().args(["resume", RUN]).clock(T_RESUME).run().code
}

/// The run's `budget_exhausted` event.
fn budget_event(sandbox: &Sandbox) -> Value {
    sandbox
        .record(RUN, "audit.jsonl")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("audit line"))
        .find(|event| event["event_type"] == "budget_exhausted")
        .expect("a budget_exhausted event")
}

#[test]
fn an_approved_close_that_would_exceed_the_tool_calls_never_runs() {
    // The look-up spends one call; the approved close needs two more (its
    // receipt look-up and the close itself): 3 > 2.
    let sandbox = demo_with_tool_calls(2);
    assert_eq!(pause_approve_resume(&sandbox), 1);
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "failed");
    assert_eq!(state["stop_reason"], "budget_exhausted");
    assert_eq!(state["counters"]["tool_calls"], 1, "nothing past the budget was counted or run");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "the over-budget close was not applied");
    let event = budget_event(&sandbox);
    assert_eq!(event["step_id"], "close");
    let details = &event["details"];
    assert_eq!(details["budget"], "max_tool_calls");
    assert_eq!((details["limit"].as_u64(), details["used"].as_u64()), (Some(2), Some(1)));
    let events = event_types(&sandbox);
    for absent in ["receipt_lookup", "receipt_recorded", "step_finished", "completion_verified"] {
        // `step_finished` of the look-up is before the pause; none after it.
        let after_resume = events.iter().skip_while(|event| *event != "run_resumed");
        assert!(!after_resume.clone().any(|event| event == absent), "{absent} after the resume: {events:?}");
    }
    assert!(!sandbox.workspace().join(".planrun/receipts").exists(), "no receipt of a close that never ran");
}

#[test]
fn verifier_look_ups_that_would_exceed_the_tool_calls_never_run_and_the_run_is_not_done() {
    // Look-up 1 + receipt look-up 1 + close 1 = 3: the close fits, the
    // fresh ticket look-up of `[[verify]]` would be the fourth.
    let sandbox = demo_with_tool_calls(3);
    assert_eq!(pause_approve_resume(&sandbox), 1);
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "failed", "an unverified run is not done");
    assert_eq!(state["stop_reason"], "budget_exhausted");
    assert_eq!(state["counters"]["tool_calls"], 3);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "the close fitted and ran once");
    let event = budget_event(&sandbox);
    assert_eq!(event["details"]["budget"], "max_tool_calls");
    assert_eq!(event["step_id"], Value::Null, "past the last step: the verifier");
    assert!(!event_types(&sandbox).contains(&"completion_verified".to_string()), "no check ran");
    assert!(
        state["evidence"].as_array().expect("evidence").iter().all(|evidence| evidence["kind"] != "verify"),
        "no verifier evidence: {}",
        state["evidence"]
    );
}

#[test]
fn the_whole_demo_fits_its_own_budget_exactly() {
    // 1 look-up + 2 for the approved close + 1 fresh look-up = 4.
    let sandbox = demo_with_tool_calls(4);
    assert_eq!(pause_approve_resume(&sandbox), 0);
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done");
    assert_eq!(state["counters"]["tool_calls"], 4);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
}
