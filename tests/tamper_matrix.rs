//! The tamper matrix: every record file a run has — whatever is in its run
//! folder, and every receipt in `.planrun/receipts/` — has a line edited,
//! removed, re-ordered and appended, is emptied and deleted (and a receipt
//! re-sealed by someone without the key), with and without
//! `PLANRUN_HMAC_KEY`, on a run whose `resume` would close a ticket (the
//! canary). Every change is refused alike by `verify`, `show` and `resume`
//! (exit 2, records unchanged, the ticket never closed); the only other
//! outcomes allowed are an appended line read as a crash tail (reported by
//! `verify`, never shown: `show --json` is byte for byte what it was) and a
//! view of the log (`history.jsonl`, `plan.json`, `state.json`) cut short or
//! deleted, which is what a power cut may leave: reported by `verify`,
//! `show --json` unchanged, written again by the next `resume`.
//! The files are found, not named, so the matrix follows the record layout.
//!
//! The ticket system's own receipts in `tickets.json` are the effect's
//! record, not the run's: changing them is proved never to close twice
//! under the key, and what goes undetected without it is what
//! `docs/runs-on-disk.md` says.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use planrun::store::canonical::{canonical_json, sha256_hex};
use planrun::strict_json;
use serde_json::{Value, json};

use crate::common::tickets::{self, RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, close_count, pause, ticket_sandbox};
use crate::common::{Output, Sandbox, TEST_POLICY};

const KEY: &str = "s3cret";

/// A keyed write (its receipt named by the log) and a look-up (two history
/// records), then a keyed close behind an approval: approved and not yet
/// resumed, `resume` would close.
const PLAN: &str = r#"version = 1
id = "test"

[[steps]]
id = "write"
kind = "write_file"
path = "out.txt"
content = "v1"
idempotency_key = "report-{{ run.id }}"

[[steps]]
id = "lookup"
kind = "ticket_lookup"
ticket_id = "ticket-7"

[[steps]]
id = "close"
kind = "ticket_close"
ticket_id = "ticket-7"
approval = "required"
idempotency_key = "close-{{ run.id }}"

[[steps]]
id = "done"
kind = "finish"
"#;

fn planrun(sandbox: &Sandbox, key: Option<&str>, args: &[&str], clock: &str) -> Output {
    let command = sandbox.planrun().in_sandbox().args(args).clock(clock);
    match key {
        Some(key) => command.env("PLANRUN_HMAC_KEY", key).run(),
        None => command.run(),
    }
}

/// The run approved and waiting for `resume` to close the ticket.
fn approved(key: Option<&str>) -> Sandbox {
    let sandbox = ticket_sandbox("open", 0);
    sandbox.write_plan(PLAN, TEST_POLICY);
    let args = ["--plan", "plans/test.toml", "--policies", "policies", "--run-id", RUN];
    let paused = planrun(&sandbox, key, &args, tickets::T_RUN);
    assert_eq!(paused.code, 3, "{}", paused.snapshot());
    let approve = planrun(&sandbox, key, &["approve", RUN], T_APPROVE);
    assert_eq!(approve.code, 0, "{}", approve.snapshot());
    sandbox
}

/// Every record file: the run folder's files (not its lock) and the
/// receipts, as `(label, path)`.
fn record_files(sandbox: &Sandbox) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let run = sandbox.workspace().join("runs").join(RUN);
    let receipts = sandbox.workspace().join(".planrun").join("receipts");
    for (dir, label) in [(&run, "runs/t/"), (&receipts, ".planrun/receipts/")] {
        let mut names: Vec<_> = fs::read_dir(dir)
            .expect("record folder")
            .flatten()
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name != ".lock" && name != ".child")
            .collect();
        names.sort();
        files.extend(names.into_iter().map(|name| (format!("{label}{name}"), dir.join(name))));
    }
    files
}

/// Every byte of every record file and of the tickets, to prove that
/// nothing changed.
fn everything(sandbox: &Sandbox) -> BTreeMap<String, Vec<u8>> {
    let mut all: BTreeMap<String, Vec<u8>> =
        record_files(sandbox).into_iter().map(|(label, path)| (label, fs::read(path).expect("read"))).collect();
    all.insert("tickets.json".into(), fs::read(sandbox.workspace().join("tickets.json")).expect("tickets"));
    all
}

/// The file's content as strict JSON values (a duplicate key is not
/// JSON here): one per line for JSON lines, else one.
fn parsed(text: &str) -> Option<Vec<Value>> {
    match strict_json::parse(text) {
        Ok(value) => Some(vec![value]),
        Err(_) => text.lines().map(|line| strict_json::parse(line).ok()).collect(),
    }
}

fn lines_of(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

fn joined(lines: &[String]) -> String {
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Changes the last digit of the first line from the middle on that has
/// one: the text stays JSON, its meaning changes.
fn edit_digit(text: &str) -> Option<String> {
    let mut lines = lines_of(text);
    let middle = lines.len() / 2;
    let index = (middle..lines.len()).chain(0..middle).find(|&i| lines[i].chars().any(|c| c.is_ascii_digit()))?;
    let line = &lines[index];
    let (at, digit) = line.char_indices().rfind(|(_, c)| c.is_ascii_digit())?;
    let next = char::from(b'0' + (digit as u8 - b'0' + 1) % 10);
    lines[index] = format!("{}{next}{}", &line[..at], &line[at + 1..]);
    Some(joined(&lines))
}

/// Names the first key of the first line from the middle on that has one
/// twice, the first time as `null`: serde_json keeps the last value, so the
/// meaning is unchanged for a lax reader and only a strict one sees it.
fn duplicate_key(text: &str) -> Option<String> {
    let mut lines = lines_of(text);
    let middle = lines.len() / 2;
    let index = (middle..lines.len()).chain(0..middle).find(|&i| lines[i].contains("\":"))?;
    let line = &lines[index];
    let open = line.find('"')?;
    let close = open + 1 + line[open + 1..].find('"')?;
    lines[index] = format!("{}{}:null,{}", &line[..open], &line[open..=close], &line[open..]);
    Some(joined(&lines))
}

/// Swaps the first pair of adjacent lines from the middle on whose swap
/// changes the content's meaning (or breaks it).
fn reorder(text: &str) -> Option<String> {
    let lines = lines_of(text);
    let before = parsed(text);
    let middle = lines.len().saturating_sub(1) / 2;
    (middle..lines.len().saturating_sub(1)).chain(0..middle).find_map(|i| {
        let mut swapped = lines.clone();
        swapped.swap(i, i + 1);
        let text = joined(&swapped);
        (parsed(&text) != before).then_some(text)
    })
}

/// The tampers of one file's text; `None` where one does not apply.
fn tampers(text: &str) -> Vec<(&'static str, Option<String>)> {
    let lines = lines_of(text);
    let remove = (!lines.is_empty()).then(|| {
        let mut removed = lines.clone();
        removed.remove(lines.len() / 2);
        joined(&removed)
    });
    let append = lines.last().map(|last| format!("{text}{last}\n"));
    vec![
        ("edit", edit_digit(text)),
        ("duplicate key", duplicate_key(text)),
        ("remove line", remove),
        ("re-order", reorder(text)),
        ("append", append),
        ("empty", Some(String::new())),
    ]
}

/// Re-seals a sealed receipt after an edit of its payload with a plain
/// SHA-256, as anyone who can write the folder can.
fn reseal(text: &str) -> Option<String> {
    let mut envelope: Value = serde_json::from_str(text).ok()?;
    let payload = envelope.get_mut("payload")?;
    payload["completed_at"] = json!("2026-01-02T00:00:00Z");
    let digest = sha256_hex(canonical_json(payload).ok()?.as_bytes());
    let object = envelope.as_object_mut()?;
    object.remove("hmac_sha256");
    object.insert("sha256".into(), json!(digest));
    serde_json::to_string_pretty(&envelope).ok()
}

/// What a tamper led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// `verify`, `show` and `resume` all exit 2; nothing changed or ran.
    Refused,
    /// An appended line read as a crash tail: `verify` reports it and
    /// `show --json` is what it was.
    CrashTail,
    /// A view (`history.jsonl`, `plan.json`, `state.json`) cut short or
    /// gone, as a power cut leaves it: the log holds every record, so
    /// `verify` reports the view behind, `show --json` is what it was, and
    /// `resume` writes the view again from the log.
    ViewBehind,
}

/// The files that are views of the log, and the tampers that only take
/// something away from them.
const VIEWS: [&str; 3] = ["runs/t/history.jsonl", "runs/t/plan.json", "runs/t/state.json"];
const SHORTENINGS: [&str; 3] = ["remove line", "empty", "delete"];

fn judge(sandbox: &Sandbox, key: Option<&str>, case: &str, shown_before: &str) -> Result<Outcome, String> {
    let before = everything(sandbox);
    let verify = planrun(sandbox, key, &["verify", RUN], T_RESUME);
    if verify.code == 0 {
        let show = planrun(sandbox, key, &["show", RUN, "--json"], T_RESUME);
        let unchanged = show.code == 0 && show.stdout == shown_before;
        return if verify.stdout.contains("crash tail") && unchanged {
            Ok(Outcome::CrashTail)
        } else if verify.stdout.contains("view behind the log") && unchanged {
            let resume = planrun(sandbox, key, &["resume", RUN], T_RESUME);
            let again = planrun(sandbox, key, &["verify", RUN], T_RESUME);
            if resume.code == 0 && again.code == 0 && !again.stdout.contains("view behind") {
                Ok(Outcome::ViewBehind)
            } else {
                Err(format!("{case}: the view was not written again\n{}\n{}", resume.snapshot(), again.snapshot()))
            }
        } else {
            Err(format!("{case}: accepted\n{}\n{}", verify.snapshot(), show.snapshot()))
        };
    }
    for command in ["verify", "show", "resume"] {
        let output = planrun(sandbox, key, &[command, RUN], T_RESUME);
        if output.code != 2 {
            return Err(format!("{case}: `{command}` exits {}\n{}", output.code, output.snapshot()));
        }
    }
    if everything(sandbox) != before {
        return Err(format!("{case}: the records or the tickets changed"));
    }
    if close_count(sandbox, "ticket-7") != 0 {
        return Err(format!("{case}: the canary: the ticket was closed"));
    }
    Ok(Outcome::Refused)
}

#[test]
fn every_record_file_tampered_any_way_is_refused_by_verify_show_and_resume_with_and_without_the_key() {
    let mut matrix: BTreeMap<(String, &str, bool), Outcome> = BTreeMap::new();
    let mut failures = Vec::new();
    for key in [Some(KEY), None] {
        let pristine = approved(key);
        let shown_before = planrun(&pristine, key, &["show", RUN, "--json"], T_RESUME).stdout;
        let files = record_files(&pristine);
        assert!(
            files.iter().any(|(label, _)| label.starts_with(".planrun/receipts/")),
            "the write's receipt: {files:?}"
        );
        for (label, path) in &files {
            let text = fs::read_to_string(path).expect("record");
            let mut cases = tampers(&text);
            cases.push(("delete", None));
            if label.starts_with(".planrun/receipts/") {
                cases.push(("re-sealed", reseal(&text)));
            }
            for (how, tampered) in cases {
                if how != "delete" && tampered.is_none() {
                    failures.push(format!("{label} {how}: the tamper does not apply to this file"));
                    continue;
                }
                let case = format!("{label} {how} (key: {})", key.is_some());
                let sandbox = approved(key);
                let target = sandbox.path().join(path.strip_prefix(pristine.path()).expect("inside the sandbox"));
                match &tampered {
                    Some(text) => fs::write(&target, text).expect("tamper"),
                    None => fs::remove_file(&target).expect("delete"),
                }
                match judge(&sandbox, key, &case, &shown_before) {
                    Ok(outcome) => {
                        if outcome == Outcome::CrashTail && how != "append" {
                            failures.push(format!("{case}: only an appended line may be a crash tail"));
                        }
                        if outcome == Outcome::ViewBehind
                            && !(VIEWS.contains(&label.as_str()) && SHORTENINGS.contains(&how))
                        {
                            failures.push(format!("{case}: only a view cut short may be behind the log"));
                        }
                        let generic = if label.starts_with(".planrun/receipts/") {
                            ".planrun/receipts/*".to_string()
                        } else {
                            label.clone()
                        };
                        matrix.insert((generic, how, key.is_some()), outcome);
                    }
                    Err(failure) => failures.push(failure),
                }
            }
        }
    }
    for ((file, how, keyed), outcome) in &matrix {
        println!("tamper matrix · {file:<24} {how:<12} key: {keyed:<5} → {outcome:?}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The ticket demo crashed after its close, before the checkpoint: its
/// recovery is what `tickets.json`'s receipt answers.
fn crashed_after_the_close(key: Option<&str>) -> Sandbox {
    crashed_at(key, "close:after_effect")
}

/// The ticket demo approved, then its resume crashed at `point` (a
/// `PLANRUN_CRASH_AT` value) after the close.
fn crashed_at(key: Option<&str>, point: &str) -> Sandbox {
    let sandbox = ticket_sandbox("open", 0);
    let run = |args: &[&str], clock: &str, crash: Option<&str>| {
        let mut command = sandbox.planrun().args(args).clock(clock);
        if let Some(key) = key {
            command = command.env("PLANRUN_HMAC_KEY", key);
        }
        if let Some(point) = crash {
            command = command.env("PLANRUN_CRASH_AT", point);
        }
        command.run()
    };
    assert_eq!(run(&["--plan", tickets::PLAN, "--run-id", RUN], tickets::T_RUN, None).code, 3);
    assert_eq!(run(&["approve", RUN], T_APPROVE, None).code, 0);
    assert_eq!(run(&["resume", RUN], T_RESUME, Some(point)).code, -1);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    sandbox
}

/// The documented outcome of a change of the ticket system's receipt.
struct EffectTamper {
    how: &'static str,
    edit: fn(&mut Value),
    /// `(stop reason or status, close_count)` under the key, and without it.
    keyed: (&'static str, u64),
    plain: (&'static str, u64),
}

#[test]
fn the_ticket_systems_receipt_changed_after_a_crash_never_closes_twice_under_the_key() {
    const KEY_T: &str = "close-ticket-7-t";
    let cases = [
        EffectTamper {
            how: "result edited",
            edit: |receipts| receipts[KEY_T]["result"]["output_text"] = json!("ticket-7: closed by mallory"),
            keyed: ("tool_result_uncertain", 1),
            plain: ("done", 1),
        },
        EffectTamper {
            how: "intent edited",
            edit: |receipts| receipts[KEY_T]["intent_digest"] = json!("0".repeat(64)),
            keyed: ("idempotency_conflict", 1),
            plain: ("idempotency_conflict", 1),
        },
        EffectTamper {
            how: "removed",
            edit: |receipts| drop(receipts.as_object_mut().map(|object| object.remove(KEY_T))),
            keyed: ("tool_result_uncertain", 1),
            plain: ("done", 2),
        },
        EffectTamper {
            how: "malformed",
            edit: |receipts| receipts[KEY_T]["result"] = json!({}),
            keyed: ("tool_result_uncertain", 1),
            plain: ("tool_result_uncertain", 1),
        },
        EffectTamper {
            how: "another key's appended",
            edit: |receipts| receipts["close-ticket-8-t"] = receipts[KEY_T].clone(),
            keyed: ("done", 1),
            plain: ("done", 1),
        },
    ];
    for case in cases {
        for key in [Some(KEY), None] {
            let sandbox = crashed_after_the_close(key);
            let mut store = tickets::tickets(&sandbox);
            (case.edit)(&mut store["receipts"]);
            sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
            let mut command = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN);
            if let Some(key) = key {
                command = command.env("PLANRUN_HMAC_KEY", key);
            }
            let output = command.run();
            let show = planrun(&sandbox, key, &["show", RUN, "--json"], T_RESUME_AGAIN);
            assert_eq!(show.code, 0, "{}", show.snapshot());
            let state: Value = serde_json::from_str(&show.stdout).expect("show --json");
            let ended = if state["status"] == "done" { "done" } else { state["stop_reason"].as_str().unwrap_or("?") };
            let expected = if key.is_some() { case.keyed } else { case.plain };
            let what = format!("{} (key: {})", case.how, key.is_some());
            assert_eq!((ended, close_count(&sandbox, "ticket-7")), expected, "{what}\n{}", output.snapshot());
            if ended == "tool_result_uncertain" {
                assert!(state["reconciliation"].is_object(), "{what}: a reconciliation record");
            }
        }
    }
}

/// The limit of the key's promise (docs/runs-on-disk.md): after a crash
/// between the close and the runtime's `done` receipt, the runtime's sealed
/// note says only `started`, and the ticket system's receipt is the one
/// record of the close. If the ticket system loses it, recovery cannot tell
/// the close happened and closes again, with the key as without it.
#[test]
fn the_ticket_systems_receipt_lost_after_a_crash_before_the_runtime_receipt_closes_again_even_under_the_key() {
    for key in [Some(KEY), None] {
        let sandbox = crashed_at(key, "close:before_receipt");
        let mut store = tickets::tickets(&sandbox);
        store["receipts"] = json!({});
        sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&store).expect("JSON"));
        let mut command = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME_AGAIN);
        if let Some(key) = key {
            command = command.env("PLANRUN_HMAC_KEY", key);
        }
        let output = command.run();
        assert_eq!(output.code, 0, "{}", output.snapshot());
        assert_eq!(close_count(&sandbox, "ticket-7"), 2, "key: {}", key.is_some());
    }
}

/// Keeps the helper honest: a tamper of each kind really changes the file.
#[test]
fn every_tamper_changes_the_file() {
    let text = "{\"seq\":1,\"a\":\"x\"}\n{\"seq\":2,\"a\":\"y\"}\n";
    for (how, tampered) in tampers(text) {
        let tampered = tampered.unwrap_or_else(|| panic!("{how} applies"));
        assert_ne!(parsed(&tampered), parsed(text), "{how}");
    }
}

/// Re-links a log's lines as the file store writes them without a key:
/// each line's `prev_hash` is the hash of the line before, each sealed
/// line's seal that of the line without it. Textual, so a line keeps what
/// serde_json would not (a duplicate key). Returns each line's hash.
fn rechain(lines: &mut [String]) -> Vec<String> {
    const SEAL: &str = ",\"seal\":\"";
    const PREV: &str = ",\"prev_hash\":";
    let mut hashes: Vec<String> = Vec::new();
    for line in lines.iter_mut() {
        let start = line.rfind(PREV).expect("prev_hash") + PREV.len();
        let end = start + line[start..].find([',', '}']).expect("the end of prev_hash");
        let previous = hashes.last().map_or("null".to_string(), |hash| format!("\"{hash}\""));
        line.replace_range(start..end, &previous);
        if let Some(at) = line.rfind(SEAL).filter(|&at| line.len() - at == SEAL.len() + 64 + 2) {
            let seal = sha256_hex(format!("{}}}", &line[..at]).as_bytes());
            *line = format!("{}{SEAL}{seal}\"}}", &line[..at]);
        }
        hashes.push(sha256_hex(line.as_bytes()));
    }
    hashes
}

/// Issue 22 item 6: the approved close's head line names its ticket twice,
/// `ticket-8` and then `ticket-7`, re-linked and re-sealed as anyone who can
/// write the folder can without the key (and `state.json`, its compact
/// copy, pointed at the new line). serde_json kept the last value, so
/// `verify` passed and `resume` closed the ticket; a strict reader refuses
/// the line: `verify`, `show` and `resume` exit 2 and nothing is closed.
#[test]
fn a_head_line_with_a_duplicate_key_resealed_is_refused_and_closes_nothing() {
    let sandbox = ticket_sandbox("open", 0);
    pause(&sandbox);
    sandbox.planrun().args(["approve", RUN]).clock(T_APPROVE).expect_code(0).run();
    let folder = sandbox.workspace().join("runs").join(RUN);
    let mut lines = lines_of(&fs::read_to_string(folder.join("audit.jsonl")).expect("log"));
    let head = lines.iter().rposition(|line| line.contains("\"checkpoint\"")).expect("a head line");
    let pending = lines[head].find("\"pending_action\":").expect("the frozen close");
    let at = pending + lines[head][pending..].find("\"ticket_id\":\"ticket-7\"").expect("its ticket");
    lines[head].insert_str(at, "\"ticket_id\":\"ticket-8\",");
    let hashes = rechain(&mut lines);
    fs::write(folder.join("audit.jsonl"), joined(&lines)).expect("write the log");
    let path = folder.join("state.json");
    let mut envelope: Value = serde_json::from_str(&fs::read_to_string(&path).expect("state")).expect("JSON");
    envelope["payload"]["audit_hash"] = json!(hashes[head]);
    envelope["sha256"] = json!(sha256_hex(canonical_json(&envelope["payload"]).expect("canonical").as_bytes()));
    fs::write(&path, serde_json::to_string_pretty(&envelope).expect("JSON")).expect("write the checkpoint");
    let before = (tickets::records(&sandbox), tickets::tickets(&sandbox));
    let verify = sandbox.planrun().args(["verify", RUN]).clock(T_RESUME).expect_code(2).run();
    assert!(verify.stderr.contains("duplicate key `ticket_id`"), "{}", verify.stderr);
    sandbox.planrun().args(["show", RUN]).clock(T_RESUME).expect_code(2).run();
    let resume = sandbox.planrun().args(["resume", RUN]).clock(T_RESUME).expect_code(2).run();
    assert!(resume.stderr.contains("duplicate key `ticket_id`"), "{}", resume.stderr);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "the ticket stays open");
    assert_eq!(tickets::tickets(&sandbox)["tickets"]["ticket-7"]["status"], "open");
    assert_eq!((tickets::records(&sandbox), tickets::tickets(&sandbox)), before, "nothing was written");
}
