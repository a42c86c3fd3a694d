//! Receipts the effect vouches for (issue 8 items 4 and 7): a keyed ticket
//! close keeps its receipt in `tickets.json` in the same atomic write as
//! the close, and recovery asks the ticket system before anything else; a
//! receipt of the runtime's own is validated and never stands in for the
//! effect's answer — a hand-written `done` receipt cannot make an approved
//! close "recovered" without running.

use std::fs;

use planrun::store::canonical::{canonical_digest, sha256_hex};
use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, close_count, pause, ticket_sandbox, tickets};

const KEY: &str = "close-ticket-7-t";

/// The intent digest of the demo's close, as the runtime computes it.
fn intent() -> String {
    canonical_digest(&json!({
        "kind": "ticket_close",
        "action": {"kind": "ticket_close", "ticket_id": "ticket-7"},
        "idempotency_key": KEY,
    }))
}

/// Writes the runtime's own receipt for the demo's key by hand.
fn forge_runtime_receipt(sandbox: &Sandbox, result: Value) {
    let dir = sandbox.workspace().join(".planrun/receipts");
    fs::create_dir_all(&dir).expect("receipts dir");
    let receipt = json!({
        "key": KEY, "intent_digest": intent(), "state": "done", "run_id": RUN, "step_id": "close",
        "action": {"kind": "ticket_close", "ticket_id": "ticket-7"}, "result": result,
        "started_at": "2026-01-01T00:05:00Z", "completed_at": "2026-01-01T00:05:01Z",
    });
    let path = dir.join(format!("{}.json", sha256_hex(KEY.as_bytes())));
    fs::write(path, serde_json::to_string_pretty(&receipt).expect("JSON")).expect("write receipt");
}

/// Pause and approve the demo.
fn approved() -> Sandbox {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    sandbox
}

fn evidence_kinds(sandbox: &Sandbox) -> Vec<String> {
    let state = sandbox.state(RUN);
    state["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_keyed_close_keeps_its_receipt_in_the_ticket_store() {
    let sandbox = approved();
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
    let store = tickets(&sandbox);
    assert_eq!(store["tickets"]["ticket-7"]["close_count"], 1);
    assert_eq!(store["receipts"][KEY]["intent_digest"], intent());
    assert_eq!(store["receipts"][KEY]["result"]["output_json"]["status"], "closed");
}

#[test]
fn hand_written_done_receipts_do_not_make_an_approved_close_recovered_without_running() {
    for result in [json!({}), json!({"output_text": "ticket-7: closed", "output_json": {"status": "closed"}})] {
        let sandbox = approved();
        forge_runtime_receipt(&sandbox, result.clone());
        sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
        assert_eq!(close_count(&sandbox, "ticket-7"), 1, "{result}: the close really ran");
        assert_eq!(tickets(&sandbox)["tickets"]["ticket-7"]["status"], "closed");
        let kinds = evidence_kinds(&sandbox);
        assert_eq!(kinds[0], "receipt", "{result}: not recovered: {kinds:?}");
        let history = sandbox.history(RUN);
        assert_eq!(history[1]["details"].get("receipt"), None, "{result}: no reused receipt");
    }
}

#[test]
fn a_crash_between_the_close_and_the_runtime_receipt_is_recovered_from_the_ticket_store() {
    let sandbox = approved();
    let crashed =
        sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).env("PLANRUN_CRASH_AT", "close:before_receipt").run();
    assert_eq!(crashed.code, -1, "{}", crashed.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "the close happened before the crash");
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "recovery did not close again");
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done", "no tool_result_uncertain: the ticket store answered");
    assert_eq!(state["reconciliation"], Value::Null);
    assert_eq!(evidence_kinds(&sandbox)[0], "recovered_from_receipt");
    assert_eq!(sandbox.history(RUN)[1]["details"]["vouched_by"], "ticket_store");
}

#[test]
fn a_ticket_store_receipt_for_another_intent_is_a_conflict_and_nothing_closes() {
    let sandbox = approved();
    let mut store = tickets(&sandbox);
    store["receipts"] =
        json!({KEY: {"intent_digest": "0".repeat(64), "result": {"output_text": "x", "output_json": null}}});
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(1).run();
    assert_eq!(sandbox.state(RUN)["stop_reason"], "idempotency_conflict");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_started_close_the_ticket_store_cannot_answer_for_ends_uncertain_with_a_reconciliation_record() {
    let sandbox = approved();
    let crashed =
        sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).env("PLANRUN_CRASH_AT", "close:before_receipt").run();
    assert_eq!(crashed.code, -1);
    // The ticket system's receipt is damaged: it cannot say whether the
    // close was applied, and the runtime's note says only `started`.
    let mut store = tickets(&sandbox);
    store["receipts"][KEY]["result"] = json!({});
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN).expect_code(1).run();
    let state = sandbox.state(RUN);
    assert_eq!(state["stop_reason"], "tool_result_uncertain");
    assert_eq!(state["reconciliation"]["idempotency_key"], KEY);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "never a blind retry");
}
