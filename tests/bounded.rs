//! The bounded runtime (bounded-agent seed): approvals, checkpoint
//! integrity, idempotent crash recovery, budgets, conditions and the
//! verifier, with the ticket demo as the main scenario. Golden snapshots of
//! the demo's trajectories are in `snapshots/bounded/`.

use std::fs;
use std::path::Path;

use planrun::store::canonical::{canonical_json, sha256_hex};
use serde_json::{Value, json};

use crate::common::{ROOT, Sandbox, TEST_POLICY, snapshot_settings};

const PLAN: &str = "plans/ticket_close.toml";
const RUN: &str = "t";

/// Each stage of a trajectory is its own process; each gets its own clock
/// start so timestamps read in order.
const T_RUN: &str = "2026-01-01T00:00:00Z";
const T_APPROVE: &str = "2026-01-01T00:10:00Z";
const T_RESUME: &str = "2026-01-01T00:20:00Z";
const T_RESUME_AGAIN: &str = "2026-01-01T00:30:00Z";

fn ticket_sandbox(status: &str, close_count: u64) -> Sandbox {
    let sandbox = Sandbox::new();
    let text = fs::read_to_string(Path::new(ROOT).join("plans/ticket_close.tickets.json")).expect("sample tickets");
    let mut tickets: Value = serde_json::from_str(&text).expect("tickets JSON");
    tickets["tickets"]["ticket-7"]["status"] = json!(status);
    tickets["tickets"]["ticket-7"]["close_count"] = json!(close_count);
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&tickets).expect("JSON"));
    sandbox
}

fn at(clock: &str) -> Vec<(&'static str, &str)> {
    vec![("PLANRUN_TEST_CLOCK", clock)]
}

fn tickets(sandbox: &Sandbox) -> Value {
    serde_json::from_str(&fs::read_to_string(sandbox.workspace().join("tickets.json")).expect("tickets")).expect("JSON")
}

fn close_count(sandbox: &Sandbox, ticket: &str) -> u64 {
    tickets(sandbox)["tickets"][ticket]["close_count"].as_u64().expect("close_count")
}

fn event_types(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .record(RUN, "audit.jsonl")
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("audit line")["event_type"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

/// Every file of the run, for "records unchanged" checks.
fn records(sandbox: &Sandbox) -> Vec<String> {
    ["state.json", "audit.jsonl", "history.jsonl", "plan.json"].iter().map(|file| sandbox.record(RUN, file)).collect()
}

fn snapshot_run(sandbox: &Sandbox, name: &str, outputs: &[(&str, &crate::common::Output)]) {
    let settings = snapshot_settings("bounded");
    settings.bind(|| {
        let cli: String =
            outputs.iter().map(|(stage, output)| format!("===== {stage}\n{}", output.snapshot())).collect();
        insta::assert_snapshot!(format!("{name}@cli"), cli);
        for file in ["state.json", "history.jsonl", "audit.jsonl"] {
            insta::assert_snapshot!(format!("{name}@{file}"), sandbox.record(RUN, file));
        }
        insta::assert_snapshot!(
            format!("{name}@tickets.json"),
            serde_json::to_string_pretty(&tickets(sandbox)).unwrap_or_default()
        );
    });
}

fn pause(sandbox: &Sandbox) -> crate::common::Output {
    let output = sandbox.planrun_env(&["--plan", PLAN, "--run-id", RUN], &at(T_RUN));
    assert_eq!(output.code, 3, "{}", output.snapshot());
    output
}

// ---------------------------------------------------------------- trajectories

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
    snapshot_run(&sandbox, "pause", &[("run", &output)]);
}

#[test]
fn approve_then_resume_closes_once_and_verifies() {
    let sandbox = ticket_sandbox("open", 0);
    let run = pause(&sandbox);
    let fingerprint = sandbox.state(RUN)["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
    let approve = sandbox.planrun_env(&["approve", RUN, "--fingerprint", &fingerprint, "--by", "ops"], &at(T_APPROVE));
    assert_eq!(approve.code, 0, "{}", approve.snapshot());
    assert!(approve.stdout.contains(&fingerprint), "approve shows the fingerprint: {}", approve.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "approving executes nothing");
    let resume = sandbox.planrun_env(&["resume", RUN], &at(T_RESUME));
    assert_eq!(resume.code, 0, "{}", resume.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(close_count(&sandbox, "ticket-8"), 0, "the malicious note changed no target");
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done");
    let kinds: Vec<&str> =
        state["evidence"].as_array().expect("evidence").iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds, ["receipt", "verify", "verify"]);
    snapshot_run(&sandbox, "approve_resume", &[("run", &run), ("approve", &approve), ("resume", &resume)]);
}

#[test]
fn a_crash_after_the_close_is_recovered_from_the_receipt_without_a_second_close() {
    let sandbox = ticket_sandbox("open", 0);
    let run = pause(&sandbox);
    let approve = sandbox.planrun_env(&["approve", RUN], &at(T_APPROVE));
    assert_eq!(approve.code, 0, "{}", approve.snapshot());
    let mut crash_env = at(T_RESUME);
    crash_env.push(("PLANRUN_CRASH_AT", "close:after_effect"));
    let crashed = sandbox.planrun_env(&["resume", RUN], &crash_env);
    assert_eq!(crashed.code, -1, "the process is killed by the hook: {}", crashed.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "the close happened before the crash");
    assert_eq!(sandbox.state(RUN)["status"], "waiting_approval", "the checkpoint predates the close");
    let resumed = sandbox.planrun_env(&["resume", RUN], &at(T_RESUME_AGAIN));
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "recovery must not close again");
    let state = sandbox.state(RUN);
    assert_eq!(state["status"], "done");
    assert_eq!(state["evidence"][0]["kind"], "recovered_from_receipt");
    let types = event_types(&sandbox);
    assert!(
        types.contains(&"receipt_lookup".to_string()) && types.contains(&"receipt_reused".to_string()),
        "{types:?}"
    );
    snapshot_run(
        &sandbox,
        "crash_resume",
        &[("run", &run), ("approve", &approve), ("crash", &crashed), ("resume", &resumed)],
    );
}

#[test]
fn an_already_closed_ticket_completes_without_approval_or_write() {
    let sandbox = ticket_sandbox("closed", 1);
    let output = sandbox.planrun_env(&["--plan", PLAN, "--run-id", RUN], &at(T_RUN));
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let state = sandbox.state(RUN);
    assert_eq!(state["stop_reason"], "already_satisfied");
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert!(!event_types(&sandbox).contains(&"approval_requested".to_string()));
    assert!(!sandbox.workspace().join(".planrun/receipts").exists(), "no write, no receipt");
    snapshot_run(&sandbox, "already_satisfied", &[("run", &output)]);
}

#[test]
fn reject_ends_the_run_with_no_write() {
    let sandbox = ticket_sandbox("open", 0);
    let run = pause(&sandbox);
    let reject = sandbox.planrun_env(&["reject", RUN, "--reason", "not this week"], &at(T_APPROVE));
    assert_eq!(reject.code, 0, "{}", reject.snapshot());
    assert_eq!(sandbox.state(RUN)["status"], "rejected");
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
    let resume = sandbox.planrun_env(&["resume", RUN], &at(T_RESUME));
    assert_eq!(resume.code, 1, "a rejected run cannot be resumed: {}", resume.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
    snapshot_run(&sandbox, "rejected", &[("run", &run), ("reject", &reject), ("resume", &resume)]);
}

#[test]
fn the_demo_command_prints_the_seed_summary() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path().join("demo");
    let output = sandbox.planrun(&["demo", "--dir", dir.to_str().expect("utf-8 path")]);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    let summary: Value = serde_json::from_str(&output.stdout).expect("JSON summary");
    assert_eq!(summary["status"], "ok");
    assert_eq!(summary["phase"], "completed");
    assert_eq!(summary["close_count"], 1);
    assert!(
        summary["checklist"].as_object().expect("checklist").values().all(|value| value == &json!(true)),
        "{summary}"
    );
    let again = sandbox.planrun(&["demo", "--dir", dir.to_str().expect("utf-8 path")]);
    assert_eq!(again.code, 2, "the demo refuses an existing folder: {}", again.snapshot());
}

// ------------------------------------------------------------------ approvals

#[test]
fn approvals_that_do_not_match_are_refused_and_change_nothing() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let before = records(&sandbox);
    for (args, expected) in [
        (vec!["approve", RUN, "--fingerprint", &"0".repeat(64)], "fingerprint"),
        (vec!["approve", RUN, "--scope", "ticket:ticket-8"], "scope"),
        (vec!["approve", RUN, "--state-version", "1"], "state version"),
    ] {
        let output = sandbox.planrun_env(&args, &at(T_APPROVE));
        assert_eq!(output.code, 1, "{args:?}: {}", output.snapshot());
        assert!(output.stderr.contains("approval_invalid") && output.stderr.contains(expected), "{}", output.stderr);
        assert_eq!(records(&sandbox), before, "{args:?} changed the records");
    }
    let resume = sandbox.planrun_env(&["resume", RUN], &at(T_RESUME));
    assert_eq!(resume.code, 1, "no approval yet: {}", resume.snapshot());
    assert!(resume.stderr.contains("approval_invalid"), "{}", resume.stderr);
    assert_eq!(records(&sandbox), before);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn an_expired_approval_is_refused() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let approve = sandbox.planrun_env(&["approve", RUN, "--expires-in", "60s"], &at(T_APPROVE));
    assert_eq!(approve.code, 0, "{}", approve.snapshot());
    let before = records(&sandbox);
    let resume = sandbox.planrun_env(&["resume", RUN], &at(T_RESUME));
    assert_eq!(resume.code, 1, "{}", resume.snapshot());
    assert!(resume.stderr.contains("expired"), "{}", resume.stderr);
    assert_eq!(records(&sandbox), before);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_forged_approval_in_the_checkpoint_fails_verification() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let path = sandbox.workspace().join("runs").join(RUN).join("state.json");
    let mut envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("state")).expect("JSON");
    let pending = envelope["payload"]["pending_action"].clone();
    envelope["payload"]["approval"] = json!({
        "fingerprint": pending["fingerprint"], "state_version": pending["state_version"], "scope": pending["scope"],
        "approved_by": "mallory", "approved_at": "2026-01-01T00:05:00Z", "expires_at": "2027-01-01T00:00:00Z",
    });
    fs::write(&path, serde_json::to_string_pretty(&envelope).expect("JSON")).expect("write");
    let before = records(&sandbox);
    let resume = sandbox.planrun_env(&["resume", RUN], &at(T_RESUME));
    assert_eq!(resume.code, 2, "{}", resume.snapshot());
    assert!(resume.stderr.contains("digest mismatch"), "{}", resume.stderr);
    assert_eq!(records(&sandbox), before);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_policy_rule_with_decision_prompt_pauses_the_step() {
    let sandbox = Sandbox::new();
    let policy = TEST_POLICY
        .replace("[[shell.allow]]\nprogram = \"pwd\"", "[[shell.allow]]\nprogram = \"pwd\"\ndecision = \"prompt\"");
    let plan = crate::common::one_step_plan("kind = \"shell\"\ncommand = [\"pwd\"]");
    let output = sandbox.run_plan(&plan, &policy);
    assert_eq!(output.code, 3, "{}", output.snapshot());
    assert_eq!(sandbox.state("t")["pending_action"]["required_by"], "policy");
    assert!(sandbox.history("t").is_empty(), "nothing ran before approval");
    let approve = sandbox.planrun_in(sandbox.path(), &["approve", "t"]);
    assert_eq!(approve.code, 0, "{}", approve.snapshot());
    let resume = sandbox.planrun_in(sandbox.path(), &["resume", "t"]);
    assert_eq!(resume.code, 0, "{}", resume.snapshot());
    assert_eq!(sandbox.history("t")[0]["status"], "done");
}

#[test]
fn resuming_after_the_plan_changed_is_refused_unless_allowed() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"ask\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\napproval = \"required\"\n";
    assert_eq!(sandbox.run_plan(plan, TEST_POLICY).code, 3);
    assert_eq!(sandbox.planrun_in(sandbox.path(), &["approve", "t"]).code, 0);
    sandbox.write("plans/test.toml", &format!("{plan}\n# edited\n"));
    let refused = sandbox.planrun_in(sandbox.path(), &["resume", "t"]);
    assert_eq!(refused.code, 1, "{}", refused.snapshot());
    assert!(refused.stderr.contains("changed since run"), "{}", refused.stderr);
    assert!(!sandbox.workspace().join("a.txt").exists());
    let allowed = sandbox.planrun_in(sandbox.path(), &["resume", "t", "--allow-changed-files"]);
    assert_eq!(allowed.code, 0, "{}", allowed.snapshot());
    assert_eq!(fs::read_to_string(sandbox.workspace().join("a.txt")).expect("written"), "a");
}

// -------------------------------------------------------- checkpoint integrity

/// Rewrites the payload and re-seals it with a valid plain SHA-256, so
/// only the strictness checks (not the digest) can catch the change.
fn reseal(sandbox: &Sandbox, edit: impl FnOnce(&mut Value)) {
    let path = sandbox.workspace().join("runs").join(RUN).join("state.json");
    let mut envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("state")).expect("JSON");
    edit(&mut envelope["payload"]);
    let digest = sha256_hex(canonical_json(&envelope["payload"]).expect("canonical").as_bytes());
    if let Some(object) = envelope.as_object_mut() {
        object.remove("hmac_sha256");
    }
    envelope["sha256"] = json!(digest);
    fs::write(&path, serde_json::to_string_pretty(&envelope).expect("JSON")).expect("write");
}

#[test]
fn tampered_checkpoints_and_logs_are_refused_with_a_specific_error() {
    type Tamper = Box<dyn Fn(&Sandbox)>;
    let state_path = |sandbox: &Sandbox| sandbox.workspace().join("runs").join(RUN).join("state.json");
    let audit_path = |sandbox: &Sandbox| sandbox.workspace().join("runs").join(RUN).join("audit.jsonl");
    let cases: Vec<(&str, Tamper, &str)> = vec![
        (
            "payload edited",
            Box::new(move |s| {
                let text = fs::read_to_string(state_path(s)).expect("state").replace("\"ticket-7\"", "\"ticket-8\"");
                fs::write(state_path(s), text).expect("write");
            }),
            "digest mismatch",
        ),
        (
            "unknown field",
            Box::new(|s| {
                reseal(s, |payload| {
                    payload["note"] = json!("hi");
                })
            }),
            "unknown field",
        ),
        (
            "waiting without pending action",
            Box::new(|s| {
                reseal(s, |payload| {
                    payload["pending_action"] = Value::Null;
                })
            }),
            "without `pending_action`",
        ),
        (
            "done with pending action",
            Box::new(|s| {
                reseal(s, |payload| {
                    payload["status"] = json!("done");
                })
            }),
            "`pending_action` while the status is `done`",
        ),
        (
            "schema version",
            Box::new(move |s| {
                let text = fs::read_to_string(state_path(s))
                    .expect("state")
                    .replace("\"schema_version\": 1", "\"schema_version\": 2");
                fs::write(state_path(s), text).expect("write");
            }),
            "unsupported schema version 2",
        ),
        (
            "duplicate key",
            Box::new(move |s| {
                let text = fs::read_to_string(state_path(s)).expect("state").replacen(
                    "\"payload\": {",
                    "\"payload\": {\n    \"run_id\": \"t\",",
                    1,
                );
                fs::write(state_path(s), text).expect("write");
            }),
            "duplicate key `run_id`",
        ),
        (
            "NaN",
            Box::new(move |s| {
                let text = fs::read_to_string(state_path(s)).expect("state").replacen(
                    "\"state_version\": ",
                    "\"state_version\": NaN, \"x\": ",
                    1,
                );
                fs::write(state_path(s), text).expect("write");
            }),
            "not strict JSON",
        ),
        (
            "audit line edited",
            Box::new(move |s| {
                let text =
                    fs::read_to_string(audit_path(s)).expect("audit").replacen("\"run_started\"", "\"run_begun\"", 1);
                fs::write(audit_path(s), text).expect("write");
            }),
            "breaks the hash chain",
        ),
        (
            "audit torn",
            Box::new(move |s| {
                let text = fs::read_to_string(audit_path(s)).expect("audit");
                fs::write(audit_path(s), &text[..text.len() - 3]).expect("write");
            }),
            "torn",
        ),
        (
            "audit truncated",
            Box::new(move |s| {
                let text = fs::read_to_string(audit_path(s)).expect("audit");
                let kept: String = text.lines().take(3).map(|line| format!("{line}\n")).collect();
                fs::write(audit_path(s), kept).expect("write");
            }),
            "ends at line 3",
        ),
    ];
    for (name, tamper, expected) in cases {
        let sandbox = ticket_sandbox("open", 0);
        pause(&sandbox);
        assert_eq!(sandbox.planrun_env(&["approve", RUN], &at(T_APPROVE)).code, 0);
        tamper(&sandbox);
        let before = records(&sandbox);
        for command in [vec!["resume", RUN], vec!["approve", RUN], vec!["show", RUN]] {
            let output = sandbox.planrun_env(&command, &at(T_RESUME));
            assert_eq!(output.code, 2, "{name}: {command:?}: {}", output.snapshot());
            assert!(output.stderr.contains("failed verification"), "{name}: {}", output.stderr);
            assert!(output.stderr.contains(expected), "{name}: expected {expected:?} in {}", output.stderr);
        }
        assert_eq!(records(&sandbox), before, "{name}: records changed");
        assert_eq!(close_count(&sandbox, "ticket-7"), 0, "{name}: the close ran");
    }
}

#[test]
fn hmac_checkpoints_need_the_key() {
    let sandbox = ticket_sandbox("open", 0);
    let mut keyed = at(T_RUN);
    keyed.push(("PLANRUN_HMAC_KEY", "s3cret"));
    let output = sandbox.planrun_env(&["--plan", PLAN, "--run-id", RUN], &keyed);
    assert_eq!(output.code, 3, "{}", output.snapshot());
    let envelope: Value = serde_json::from_str(&sandbox.record(RUN, "state.json")).expect("JSON");
    assert!(envelope.get("hmac_sha256").is_some() && envelope.get("sha256").is_none(), "{envelope}");
    let without = sandbox.planrun_env(&["approve", RUN], &at(T_APPROVE));
    assert_eq!(without.code, 2, "{}", without.snapshot());
    assert!(without.stderr.contains("PLANRUN_HMAC_KEY` is not set"), "{}", without.stderr);
    let wrong =
        sandbox.planrun_env(&["approve", RUN], &[("PLANRUN_TEST_CLOCK", T_APPROVE), ("PLANRUN_HMAC_KEY", "other")]);
    assert_eq!(wrong.code, 2, "{}", wrong.snapshot());
    let right =
        sandbox.planrun_env(&["approve", RUN], &[("PLANRUN_TEST_CLOCK", T_APPROVE), ("PLANRUN_HMAC_KEY", "s3cret")]);
    assert_eq!(right.code, 0, "{}", right.snapshot());
    // A plain-SHA-256 checkpoint is refused while a key is set (no downgrade).
    reseal(&sandbox, |_| {});
    let downgrade =
        sandbox.planrun_env(&["resume", RUN], &[("PLANRUN_TEST_CLOCK", T_RESUME), ("PLANRUN_HMAC_KEY", "s3cret")]);
    assert_eq!(downgrade.code, 2, "{}", downgrade.snapshot());
    assert!(downgrade.stderr.contains("unauthenticated"), "{}", downgrade.stderr);
}

// ---------------------------------------------------------------- idempotency

fn keyed_write_plan(key: &str, content: &str) -> String {
    format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"write\"\nkind = \"write_file\"\npath = \"out.txt\"\ncontent = \"{content}\"\nidempotency_key = \"{key}\"\n"
    )
}

#[test]
fn the_same_key_and_intent_reuses_the_receipt_without_repeating_the_effect() {
    let sandbox = Sandbox::new();
    assert_eq!(sandbox.run_plan(&keyed_write_plan("report-1", "v1"), TEST_POLICY).code, 0);
    fs::write(sandbox.workspace().join("out.txt"), "edited by hand").expect("edit");
    sandbox.write("plans/test.toml", &keyed_write_plan("report-1", "v1"));
    let second =
        sandbox.planrun_in(sandbox.path(), &["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t2"]);
    assert_eq!(second.code, 0, "{}", second.snapshot());
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
    let second =
        sandbox.planrun_in(sandbox.path(), &["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t2"]);
    assert_eq!(second.code, 1, "{}", second.snapshot());
    let history = sandbox.history("t2");
    assert_eq!(history.len(), 1, "a conflict is never retried");
    assert_eq!(history[0]["failure_class"], "idempotency_conflict");
    assert_eq!(sandbox.state("t2")["stop_reason"], "idempotency_conflict");
    assert_eq!(fs::read_to_string(sandbox.workspace().join("out.txt")).expect("out"), "v1");
}

#[test]
fn an_unknowable_write_outcome_ends_uncertain_with_a_reconciliation_record() {
    let sandbox = Sandbox::new();
    sandbox.write("plans/test.toml", &keyed_write_plan("report-{{ run.id }}", "v1"));
    sandbox.write("policies/default.toml", TEST_POLICY);
    let crashed = sandbox.planrun_full_env(
        &["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t"],
        &[("PLANRUN_CRASH_AT", "write:before_receipt")],
    );
    assert_eq!(crashed.code, -1, "{}", crashed.snapshot());
    let resumed = sandbox.planrun_in(sandbox.path(), &["resume", "t"]);
    assert_eq!(resumed.code, 1, "{}", resumed.snapshot());
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
    sandbox.write("plans/test.toml", plan);
    sandbox.write("policies/default.toml", TEST_POLICY);
    let crashed = sandbox.planrun_full_env(
        &["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t"],
        &[("PLANRUN_CRASH_AT", "two:after_effect")],
    );
    assert_eq!(crashed.code, -1, "{}", crashed.snapshot());
    assert_eq!(sandbox.state("t")["status"], "running");
    let resumed = sandbox.planrun_in(sandbox.path(), &["resume", "t"]);
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    let ids: Vec<String> =
        sandbox.history("t").iter().map(|record| record["step_id"].as_str().unwrap_or("").to_string()).collect();
    assert_eq!(ids, ["one", "two"], "step one is not repeated");
}

// -------------------------------------------------------------------- budgets

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
    let output = sandbox
        .planrun_in(sandbox.path(), &["--plan", "plans/ticket_close.toml", "--policies", "policies", "--run-id", RUN]);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert_eq!(sandbox.state(RUN)["stop_reason"], "budget_exhausted");
    assert!(!event_types(&sandbox).contains(&"approval_requested".to_string()));
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

// ------------------------------------------------ conditions and verification

#[test]
fn when_expect_and_verify_decide_the_outcome() {
    let cases = [
        // A false `when` skips the step and the run goes on.
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"echo\", \"no\"]\n\n[[steps]]\nid = \"b\"\nkind = \"write_file\"\npath = \"b.txt\"\ncontent = \"b\"\n[steps.when]\nvalue = \"{{ steps.a.output_text }}\"\ncontains = \"yes\"\n\n[[steps]]\nid = \"c\"\nkind = \"write_file\"\npath = \"c.txt\"\ncontent = \"c\"\n",
            0,
            "end_of_plan",
        ),
        // `expect.exit_code` accepts a documented non-zero exit.
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"false\"]\n[steps.expect]\nexit_code = 1\n",
            0,
            "end_of_plan",
        ),
        // A failed post-condition is `verification_failed`, never retried.
        (
            "[[steps]]\nid = \"a\"\nkind = \"shell\"\ncommand = [\"echo\", \"hello\"]\n[steps.expect]\noutput_matches = \"^bye\"\n",
            1,
            "step_failed",
        ),
        // A failed verifier cannot produce `done`.
        (
            "[[steps]]\nid = \"a\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"hello\"\n\n[[verify]]\nkind = \"file\"\npath = \"a.txt\"\ncontains = \"goodbye\"\n",
            1,
            "verification_failed",
        ),
        (
            "[[steps]]\nid = \"a\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"hello\"\n\n[[verify]]\nkind = \"file\"\npath = \"a.txt\"\ncontains = \"hello\"\n",
            0,
            "end_of_plan",
        ),
    ];
    for (steps, code, reason) in cases {
        let sandbox = Sandbox::new();
        let output = sandbox.run_plan(&format!("version = 1\nid = \"test\"\n\n{steps}"), TEST_POLICY);
        assert_eq!(output.code, code, "{steps}\n{}", output.snapshot());
        assert_eq!(sandbox.state("t")["stop_reason"], reason, "{steps}");
        if reason == "step_failed" {
            let history = sandbox.history("t");
            assert_eq!(history.len(), 1);
            assert_eq!(history[0]["failure_class"], "verification_failed");
        }
    }
    let skipped = Sandbox::new();
    let output = skipped.run_plan(&format!("version = 1\nid = \"test\"\n\n{}", cases[0].0), TEST_POLICY);
    assert_eq!(output.code, 0);
    assert!(!skipped.workspace().join("b.txt").exists(), "the skipped step wrote");
    assert!(skipped.workspace().join("c.txt").exists());
    assert_eq!(skipped.history("t")[1]["status"], "skipped");
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
    let output = sandbox.planrun_env(&["--plan", PLAN, "--run-id", RUN], &at(T_RUN));
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert_eq!(sandbox.history(RUN)[0]["failure_class"], "invalid_tool_result");
    assert!(!event_types(&sandbox).contains(&"approval_requested".to_string()));
}

#[test]
fn the_run_deadline_counts_the_pause_for_approval() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[budget]\nmax_run_secs = 60\n\n[[steps]]\nid = \"ask\"\nkind = \"write_file\"\npath = \"a.txt\"\ncontent = \"a\"\napproval = \"required\"\n";
    sandbox.write("plans/test.toml", plan);
    sandbox.write("policies/default.toml", TEST_POLICY);
    let args = ["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t"];
    assert_eq!(sandbox.planrun_full_env(&args, &at(T_RUN)).code, 3);
    assert_eq!(sandbox.planrun_full_env(&["approve", "t"], &at(T_APPROVE)).code, 0);
    let resume = sandbox.planrun_full_env(&["resume", "t"], &at(T_RESUME));
    assert_eq!(resume.code, 1, "{}", resume.snapshot());
    assert_eq!(sandbox.state("t")["stop_reason"], "budget_exhausted");
    assert!(!sandbox.workspace().join("a.txt").exists(), "the approved action ran after the deadline");
}

#[test]
fn cancel_abandons_a_paused_or_interrupted_run_and_nothing_more_runs() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    let cancel = sandbox.planrun_env(&["cancel", RUN, "--reason", "wrong ticket"], &at(T_APPROVE));
    assert_eq!(cancel.code, 0, "{}", cancel.snapshot());
    let state = sandbox.state(RUN);
    assert_eq!((state["status"].as_str(), state["stop_reason"].as_str()), (Some("cancelled"), Some("cancelled")));
    assert_eq!(state["pending_action"], Value::Null);
    for command in [vec!["resume", RUN], vec!["approve", RUN], vec!["cancel", RUN]] {
        let output = sandbox.planrun_env(&command, &at(T_RESUME));
        assert_eq!(output.code, 1, "{command:?}: {}", output.snapshot());
    }
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);

    let interrupted = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"one\"\nkind = \"write_file\"\npath = \"one.txt\"\ncontent = \"1\"\n\n[[steps]]\nid = \"two\"\nkind = \"write_file\"\npath = \"two.txt\"\ncontent = \"2\"\n";
    interrupted.write("plans/test.toml", plan);
    interrupted.write("policies/default.toml", TEST_POLICY);
    let args = ["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t"];
    assert_eq!(interrupted.planrun_full_env(&args, &[("PLANRUN_CRASH_AT", "one:after_effect")]).code, -1);
    assert_eq!(interrupted.planrun_full_env(&["cancel", "t"], &[]).code, 0);
    assert_eq!(interrupted.planrun_full_env(&["resume", "t"], &[]).code, 1);
    assert!(!interrupted.workspace().join("two.txt").exists(), "a cancelled run ran on");
}

#[test]
fn history_lines_past_the_checkpoint_are_dropped_on_resume() {
    let sandbox = Sandbox::new();
    let plan = "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"one\"\nkind = \"write_file\"\npath = \"one.txt\"\ncontent = \"1\"\n";
    sandbox.write("plans/test.toml", plan);
    sandbox.write("policies/default.toml", TEST_POLICY);
    let args = ["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t"];
    assert_eq!(sandbox.planrun_full_env(&args, &[("PLANRUN_CRASH_AT", "one:after_effect")]).code, -1);
    // As if the process had died after appending the attempt's history line
    // but before its checkpoint.
    let history = sandbox.workspace().join("runs/t/history.jsonl");
    let line = r#"{"step_id":"one","kind":"write_file","status":"done","attempt":1,"failure_class":null,"action":null,"output_text":"ghost","error":null,"details":{},"started_at":"2026-01-01T00:00:00Z","finished_at":"2026-01-01T00:00:00Z","duration_ms":0}"#;
    fs::write(&history, format!("{line}\n")).expect("append");
    let resumed = sandbox.planrun_full_env(&["resume", "t"], &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
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
