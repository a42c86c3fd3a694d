//! Budgets: `max_steps`, `max_tool_calls` and `max_run_secs` end the run
//! naming the budget, a plan can only lower the policy's budget, the run
//! deadline counts the pause for approval, and the ticket demo cannot close
//! when no tool call remains.

use serde_json::Value;

use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RUN, close_count, demo_with_tool_calls, event_types};
use crate::common::{Sandbox, TEST_POLICY};

#[test]
fn budgets_end_the_run_naming_the_budget() {
    let steps = |count: usize| -> String {
        (1..=count)
            .map(|index| format!("\n[[steps]]\nid = \"s{index}\"\nkind = \"shell\"\ncommand = [\"pwd\"]\n"))
            .collect()
    };
    for (budget, expected, used) in [
        ("max_steps = 2", "max_steps", 2),
        ("max_tool_calls = 1", "max_tool_calls", 1),
        ("max_run_secs = 4", "max_run_secs", 4),
    ] {
        let sandbox = Sandbox::new();
        let plan = format!("version = 1\nid = \"test\"\n\n[budget]\n{budget}\n{}", steps(5));
        let output = sandbox.run_plan(&plan, TEST_POLICY);
        assert_eq!(output.code, 1, "{budget}: {}", output.snapshot());
        let state = sandbox.state("t");
        assert_eq!(state["stop_reason"], "budget_exhausted", "{budget}");
        let audit = sandbox.record("t", "audit.jsonl");
        let event = audit
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("line"))
            .find(|event| event["event_type"] == "budget_exhausted")
            .expect("budget event");
        assert_eq!(event["details"]["budget"], expected, "{budget}");
        assert!(event["details"]["used"].as_u64() >= Some(used), "{budget}: {event}");
        assert!(sandbox.history("t").len() < 5, "{budget}: the budget did not stop the run");
    }
}

#[test]
fn a_plan_can_only_lower_the_policy_budget() {
    let sandbox = Sandbox::new();
    let policy = TEST_POLICY.replace("[budget]\n", "[budget]\nmax_steps = 2\n");
    let mut plan = String::from("version = 1\nid = \"test\"\n\n[budget]\nmax_steps = 100\n");
    for index in 1..=4 {
        plan.push_str(&format!("\n[[steps]]\nid = \"s{index}\"\nkind = \"shell\"\ncommand = [\"pwd\"]\n"));
    }
    let output = sandbox.run_plan(&plan, &policy);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert_eq!(sandbox.history("t").len(), 2);
}

#[test]
fn the_ticket_cannot_close_when_no_tool_call_remains() {
    let sandbox = demo_with_tool_calls("open", 0, 1);
    // The look-up spends the only tool call: the close step stops the run
    // before it would even ask for approval.
    sandbox
        .planrun()
        .in_sandbox()
        .args(["--plan", "plans/ticket_close.toml", "--policies", "policies", "--run-id", RUN])
        .expect_code(1)
        .run();
    assert_eq!(sandbox.state(RUN)["stop_reason"], "budget_exhausted");
    assert!(!event_types(&sandbox).contains(&"approval_requested".to_string()));
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn an_already_closed_ticket_is_already_satisfied_even_with_one_tool_call() {
    // Issue 22 item 8: the look-up spends the only call; the close step's
    // `when` is false (it calls no tool), and the verifier's look-up of a
    // goal that already held is not refused by the budget.
    let sandbox = demo_with_tool_calls("closed", 1, 1);
    let output = sandbox
        .planrun()
        .in_sandbox()
        .args(["--plan", "plans/ticket_close.toml", "--policies", "policies", "--run-id", RUN])
        .run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done");
    assert_eq!(state["stop_reason"], "already_satisfied");
    assert_eq!(state["counters"]["tool_calls"], 2, "the look-up and the verifier's look-up");
    let events = event_types(&sandbox);
    assert!(!events.contains(&"budget_exhausted".to_string()), "{events:?}");
    assert!(events.contains(&"completion_verified".to_string()), "{events:?}");
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "nothing closed again");
}

#[test]
fn the_run_deadline_counts_the_pause_for_approval() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[budget]\nmax_run_secs = 60\n\n[[steps]]\nid = \"ask\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\napproval = \"required\"\n";
    sandbox.write_plan(plan, TEST_POLICY);
    sandbox.test_plan().clock(T_RUN).expect_code(3).run();
    sandbox.planrun().in_sandbox().args(["approve", "t"]).clock(T_APPROVE).expect_code(0).run();
    sandbox.planrun().in_sandbox().args(["resume", "t"]).clock(T_RESUME).expect_code(1).run();
    assert_eq!(sandbox.state("t")["stop_reason"], "budget_exhausted");
    assert!(!sandbox.workspace().join("a.txt").exists(), "the approved action ran after the deadline");
}
