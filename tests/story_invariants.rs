//! The semantic invariants of a loaded run (issue 8 items 6 and 10): a
//! re-sealed checkpoint whose story the plan could not have produced is
//! refused by `approve` and `resume` with exit 2 and nothing runs — a
//! frozen action re-targeted with its fingerprint recomputed, a waiting run
//! whose look-up is gone from the history, a `done` run without evidence,
//! an empty pending step id — and an approval is only valid while
//! `approved_at <= now < expires_at`, so setting the clock back does not
//! revive an expired one.

use std::fs;

use planrun::runtime::approval::fingerprint;
use planrun::store::canonical::{canonical_json, sha256_hex};
use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RUN, close_count, pause, records, ticket_sandbox, tickets};

/// Rewrites the checkpoint's payload and re-seals it with a valid plain
/// SHA-256 — what anyone who can write the file can do without a key.
fn reseal(sandbox: &Sandbox, edit: impl FnOnce(&mut Value)) {
    let path = sandbox.workspace().join("runs").join(RUN).join("state.json");
    let mut envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("state")).expect("JSON");
    edit(&mut envelope["payload"]);
    let digest = sha256_hex(canonical_json(&envelope["payload"]).expect("canonical").as_bytes());
    envelope["sha256"] = json!(digest);
    fs::write(&path, serde_json::to_string_pretty(&envelope).expect("JSON")).expect("write");
}

/// Points the frozen close at `ticket` and recomputes its fingerprint (and
/// the approval's, when there is one), so every self-check still passes.
fn retarget(payload: &mut Value, ticket: &str) {
    let pending = &mut payload["pending_action"];
    pending["action"]["ticket_id"] = json!(ticket);
    pending["scope"] = json!(format!("ticket:{ticket}"));
    let print = fingerprint(
        pending["kind"].as_str().expect("kind"),
        &pending["action"],
        pending["risk"].as_str().expect("risk"),
        pending["idempotency_key"].as_str(),
        pending["scope"].as_str().expect("scope"),
    );
    pending["fingerprint"] = json!(print);
    let scope = pending["scope"].clone();
    if payload["approval"].is_object() {
        payload["approval"]["fingerprint"] = json!(print);
        payload["approval"]["scope"] = scope;
    }
}

/// `command` on run `t` is refused as bad records (exit 2) naming `why`,
/// and changes neither the records nor the tickets.
fn refused(sandbox: &Sandbox, command: &str, why: &str) {
    let (before, tickets_before) = (records(sandbox), tickets(sandbox));
    let output = sandbox.planrun().args([command, RUN]).clock(T_RESUME).expect_code(2).run();
    assert!(output.stderr.contains("do not tell a story"), "{command}: {}", output.stderr);
    assert!(output.stderr.contains(why), "{command}: {}", output.stderr);
    assert_eq!(records(sandbox), before, "{command} changed the records");
    assert_eq!(tickets(sandbox), tickets_before, "{command} touched the tickets");
}

#[test]
fn a_frozen_action_retargeted_and_resealed_is_refused_by_approve_and_resume() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    reseal(&sandbox, |payload| retarget(payload, "ticket-8"));
    refused(&sandbox, "approve", "is not the plan's step rendered from the verified record");
    refused(&sandbox, "resume", "is not the plan's step rendered from the verified record");
    assert_eq!(close_count(&sandbox, "ticket-8"), 0, "ticket-8 untouched");
    assert_eq!(tickets(&sandbox)["tickets"]["ticket-8"]["status"], "open");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn an_approved_action_retargeted_with_its_approval_is_refused_by_resume() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    reseal(&sandbox, |payload| retarget(payload, "ticket-8"));
    refused(&sandbox, "resume", "is not the plan's step rendered from the verified record");
    assert_eq!(close_count(&sandbox, "ticket-8"), 0, "ticket-8 untouched");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_waiting_run_whose_look_up_left_the_history_is_refused() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    fs::write(sandbox.workspace().join("runs").join(RUN).join("history.jsonl"), "").expect("empty history");
    // Without the HMAC key, an attacker can also re-seal the history chain's
    // head (an empty history has none): the store then verifies, and the
    // story check is what refuses.
    reseal(&sandbox, |payload| {
        payload["counters"]["history_records"] = json!(0);
        payload["history_hash"] = json!(null);
    });
    refused(&sandbox, "approve", "step `lookup` is before the cursor but has no record");
    refused(&sandbox, "resume", "step `lookup` is before the cursor but has no record");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn an_empty_pending_step_id_is_refused() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    reseal(&sandbox, |payload| payload["pending_action"]["step_id"] = json!(""));
    refused(&sandbox, "approve", "`pending_action.step_id` is empty");
    refused(&sandbox, "resume", "`pending_action.step_id` is empty");
}

/// The ticket demo paused, approved and resumed to `done`.
fn done_run() -> Sandbox {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(0).run();
    sandbox
}

#[test]
fn a_done_run_without_its_evidence_is_refused() {
    let sandbox = done_run();
    // An honest ended run is refused as ended (exit 1), not as forged.
    let ended = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(1).run();
    assert!(ended.stderr.contains("already ended"), "{}", ended.stderr);
    reseal(&sandbox, |payload| payload["evidence"] = json!([]));
    refused(&sandbox, "resume", "verify evidence for the plan's 2 `[[verify]]` checks");
}

#[test]
fn a_done_run_whose_receipt_evidence_is_not_bound_to_what_ran_is_refused() {
    let sandbox = done_run();
    reseal(&sandbox, |payload| {
        for evidence in payload["evidence"].as_array_mut().expect("evidence") {
            if evidence["kind"] == "receipt" {
                evidence["detail"]["intent_digest"] = json!("0".repeat(64));
            }
        }
    });
    refused(&sandbox, "resume", "no receipt evidence is bound to its intent");
}

#[test]
fn an_expired_approval_stays_expired_when_the_clock_goes_back() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN, "--expires-in", "60s"]).clock(T_APPROVE).expect_code(0).run();
    let before = records(&sandbox);
    // Ten minutes after the approval it has expired…
    let expired = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(1).run();
    assert!(expired.stderr.contains("expired"), "{}", expired.stderr);
    // …and a clock set back before the approval does not revive it.
    let back = sandbox.planrun().args(["resume", RUN]).clock(T_RUN).expect_code(1).run();
    assert!(back.stderr.contains("approval_invalid"), "{}", back.stderr);
    assert!(back.stderr.contains("the clock went back"), "{}", back.stderr);
    assert_eq!(records(&sandbox), before);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}
