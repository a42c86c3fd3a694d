//! Checkpoint and log integrity: a `state.json` whose seal, schema or
//! strictness checks fail, or an `audit.jsonl` whose hash chain is broken,
//! torn or truncated, is refused by every command with a specific error and
//! left as it was; HMAC-sealed checkpoints need their key and cannot be
//! downgraded to a plain digest.

use std::fs;

use planrun::store::canonical::{canonical_json, sha256_hex};
use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::common::tickets::{PLAN, RUN, T_APPROVE, T_RESUME, T_RUN, close_count, pause, records, ticket_sandbox};

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
        sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
        tamper(&sandbox);
        let before = records(&sandbox);
        for command in [["resume", RUN], ["approve", RUN], ["show", RUN]] {
            let output = sandbox.planrun().args(command).clock(T_RESUME).run();
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
    sandbox
        .planrun()
        .args(["--plan", PLAN, "--run-id", RUN])
        .clock(T_RUN)
        .env("PLANRUN_HMAC_KEY", "s3cret")
        .expect_code(3)
        .run();
    let envelope: Value = serde_json::from_str(&sandbox.record(RUN, "state.json")).expect("JSON");
    assert!(envelope.get("hmac_sha256").is_some() && envelope.get("sha256").is_none(), "{envelope}");
    let without = sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(2).run();
    assert!(without.stderr.contains("PLANRUN_HMAC_KEY` is not set"), "{}", without.stderr);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).env("PLANRUN_HMAC_KEY", "other").expect_code(2).run();
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).env("PLANRUN_HMAC_KEY", "s3cret").expect_code(0).run();
    // A plain-SHA-256 checkpoint is refused while a key is set (no downgrade).
    reseal(&sandbox, |_| {});
    let downgrade =
        sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).env("PLANRUN_HMAC_KEY", "s3cret").expect_code(2).run();
    assert!(downgrade.stderr.contains("unauthenticated"), "{}", downgrade.stderr);
}
