//! What changed in behaviour, in a reviewer's terms, for one scenario whose
//! snapshots differ from the golden ones: printed by `planrun test` before
//! the raw diffs, e.g. "step `step-4` finish message changed; exit code
//! unchanged; 0 events added".
//!
//! It reads the snapshot bodies back (old and new, as rendered): the step
//! records of `history.jsonl` by step and attempt, the exit codes of
//! `@cli`, the event sequence of `audit.jsonl`, the outcome fields of
//! `state.json`. A body it cannot read (a snapshot of an older format) is
//! named as changed.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;
use similar::{Algorithm, DiffOp, capture_diff_slices};

use crate::snapshot::normalize_body;

/// One snapshot of the scenario: what it is (`cli`, `state.json` …, the
/// snapshot name after `@`), its golden body if any, and its new body.
pub(crate) struct Bodies<'a> {
    pub kind: &'a str,
    pub golden: Option<&'a str>,
    pub body: &'a str,
}

/// The sentences for one scenario's snapshots (each with its golden body,
/// if any, and its new body), in a fixed order: steps, exit codes, events,
/// the final state, the plan, other files, new snapshots.
pub(crate) fn summarize(snapshots: &[Bodies<'_>]) -> Vec<String> {
    if snapshots.iter().all(|result| result.golden.is_none()) {
        return vec![format!("a new scenario ({} snapshot(s))", snapshots.len())];
    }
    let mut sentences = Vec::new();
    let part = |kind: &str| snapshots.iter().find(|result| result.kind == kind && result.golden.is_some());
    if let Some(history) = part("history.jsonl").filter(|result| differs(result)) {
        sentences.extend(history_changes(history));
    }
    if let Some(cli) = part("cli") {
        sentences.extend(exit_code_changes(cli));
    }
    if let Some(audit) = part("audit.jsonl") {
        sentences.push(event_changes(audit));
    }
    if let Some(state) = part("state.json").filter(|result| differs(result)) {
        sentences.extend(state_changes(state));
    }
    for result in snapshots.iter().filter(|result| differs(result)) {
        let kind = result.kind;
        match (&result.golden, kind) {
            (None, _) => sentences.push(format!("new snapshot `{kind}`")),
            (Some(_), "plan.json") => sentences.push("the plan changed".to_string()),
            (Some(_), "cli" | "history.jsonl" | "audit.jsonl" | "state.json") => {}
            (Some(_), other) => sentences.push(format!("`{other}` changed")),
        }
    }
    sentences
}

fn differs(result: &Bodies<'_>) -> bool {
    result.golden.is_none_or(|golden| normalize_body(golden) != normalize_body(result.body))
}

/// The blocks of a rendered record (each from a line `{` to a line `}`,
/// see `snapshot::render_record`), each read as JSON; a placeholder a rule
/// put where a value was (`"stdout_bytes": [BYTES]`) reads as a string. A
/// block that still does not read is `null`, so that it is still counted.
fn blocks(body: &str) -> Vec<Value> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in body.lines() {
        match (&mut current, line) {
            (None, "{") => current = Some("{\n".to_string()),
            (Some(block), "}") => {
                block.push('}');
                blocks.push(read_block(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

static BARE_PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?m)^(\s*(?:"[^"]*": )?)(\[[^\]"\n]*\])(,?)$"#).expect("a valid regex"));

fn read_block(block: &str) -> Value {
    serde_json::from_str(block)
        .or_else(|_| serde_json::from_str(&BARE_PLACEHOLDER.replace_all(block, "$1\"$2\"$3")))
        .unwrap_or(Value::Null)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "none".to_string(),
        other => other.to_string(),
    }
}

/// Per step attempt: added, removed, or which fields changed.
fn history_changes(result: &Bodies<'_>) -> Vec<String> {
    let old = blocks(result.golden.unwrap_or_default());
    let new = blocks(result.body);
    if old.is_empty() || new.is_empty() {
        return vec!["`history.jsonl` changed".to_string()];
    }
    let key = |record: &Value| (text(&record["step_id"]), text(&record["attempt"]));
    let mut sentences = Vec::new();
    for record in &new {
        let (step, attempt) = key(record);
        match old.iter().find(|earlier| key(earlier) == (step.clone(), attempt.clone())) {
            None => sentences.push(format!("step `{step}` attempt {attempt} added")),
            Some(earlier) if earlier != record => {
                sentences.push(format!("step `{step}` {}", field_changes(earlier, record)));
            }
            Some(_) => {}
        }
    }
    for record in &old {
        if !new.iter().any(|later| key(later) == key(record)) {
            let (step, attempt) = key(record);
            sentences.push(format!("step `{step}` attempt {attempt} removed"));
        }
    }
    sentences
}

/// "status done → failed, finish message and output changed".
fn field_changes(old: &Value, new: &Value) -> String {
    let mut moved = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut name = |label: String| {
        if !names.contains(&label) {
            names.push(label);
        }
    };
    let fields = new.as_object().into_iter().flatten().chain(old.as_object().into_iter().flatten());
    let mut seen = Vec::new();
    for (field, _) in fields {
        if seen.contains(field) || old.get(field) == new.get(field) {
            continue;
        }
        seen.push(field.clone());
        let (before, after) = (old.get(field).unwrap_or(&Value::Null), new.get(field).unwrap_or(&Value::Null));
        match field.as_str() {
            "status" => moved.push(format!("status {} → {}", text(before), text(after))),
            "failure_class" => moved.push(format!("failure class {} → {}", text(before), text(after))),
            "output_text" => name("output".to_string()),
            "started_at" | "finished_at" | "duration_ms" => name("times".to_string()),
            "action" | "details" => {
                for inner in changed_keys(before, after) {
                    name(match (field.as_str(), inner.as_str()) {
                        ("action", "message") => "finish message".to_string(),
                        ("action", other) => format!("action `{other}`"),
                        (_, other) => format!("`{other}`"),
                    });
                }
            }
            other => name(format!("`{other}`")),
        }
    }
    if !names.is_empty() {
        moved.push(format!("{} changed", names.join(", ")));
    }
    moved.join(", ")
}

/// The keys whose values differ between two objects (the whole value when
/// either is not an object).
fn changed_keys(old: &Value, new: &Value) -> Vec<String> {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else { return vec!["value".to_string()] };
    let mut keys: Vec<String> = Vec::new();
    for key in new.keys().chain(old.keys()) {
        if old.get(key) != new.get(key) && !keys.contains(key) {
            keys.push(key.clone());
        }
    }
    keys
}

/// The exit code of each command of a CLI snapshot, with its label.
fn exit_codes(body: &str) -> Vec<(String, String)> {
    let mut label = "run".to_string();
    let mut codes = Vec::new();
    for line in body.lines() {
        if let Some(stage) = line.strip_prefix("===== ") {
            label = stage.to_string();
        } else if let Some(code) = line.strip_prefix("exit_code: ") {
            codes.push((label.clone(), code.to_string()));
        }
    }
    codes
}

fn exit_code_changes(result: &Bodies<'_>) -> Vec<String> {
    let new = exit_codes(result.body);
    let Some(golden) = result.golden else {
        return Vec::new();
    };
    let old = exit_codes(golden);
    let word = if new.len() > 1 { "exit codes" } else { "exit code" };
    if old == new {
        return vec![format!("{word} unchanged")];
    }
    if old.len() != new.len() {
        return vec![format!("{} command(s) instead of {}", new.len(), old.len())];
    }
    old.iter()
        .zip(&new)
        .filter(|(before, after)| before != after)
        .map(|((_, before), (label, after))| format!("exit code of `{label}` {before} → {after}"))
        .collect()
}

/// "2 events added (step_started, step_finished), 1 removed (…)".
fn event_changes(result: &Bodies<'_>) -> String {
    let labels = |body: &str| -> Vec<String> {
        blocks(body)
            .iter()
            .map(|event| match event["step_id"].as_str() {
                Some(step) => format!("{} {step}", text(&event["event_type"])),
                None => text(&event["event_type"]),
            })
            .collect()
    };
    let new = labels(result.body);
    let old = result.golden.map(labels).unwrap_or_default();
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    for op in capture_diff_slices(Algorithm::Myers, &old, &new) {
        match op {
            DiffOp::Insert { new_index, new_len, .. } => added.extend_from_slice(&new[new_index..new_index + new_len]),
            DiffOp::Delete { old_index, old_len, .. } => {
                removed.extend_from_slice(&old[old_index..old_index + old_len])
            }
            DiffOp::Replace { old_index, old_len, new_index, new_len } => {
                removed.extend_from_slice(&old[old_index..old_index + old_len]);
                added.extend_from_slice(&new[new_index..new_index + new_len]);
            }
            DiffOp::Equal { .. } => {}
        }
    }
    let listed = |events: &[String]| {
        if events.is_empty() || events.len() > 4 { String::new() } else { format!(" ({})", events.join(", ")) }
    };
    let events = if added.len() == 1 { "event" } else { "events" };
    let mut sentence = format!("{} {events} added{}", added.len(), listed(&added));
    if !removed.is_empty() {
        sentence.push_str(&format!(", {} removed{}", removed.len(), listed(&removed)));
    }
    if added.is_empty() && removed.is_empty() && differs(result) {
        // The same events: say which of them hold something else.
        let (old_events, new_events) = (blocks(result.golden.unwrap_or_default()), blocks(result.body));
        let changed: Vec<String> = new_events
            .iter()
            .zip(&old_events)
            .zip(&new)
            .filter(|((after, before), _)| after != before)
            .map(|(_, label)| label.clone())
            .collect();
        sentence.push_str(&format!("; {} event(s) changed{}", changed.len(), listed(&changed)));
    }
    sentence
}

/// The outcome fields of the final state that changed.
fn state_changes(result: &Bodies<'_>) -> Vec<String> {
    let payload = |body: &str| blocks(body).into_iter().next().map(|state| state["payload"].clone());
    let (Some(old), Some(new)) = (payload(result.golden.unwrap_or_default()), payload(result.body)) else {
        return vec!["`state.json` changed".to_string()];
    };
    let mut sentences = Vec::new();
    for (field, words) in [("status", "final status"), ("stop_reason", "stop reason")] {
        if old[field] != new[field] {
            sentences.push(format!("{words} {} → {}", text(&old[field]), text(&new[field])));
        }
    }
    let others: Vec<String> = changed_keys(&old, &new)
        .into_iter()
        .filter(|key| key != "status" && key != "stop_reason")
        .map(|key| format!("`{key}`"))
        .collect();
    if !others.is_empty() {
        sentences.push(format!("final state {} changed", others.join(", ")));
    }
    sentences
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies<'a>(kind: &'a str, golden: &'a str, body: &'a str) -> Bodies<'a> {
        Bodies { kind, golden: Some(golden), body }
    }

    #[test]
    fn a_changed_finish_message_reads_as_one_sentence_per_part() {
        let old_history = "{\n  \"step_id\": \"s\",\n  \"attempt\": 1,\n  \"status\": \"done\",\n  \"action\": {\n    \"message\": \"a\"\n  },\n  \"output_text\": \"a\"\n}\n";
        let new_history = old_history.replace("\"a\"", "\"b\"");
        let audit = "{\n  \"event_type\": \"run_started\",\n  \"step_id\": null\n}\n";
        let more =
            format!("{audit}{{\n  \"event_type\": \"step_started\",\n  \"step_id\": \"s\",\n  \"n\": [BYTES]\n}}\n");
        let cli = "===== run\nexit_code: 3\n===== resume\nexit_code: 0\n";
        let sentences = summarize(&[
            bodies("cli", cli, &cli.replace("exit_code: 0", "exit_code: 1")),
            bodies("history.jsonl", old_history, &new_history),
            bodies("audit.jsonl", audit, &more),
            Bodies { kind: "tickets.json", golden: None, body: "{}" },
        ]);
        assert_eq!(
            sentences,
            [
                "step `s` finish message, output changed",
                "exit code of `resume` 0 → 1",
                "1 event added (step_started s)",
                "new snapshot `tickets.json`"
            ]
        );
    }

    #[test]
    fn a_status_change_and_added_attempts_are_named() {
        let old = "{\n  \"step_id\": \"s\",\n  \"attempt\": 1,\n  \"status\": \"done\"\n}\n";
        let new = "{\n  \"step_id\": \"s\",\n  \"attempt\": 1,\n  \"status\": \"failed\"\n}\n{\n  \"step_id\": \"s\",\n  \"attempt\": 2,\n  \"status\": \"done\"\n}\n";
        let sentences = summarize(&[bodies("history.jsonl", old, new)]);
        assert_eq!(sentences, ["step `s` status done → failed", "step `s` attempt 2 added"]);
        let audit = "{\n  \"event_type\": \"step_finished\",\n  \"step_id\": \"s\",\n  \"path\": \"a\"\n}\n";
        let changed = summarize(&[bodies("audit.jsonl", audit, &audit.replace("\"a\"", "\"b\""))]);
        assert_eq!(changed, ["0 events added; 1 event(s) changed (step_finished s)"]);
        let new_only = summarize(&[Bodies { kind: "cli", golden: None, body: "" }]);
        assert_eq!(new_only, ["a new scenario (1 snapshot(s))"]);
    }
}
