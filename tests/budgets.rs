//! Budgets: `max_steps`, `max_tool_calls` and `max_run_secs` end the run
//! naming the budget, a plan can only lower the policy's budget, the run
//! deadline counts the pause for approval, and the ticket demo cannot close
//! when no tool call remains.

use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::common::tickets::{PLAN, RUN, T_APPROVE, T_RESUME, T_RUN, close_count, event_types, ticket_sandbox};
use crate::common::{ROOT, Sandbox, TEST_POLICY};

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
    let sandbox = ticket_sandbox("open", 0);
    let plan = fs::read_to_string(Path::new(ROOT).join(PLAN))
        .expect("plan")
        .replace("max_tool_calls = 6", "max_tool_calls = 1");
    sandbox.write("plans/ticket_close.toml", &plan);
    sandbox.write(
        "policies/default.toml",
        &fs::read_to_string(Path::new(ROOT).join("policies/default.toml")).expect("policy"),
    );
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
