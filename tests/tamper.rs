//! The tamper suite: every record file of a run (`state.json`,
//! `audit.jsonl`, `history.jsonl`, `plan.json`) has a line edited, removed,
//! re-ordered and appended, with and without `PLANRUN_HMAC_KEY`, and
//! `verify`, `show` and `resume` must each refuse it with exit 2 and change
//! nothing; plus the attacks of issue 8 on a waiting ticket run (an edited
//! look-up status, an emptied and re-sealed history, a forged
//! `approval_granted` appended with a valid plain chain) and `verify`'s
//! exit codes. What the README promises without a key is what is asserted
//! without one: careless edits are caught, a re-computed plain chain is not.
//! `history.jsonl` and `plan.json` are views of the log: one emptied or
//! removed is what a power cut can leave, so it is read from the log and
//! repaired, never trusted as it is.

use std::fs;
use std::path::PathBuf;

use planrun::store::canonical::{canonical_json, sha256_hex};
use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::common::tickets::{PLAN, RUN, T_APPROVE, T_RESUME, T_RUN, close_count, records, ticket_sandbox};

const KEY: &str = "s3cret";

/// Runs `args` with the key (or without), at `clock`.
fn planrun(sandbox: &Sandbox, key: Option<&str>, args: &[&str], clock: &str) -> crate::common::Output {
    let command = sandbox.planrun().args(args).clock(clock);
    match key {
        Some(key) => command.env("PLANRUN_HMAC_KEY", key).run(),
        None => command.run(),
    }
}

/// A ticket run paused for approval (history: the look-up).
fn waiting(key: Option<&str>) -> Sandbox {
    let sandbox = ticket_sandbox("open", 0);
    let output = planrun(&sandbox, key, &["--plan", PLAN, "--run-id", RUN], T_RUN);
    assert_eq!(output.code, 3, "{}", output.snapshot());
    sandbox
}

/// A ticket run approved and resumed to `done` (history: three records).
fn finished(key: Option<&str>) -> Sandbox {
    let sandbox = waiting(key);
    assert_eq!(planrun(&sandbox, key, &["approve", RUN], T_APPROVE).code, 0);
    let output = planrun(&sandbox, key, &["resume", RUN], T_RESUME);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    sandbox
}

fn record_path(sandbox: &Sandbox, file: &str) -> PathBuf {
    sandbox.workspace().join("runs").join(RUN).join(file)
}

/// Rewrites the lines of one record file.
fn edit_lines(sandbox: &Sandbox, file: &str, edit: impl FnOnce(&mut Vec<String>)) {
    let path = record_path(sandbox, file);
    let mut lines: Vec<String> = fs::read_to_string(&path).expect("record").lines().map(str::to_string).collect();
    edit(&mut lines);
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    fs::write(&path, text).expect("write");
}

/// `verify`, `show` and `resume` each exit 2 naming a verification
/// failure, and the records and the ticket are as they were.
fn assert_refused(sandbox: &Sandbox, key: Option<&str>, case: &str) {
    let before = records(sandbox);
    let closes = close_count(sandbox, "ticket-7");
    for command in ["verify", "show", "resume"] {
        let output = planrun(sandbox, key, &[command, RUN], T_RESUME);
        assert_eq!(output.code, 2, "{case}: {command}: {}", output.snapshot());
        assert!(output.stderr.contains("failed verification"), "{case}: {command}: {}", output.stderr);
    }
    assert_eq!(records(sandbox), before, "{case}: records changed");
    assert_eq!(close_count(sandbox, "ticket-7"), closes, "{case}: a close ran");
}

/// An edit of a record file's lines.
type LineEdit = Box<dyn Fn(&mut Vec<String>)>;

/// The line edits of every record file. `state.json` is one sealed JSON
/// object, so its "lines" are its pretty-printed fields: swapping two keeps
/// the same canonical payload (no change at all) and is left out.
fn line_tampers() -> Vec<(&'static str, &'static str, LineEdit)> {
    let swap = |lines: &mut Vec<String>| lines.swap(0, 1);
    vec![
        ("state.json", "edit", Box::new(|lines| lines[3] = lines[3].replacen("\"t\"", "\"u\"", 1))),
        ("state.json", "remove", Box::new(|lines| drop(lines.remove(3)))),
        ("state.json", "append", Box::new(|lines| lines.push("{}".to_string()))),
        ("audit.jsonl", "edit", Box::new(|lines| lines[0] = lines[0].replacen("running", "paused", 1))),
        ("audit.jsonl", "remove first", Box::new(|lines| drop(lines.remove(0)))),
        ("audit.jsonl", "remove last", Box::new(|lines| drop(lines.pop()))),
        ("audit.jsonl", "re-order", Box::new(swap)),
        ("audit.jsonl", "append duplicate", Box::new(|lines| lines.push(lines[lines.len() - 1].clone()))),
        ("history.jsonl", "edit", Box::new(|lines| lines[0] = lines[0].replacen("\"open\"", "\"closed\"", 1))),
        ("history.jsonl", "remove", Box::new(|lines| drop(lines.remove(1)))),
        ("history.jsonl", "re-order", Box::new(swap)),
        ("plan.json", "edit", Box::new(|lines| lines[2] = lines[2].replacen('t', "T", 1))),
        ("plan.json", "remove", Box::new(|lines| drop(lines.remove(2)))),
        ("plan.json", "re-order", Box::new(|lines| lines.swap(1, 2))),
        ("plan.json", "append", Box::new(|lines| lines.push(" ".to_string()))),
    ]
}

#[test]
fn every_record_file_edited_removed_reordered_or_appended_is_refused_with_and_without_the_key() {
    for key in [Some(KEY), None] {
        for (file, how, tamper) in line_tampers() {
            let sandbox = finished(key);
            let case = format!("{file} {how} (key: {})", key.is_some());
            let before = fs::read_to_string(record_path(&sandbox, file)).expect("record");
            edit_lines(&sandbox, file, tamper);
            assert_ne!(fs::read_to_string(record_path(&sandbox, file)).expect("record"), before, "{case}: no change");
            assert_refused(&sandbox, key, &case);
        }
    }
}

#[test]
fn a_line_appended_past_the_head_is_a_crash_tail_and_never_trusted() {
    // A forged `approval_granted` with a valid plain chain after the
    // checkpoint of a waiting run.
    let forge = |sandbox: &Sandbox| {
        edit_lines(sandbox, "audit.jsonl", |lines| {
            let last = lines.last().expect("a line").clone();
            let previous: Value = serde_json::from_str(&last).expect("JSON");
            let line = json!({
                "seq": previous["seq"].as_u64().expect("seq") + 1,
                "ts": "2026-01-01T00:05:00Z", "run_id": RUN, "event_type": "approval_granted",
                "step_id": "close", "status": "ok", "details": {"approved_by": "mallory"},
                "prev_hash": sha256_hex(last.as_bytes()),
            });
            lines.push(line.to_string());
        });
    };
    // Under the key the forged link breaks the keyed chain: refused.
    let keyed = waiting(Some(KEY));
    forge(&keyed);
    assert_refused(&keyed, Some(KEY), "forged approval under the key");

    // Without a key the chain is valid, so it reads as a crash tail: it is
    // reported, never trusted (no approval comes of it), and `resume` cuts
    // it off before anything runs.
    let plain = waiting(None);
    forge(&plain);
    let verify = planrun(&plain, None, &["verify", RUN], T_RESUME);
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
    assert!(verify.stdout.contains("crash tail: 1 audit events"), "{}", verify.stdout);
    let show = planrun(&plain, None, &["show", RUN, "--json"], T_RESUME);
    assert_eq!(show.code, 0, "{}", show.snapshot());
    assert!(!show.stdout.contains("mallory"), "the tail is not shown as true");
    let resume = planrun(&plain, None, &["resume", RUN], T_RESUME);
    assert_eq!(resume.code, 1, "no approval: refused\n{}", resume.snapshot());
    assert!(!plain.record(RUN, "audit.jsonl").contains("mallory"), "the tail was cut");
    assert_eq!(close_count(&plain, "ticket-7"), 0);
}

/// Re-seals `state.json` with a plain SHA-256 after `edit`, as someone
/// without the key can.
fn reseal_plain(sandbox: &Sandbox, edit: impl FnOnce(&mut Value)) {
    let path = record_path(sandbox, "state.json");
    let mut envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("state")).expect("JSON");
    edit(&mut envelope["payload"]);
    let digest = sha256_hex(canonical_json(&envelope["payload"]).expect("canonical").as_bytes());
    if let Some(object) = envelope.as_object_mut() {
        object.remove("hmac_sha256");
        object.insert("sha256".into(), json!(digest));
    }
    fs::write(&path, serde_json::to_string_pretty(&envelope).expect("JSON")).expect("write");
}

#[test]
fn the_attacks_of_issue_8_on_a_waiting_ticket_run_fail() {
    for key in [Some(KEY), None] {
        // The look-up's status edited to `closed`: the close step would be
        // skipped as already satisfied.
        let sandbox = waiting(key);
        planrun(&sandbox, key, &["approve", RUN], T_APPROVE);
        edit_lines(&sandbox, "history.jsonl", |lines| {
            lines[0] = lines[0].replace("\"status\":\"open\"", "\"status\":\"closed\"").replace(": open", ": closed");
        });
        assert_refused(&sandbox, key, "look-up status edited");
    }
    // The history emptied and the checkpoint re-sealed to match: under the
    // key a plain seal is refused (and a keyed one cannot be made).
    let sandbox = waiting(Some(KEY));
    planrun(&sandbox, Some(KEY), &["approve", RUN], T_APPROVE);
    fs::write(record_path(&sandbox, "history.jsonl"), "").expect("write");
    reseal_plain(&sandbox, |payload| {
        payload["counters"]["history_records"] = json!(0);
        payload["history_hash"] = Value::Null;
    });
    assert_refused(&sandbox, Some(KEY), "history emptied and re-sealed");
    // Without the key an emptied history is a view behind the log (what a
    // power cut can leave): the log's look-up stands, and the view is
    // written again from it.
    let sandbox = waiting(None);
    let history = sandbox.record(RUN, "history.jsonl");
    fs::write(record_path(&sandbox, "history.jsonl"), "").expect("write");
    let verify = planrun(&sandbox, None, &["verify", RUN], T_APPROVE);
    assert_eq!(verify.code, 0, "{}", verify.snapshot());
    assert!(verify.stdout.contains("behind the log"), "{}", verify.stdout);
    assert_eq!(planrun(&sandbox, None, &["approve", RUN], T_APPROVE).code, 0);
    assert!(sandbox.record(RUN, "history.jsonl").starts_with(&history), "the view was repaired from the log");
    let resumed = planrun(&sandbox, None, &["resume", RUN], T_RESUME);
    assert_eq!(resumed.code, 0, "{}", resumed.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
}

#[test]
fn views_removed_or_emptied_are_read_from_the_log_and_repaired() {
    for key in [Some(KEY), None] {
        let sandbox = finished(key);
        let before = records(&sandbox);
        fs::write(record_path(&sandbox, "history.jsonl"), "").expect("empty");
        fs::remove_file(record_path(&sandbox, "plan.json")).expect("remove");
        fs::remove_file(record_path(&sandbox, "state.json")).expect("remove");
        let verify = planrun(&sandbox, key, &["verify", RUN], T_RESUME);
        assert_eq!(verify.code, 0, "{}", verify.snapshot());
        assert!(verify.stdout.contains("behind the log"), "{}", verify.stdout);
        let show = planrun(&sandbox, key, &["show", RUN, "--json"], T_RESUME);
        assert_eq!(show.code, 0, "{}", show.snapshot());
        let shown: Value = serde_json::from_str(&show.stdout).expect("JSON");
        assert_eq!(shown["history"].as_array().map(Vec::len), Some(3), "the log holds the history");
        // Opening the run for writing (here a refused `resume`) repairs them.
        let resume = planrun(&sandbox, key, &["resume", RUN], T_RESUME);
        assert_eq!(resume.code, 1, "{}", resume.snapshot());
        assert_eq!(records(&sandbox), before, "every view written again from the log");
    }
}

#[test]
fn verify_exit_codes() {
    let sandbox = finished(None);
    let verified = planrun(&sandbox, None, &["verify", RUN], T_RESUME);
    assert_eq!(verified.code, 0, "{}", verified.snapshot());
    assert!(verified.stdout.contains("verified: run t · done"), "{}", verified.stdout);
    assert!(verified.stdout.contains("3 history records"), "{}", verified.stdout);
    assert!(!verified.stdout.contains("crash tail"), "{}", verified.stdout);
    let unknown = planrun(&sandbox, None, &["verify", "nope"], T_RESUME);
    assert_eq!(unknown.code, 2, "{}", unknown.snapshot());
    assert!(unknown.stderr.contains("no run `nope`"), "{}", unknown.stderr);
    let invalid = planrun(&sandbox, None, &["verify", "../x"], T_RESUME);
    assert_eq!(invalid.code, 2, "{}", invalid.snapshot());
    // A keyed run verified without its key is refused like `show` refuses it.
    let keyed = finished(Some(KEY));
    let without = planrun(&keyed, None, &["verify", RUN], T_RESUME);
    assert_eq!(without.code, 2, "{}", without.snapshot());
    assert!(without.stderr.contains("`PLANRUN_HMAC_KEY` is not set"), "{}", without.stderr);
    let with = planrun(&keyed, Some(KEY), &["verify", RUN], T_RESUME);
    assert_eq!(with.code, 0, "{}", with.snapshot());
    assert!(with.stdout.contains("HMAC-SHA256"), "{}", with.stdout);
}

#[test]
fn an_unreadable_or_missing_record_gets_the_same_exit_code_from_every_command() {
    for (file, how) in [("state.json", "a folder"), ("history.jsonl", "a folder"), ("plan.json", "a folder")] {
        let sandbox = waiting(None);
        let path = record_path(&sandbox, file);
        fs::remove_file(&path).expect("remove");
        if how == "a folder" {
            fs::create_dir(&path).expect("a folder in its place");
        }
        for command in ["verify", "show", "resume", "approve", "reject", "cancel"] {
            let output = planrun(&sandbox, None, &[command, RUN], T_RESUME);
            assert_eq!(output.code, 2, "{file} {how}: {command}: {}", output.snapshot());
            assert!(output.stderr.contains(file), "{file} {how}: {command}: {}", output.stderr);
        }
        assert_eq!(close_count(&sandbox, "ticket-7"), 0);
    }
}
