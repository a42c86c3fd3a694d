//! The demo ticket store's behaviour under faults, through real runs: the
//! injected transient look-up failures of `tickets.json`'s
//! `fail_next_lookups` are retried within the policy's budget and no
//! further (the ticket demo still pauses with nothing closed), and a ticket
//! that does not exist is `not_found`, tried once.

use serde_json::{Value, json};

use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, close_count, pause, ticket_sandbox, tickets};
use crate::common::{Sandbox, TEST_POLICY, one_step_plan};

/// A sandbox whose plan looks up `ticket_id` (the test policy retries an
/// `execution_error` twice in all) and whose `tickets.json` holds an open
/// `ticket-7` plus the top-level fields of `extra`.
fn lookup_sandbox(ticket_id: &str, extra: Value) -> Sandbox {
    let sandbox = Sandbox::new();
    let mut store = json!({"tickets": {"ticket-7": {"status": "open", "customer_note": "hi", "close_count": 0}}});
    if let (Value::Object(store), Value::Object(extra)) = (&mut store, extra) {
        store.extend(extra);
    }
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
    let step = format!("kind = \"ticket_lookup\"\nticket_id = \"{ticket_id}\"");
    sandbox.write_plan(&one_step_plan(&step), TEST_POLICY);
    sandbox
}

/// `(attempt, status, failure_class)` of each history line of the look-up.
fn lookup_attempts(sandbox: &Sandbox) -> Vec<(u64, String, Value)> {
    sandbox
        .history("t")
        .iter()
        .filter(|line| line["step_id"] == "step-1")
        .map(|line| {
            (
                line["attempt"].as_u64().expect("attempt"),
                line["status"].as_str().expect("status").to_string(),
                line["failure_class"].clone(),
            )
        })
        .collect()
}

#[test]
fn one_injected_transient_failure_is_retried_and_the_run_ends_done() {
    let sandbox = lookup_sandbox("ticket-7", json!({"fail_next_lookups": 1}));
    let output = sandbox.test_plan().expect_code(0).run();
    assert_eq!(sandbox.state("t")["status"], "done", "{}", output.snapshot());
    assert_eq!(
        lookup_attempts(&sandbox),
        [(1, "failed".to_string(), json!("execution_error")), (2, "done".to_string(), Value::Null)]
    );
    let first = &sandbox.history("t")[0];
    assert!(first["error"].as_str().expect("error").contains("injected transient failure"), "{first}");
    // The one injected failure is spent: the field is gone, the ticket untouched.
    let store = tickets(&sandbox);
    assert_eq!(store.get("fail_next_lookups"), None);
    assert_eq!(store["tickets"]["ticket-7"], json!({"status": "open", "customer_note": "hi", "close_count": 0}));
}

#[test]
fn transient_failures_beyond_the_retry_budget_end_the_run_failed() {
    let sandbox = lookup_sandbox("ticket-7", json!({"fail_next_lookups": 5}));
    sandbox.test_plan().expect_code(1).run();
    let state = sandbox.state("t");
    assert_eq!(state["status"], "failed");
    assert_eq!(state["stop_reason"], "step_failed");
    let error = state["error"].as_str().expect("error");
    assert!(error.starts_with("step `step-1` failed (execution_error): ticket system unavailable"), "{error}");
    assert_eq!(
        lookup_attempts(&sandbox),
        [(1, "failed".to_string(), json!("execution_error")), (2, "failed".to_string(), json!("execution_error"))]
    );
    // Exactly the two attempts the budget allows asked the store: 5 - 2 left.
    assert_eq!(tickets(&sandbox)["fail_next_lookups"], json!(3));
    assert!(!sandbox.history("t").iter().any(|line| line["step_id"] == "step-2"), "the finish step never ran");
}

#[test]
fn an_unknown_ticket_fails_once_as_not_found_with_no_retry() {
    let sandbox = lookup_sandbox("ticket-99", json!({}));
    let before = tickets(&sandbox);
    let output = sandbox.test_plan().expect_code(1).run();
    let state = sandbox.state("t");
    assert_eq!(state["status"], "failed");
    assert_eq!(state["error"], "step `step-1` failed (not_found): ticket `ticket-99` does not exist");
    assert_eq!(state["counters"]["tool_calls"], 1);
    assert_eq!(lookup_attempts(&sandbox), [(1, "failed".to_string(), json!("not_found"))]);
    assert_eq!(sandbox.history("t").len(), 1, "exactly one attempt, nothing after it");
    assert!(output.stderr.contains("ticket `ticket-99` does not exist"), "{}", output.snapshot());
    assert_eq!(tickets(&sandbox), before, "the store is unchanged");
}

#[test]
fn the_ticket_demo_retries_an_injected_look_up_failure_and_still_pauses_with_nothing_closed() {
    let sandbox = ticket_sandbox("open", 0);
    let mut store = tickets(&sandbox);
    store["fail_next_lookups"] = json!(1);
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
    pause(&sandbox);
    let lookups: Vec<(Value, Value)> = sandbox
        .history(RUN)
        .iter()
        .filter(|line| line["step_id"] == "lookup")
        .map(|line| (line["attempt"].clone(), line["failure_class"].clone()))
        .collect();
    assert_eq!(lookups, [(json!(1), json!("execution_error")), (json!(2), Value::Null)]);
    assert_eq!(sandbox.state(RUN)["status"], "waiting_approval");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
    assert_eq!(tickets(&sandbox).get("fail_next_lookups"), None);
}

#[test]
fn a_transient_failure_of_the_verifiers_look_up_is_retried_and_the_close_is_verified() {
    // Issue 22 item 8: the verifier's fresh look-up failed once and the run
    // ended `verification_failed` after a successful close.
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    let mut store = tickets(&sandbox);
    store["fail_next_lookups"] = json!(1);
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
    let output = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).run();
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done", "{state}");
    // The look-up, the receipt look-up and the close, and two attempts of
    // the verifier's look-up.
    assert_eq!(state["counters"]["tool_calls"], 5);
    let verified: Vec<&Value> = state["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .filter(|evidence| evidence["kind"] == "verify")
        .collect();
    assert!(verified.iter().all(|evidence| evidence["passed"] == true), "{verified:?}");
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(tickets(&sandbox).get("fail_next_lookups"), None, "the injected failure was spent by the verifier");
}

/// Issue 22 item 6: `tickets.json` is read as strict JSON. A ticket whose
/// `status` is given twice was read as its last value; `NaN` and a second
/// object after the first were refused only as "expected value" or
/// "trailing characters". Each now fails the look-up `invalid_tool_result`
/// (tried once, nothing written back) with a message naming what is wrong.
#[test]
fn a_tickets_file_that_is_not_strict_json_fails_the_look_up_by_name() {
    let ticket = r#""ticket-7": {"status": "closed", "customer_note": "hi", "close_count": 0"#;
    for (text, named) in [
        (format!(r#"{{"tickets": {{{ticket}, "status": "open"}}}}"#), "duplicate key `status`"),
        (format!(r#"{{"tickets": {{{ticket}}}}}, "score": NaN}}"#), "`NaN` is not a JSON number"),
        (format!(r#"{{"tickets": {{{ticket}}}}}}}{{"tickets": {{}}}}"#), "trailing data after the JSON value"),
    ] {
        let sandbox = lookup_sandbox("ticket-7", json!({}));
        sandbox.write("workspace/tickets.json", &text);
        let output = sandbox.test_plan().expect_code(1).run();
        assert_eq!(lookup_attempts(&sandbox), [(1, "failed".to_string(), json!("invalid_tool_result"))], "{text}");
        let error = sandbox.history("t")[0]["error"].as_str().unwrap_or_default().to_string();
        assert!(error.contains("`tickets.json` is not strict JSON") && error.contains(named), "{text}: {error}");
        assert_eq!(std::fs::read_to_string(sandbox.workspace().join("tickets.json")).expect("tickets"), text);
        assert!(output.code == 1, "{}", output.snapshot());
    }
}
