//! The semantic invariants of a loaded run (issue 8 items 6 and 10): a
//! re-sealed checkpoint whose story the plan could not have produced is
//! refused by `approve` and `resume` with exit 2 and nothing runs — a
//! frozen action re-targeted with its fingerprint recomputed, a waiting run
//! whose look-up is gone from the history, a `done` run without evidence,
//! an empty pending step id — and an approval is only valid while
//! `approved_at <= now < expires_at`, so setting the clock back does not
//! revive an expired one. `verify`, `show` and `runs` make the same
//! checks and refuse such a run alike (issue 22 item 7).

use std::fs;

use planrun::runtime::approval::fingerprint;
use planrun::store::canonical::{canonical_json, sha256_hex};
use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::common::tickets::{RUN, T_APPROVE, T_RESUME, T_RUN, close_count, pause, records, ticket_sandbox, tickets};

/// Rewrites the run's checkpoint — the last head line of `audit.jsonl`
/// and `state.json`, its compact copy — with `edit` applied, and
/// recomputes every plain link: the log's chain and seals, the compact
/// head's link to its line and its SHA-256 — what anyone who can write the
/// folder can do without a key. `drop_history` also removes every step
/// record from the log.
fn reseal_log(sandbox: &Sandbox, drop_history: bool, edit: impl Fn(&mut Value)) {
    let folder = sandbox.workspace().join("runs").join(RUN);
    let text = fs::read_to_string(folder.join("audit.jsonl")).expect("log");
    let mut events: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    let last_head = events.iter().rposition(|event| event["details"].get("checkpoint").is_some()).expect("a head");
    for event in events.iter_mut().filter(|event| event["details"].get("checkpoint").is_some()) {
        if drop_history {
            event["details"]["checkpoint"]["history"] = json!([]);
        }
    }
    edit(&mut events[last_head]["details"]["checkpoint"]["state"]);
    let (mut previous, mut lines) = (None::<String>, Vec::new());
    for mut event in events {
        event["prev_hash"] = json!(previous);
        if let Some(object) = event.as_object_mut()
            && object.remove("seal").is_some()
        {
            let unsealed = serde_json::to_string(object).expect("JSON");
            object.insert("seal".into(), json!(sha256_hex(unsealed.as_bytes())));
        }
        let line = serde_json::to_string(&event).expect("JSON");
        previous = Some(sha256_hex(line.as_bytes()));
        lines.push(line);
    }
    let head_hash = sha256_hex(lines[last_head].as_bytes());
    fs::write(folder.join("audit.jsonl"), lines.iter().map(|line| format!("{line}\n")).collect::<String>())
        .expect("write");
    let path = folder.join("state.json");
    let mut envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("state")).expect("JSON");
    edit(&mut envelope["payload"]);
    envelope["payload"]["audit_hash"] = json!(head_hash);
    let digest = sha256_hex(canonical_json(&envelope["payload"]).expect("canonical").as_bytes());
    envelope["sha256"] = json!(digest);
    fs::write(&path, serde_json::to_string_pretty(&envelope).expect("JSON")).expect("write");
}

/// [`reseal_log`] without touching the step records.
fn reseal(sandbox: &Sandbox, edit: impl Fn(&mut Value)) {
    reseal_log(sandbox, false, edit);
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

/// Issue 22 item 7: what `approve` and `resume` refuse, `verify` refuses
/// too, naming the check (`why`), `show` says the run failed verification,
/// and `runs` lists it as unreadable, never as a run with a status
/// (exit 2 from each). Before, all three passed such a run as verified.
fn not_verified(sandbox: &Sandbox, why: &str) {
    refused(sandbox, "verify", why);
    refused(sandbox, "show", why);
    let shown = sandbox.planrun().args(["show", RUN]).clock(T_RESUME).expect_code(2).run();
    assert!(shown.stderr.contains("failed verification"), "{}", shown.stderr);
    let listed = sandbox.planrun().args(["runs", "--json"]).clock(T_RESUME).expect_code(2).run();
    let runs: Value = serde_json::from_str(&listed.stdout).expect("runs --json");
    assert_eq!(runs[0]["status"], "unreadable", "{}", listed.stdout);
    assert!(runs[0]["error"].as_str().is_some_and(|error| error.contains(why)), "{}", listed.stdout);
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
    not_verified(&sandbox, "is not the plan's step rendered from the verified record");
    assert_eq!(close_count(&sandbox, "ticket-8"), 0, "ticket-8 untouched");
    assert_eq!(tickets(&sandbox)["tickets"]["ticket-8"]["status"], "open");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

/// An agent step's write, frozen for approval and re-targeted with its
/// fingerprint recomputed: the frozen action is no longer what the
/// recorded model answer proposed.
#[test]
fn an_agent_proposal_retargeted_and_resealed_is_refused_and_the_model_is_not_asked() {
    use crate::common::fake_model::{action, finish, profile, start};
    let model = start(vec![action("ticket_close", json!({"ticket_id": "ticket-7"})), finish("closed")]);
    let sandbox = ticket_sandbox("open", 0);
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"triage\"\nkind = \"agent\"\n\
                goal = \"Close ticket-7.\"\ntools = [\"ticket_close\"]\nmodel = \"fake\"\nmax_turns = 3\n\n\
                [[verify]]\nkind = \"ticket_status\"\nticket_id = \"ticket-7\"\nequals = \"closed\"\n";
    sandbox.write_plan(plan, &format!("{}\n{}", crate::common::TEST_POLICY, profile(&model)));
    sandbox.test_plan().clock(T_RUN).expect_code(3).run();
    assert_eq!(sandbox.state(RUN)["pending_action"]["required_by"], "risk");
    reseal(&sandbox, |payload| retarget(payload, "ticket-8"));
    let why = "the frozen action of agent step `triage` is not what the recorded answer proposed";
    refused(&sandbox, "approve", why);
    refused(&sandbox, "resume", why);
    not_verified(&sandbox, why);
    assert_eq!((close_count(&sandbox, "ticket-8"), close_count(&sandbox, "ticket-7")), (0, 0));
    assert_eq!(model.requests(), 1, "the model was not asked again");
}

#[test]
fn an_approved_action_retargeted_with_its_approval_is_refused_by_resume() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    reseal(&sandbox, |payload| retarget(payload, "ticket-8"));
    refused(&sandbox, "resume", "is not the plan's step rendered from the verified record");
    not_verified(&sandbox, "is not the plan's step rendered from the verified record");
    assert_eq!(close_count(&sandbox, "ticket-8"), 0, "ticket-8 untouched");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

/// Issue 22 item 7: an approval re-sealed onto another fingerprint was
/// refused by `resume` only (`approval_invalid`, exit 1) and verified by
/// `verify`; it is a story `approve` never writes.
#[test]
fn an_approval_not_bound_to_the_frozen_action_is_refused_by_verify_and_resume() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    reseal(&sandbox, |payload| payload["approval"]["fingerprint"] = json!("0".repeat(64)));
    let why = "is not bound to the frozen action of step `close`";
    not_verified(&sandbox, why);
    refused(&sandbox, "resume", why);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_waiting_run_whose_look_up_left_the_history_is_refused() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    fs::write(sandbox.workspace().join("runs").join(RUN).join("history.jsonl"), "").expect("empty history");
    // Without the HMAC key, an attacker can also take the step records out
    // of the log and re-seal the history chain's head (an empty history has
    // none): the store then verifies, and the story check is what refuses.
    reseal_log(&sandbox, true, |payload| {
        payload["counters"]["history_records"] = json!(0);
        payload["history_hash"] = json!(null);
    });
    refused(&sandbox, "approve", "step `lookup` is before the cursor but has no record");
    refused(&sandbox, "resume", "step `lookup` is before the cursor but has no record");
    not_verified(&sandbox, "step `lookup` is before the cursor but has no record");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn an_empty_pending_step_id_is_refused() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    reseal(&sandbox, |payload| payload["pending_action"]["step_id"] = json!(""));
    refused(&sandbox, "approve", "`pending_action.step_id` is empty");
    refused(&sandbox, "resume", "`pending_action.step_id` is empty");
    not_verified(&sandbox, "`pending_action.step_id` is empty");
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
    not_verified(&sandbox, "verify evidence for the plan's 2 `[[verify]]` checks");
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
    not_verified(&sandbox, "no receipt evidence is bound to its intent");
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
