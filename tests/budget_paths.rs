//! Budgets on every path (issue 8 item 5, issue 22 item 8): the approved
//! action of a paused run, its receipt look-up and the verifier's fresh
//! look-ups are tool calls checked before they run, so a resume can never
//! end `done` past `max_tool_calls`, and what would exceed the budget is
//! never applied. The verifier's look-ups are kept in reserve from the
//! first step that may change the world on, so no effect runs whose
//! verification would not fit.

use serde_json::Value;

use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RUN, close_count, demo_with_tool_calls, event_types};
use crate::common::{Sandbox, TEST_POLICY};

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
fn an_approved_close_whose_verification_would_not_fit_never_runs() {
    // Issue 22 item 8: with 3, the close used to run and the run then ended
    // `budget_exhausted` at the verifier. The look-up spends one call; the
    // approved close needs three more (its receipt look-up, the close, and
    // the fresh look-up of `[[verify]]` kept in reserve): 4 > 3.
    let sandbox = demo_with_tool_calls("open", 0, 3);
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
    assert_eq!((details["limit"].as_u64(), details["used"].as_u64()), (Some(3), Some(1)));
    let events = event_types(&sandbox);
    for absent in ["receipt_lookup", "receipt_recorded", "step_finished", "completion_verified"] {
        // `step_finished` of the look-up is before the pause; none after it.
        let after_resume = events.iter().skip_while(|event| *event != "run_resumed");
        assert!(!after_resume.clone().any(|event| event == absent), "{absent} after the resume: {events:?}");
    }
    assert!(!sandbox.workspace().join(".planrun/receipts").exists(), "no receipt of a close that never ran");
}

#[test]
fn a_close_whose_verification_would_not_fit_is_refused_before_its_approval_is_asked() {
    // The close (1) and the verifier's look-up (1) after the look-up (1): 3 > 2.
    let sandbox = demo_with_tool_calls("open", 0, 2);
    let args = ["--plan", "plans/ticket_close.toml", "--policies", "policies", "--run-id", RUN];
    sandbox.planrun().in_sandbox().args(args).clock(T_RUN).expect_code(1).run();
    let state = sandbox.state(RUN);
    assert_eq!(state["stop_reason"], "budget_exhausted");
    assert_eq!(state["counters"]["tool_calls"], 1);
    let event = budget_event(&sandbox);
    assert_eq!(event["step_id"], "close");
    assert_eq!((event["details"]["limit"].as_u64(), event["details"]["used"].as_u64()), (Some(2), Some(1)));
    let events = event_types(&sandbox);
    assert!(!events.contains(&"approval_requested".to_string()), "no approval asked: {events:?}");
    assert!(!events.contains(&"completion_verified".to_string()), "{events:?}");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_step_after_the_effect_cannot_spend_the_verifiers_calls() {
    // write (1) + the verifier's read (1) fit in 2; the `pwd` after the
    // write would leave no call for the verifier, so it never runs and the
    // run is not `done` (nor does it run the verifier past the budget).
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[budget]\nmax_tool_calls = 2\n\n[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\n\n[[steps]]\nid = \"after\"\nkind = \"shell\"\ncommand = [\"pwd\"]\n\n[[verify]]\nkind = \"file\"\npath = \"a.txt\"\n";
    let output = sandbox.run_plan(plan, TEST_POLICY);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let state = sandbox.state("t");
    assert_eq!(state["stop_reason"], "budget_exhausted");
    assert_eq!(state["counters"]["tool_calls"], 1);
    let step_ids: Vec<Value> = sandbox.history("t").iter().map(|line| line["step_id"].clone()).collect();
    assert_eq!(step_ids, ["write"], "the step after the effect never ran");
}

#[test]
fn the_whole_demo_fits_its_own_budget_exactly() {
    // 1 look-up + 2 for the approved close + 1 fresh look-up = 4.
    let sandbox = demo_with_tool_calls("open", 0, 4);
    assert_eq!(pause_approve_resume(&sandbox), 0);
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done");
    assert_eq!(state["counters"]["tool_calls"], 4);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
}
