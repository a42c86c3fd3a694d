//! Record files as they read in a snapshot: line-granular, so that a
//! changed word is a changed line of the diff, never a 1 500-character line
//! replaced by another.
//!
//! - A JSON file (`state.json`, `plan.json`, `tickets.json`) is
//!   pretty-printed: one field per line, in the order the record writes
//!   its fields (a fixed order: the record's own).
//! - A JSON Lines file (`audit.jsonl`, `history.jsonl`) is one
//!   pretty-printed block per line, in file order.
//! - A text of several lines (the `output_text` of `ls`, an instruction)
//!   is shown as the list of its lines, each ending in `\n`.
//! - A head line of a log (`state_saved`, `run_finished`) carries the
//!   whole checkpoint in `details.checkpoint`; the snapshot shows what it
//!   adds: `state_changed`, the fields of the state that differ from the
//!   previous head line's (every field on the first), `history_added`,
//!   one `<step_id> attempt <n>: <status>` per step record it carries (in
//!   full in `history.jsonl`), and `plan` when it carries the plan (in
//!   full in `plan.json`).
//! - A line or file that is not JSON (a torn crash tail) is shown as it is.
//!
//! - A step's `details.sandbox` (which sandbox confined its program, and
//!   the kernel's Landlock ABI) is left out: it depends on the kernel the
//!   snapshot was taken on, not on the plan.
//!
//! What varies with other bytes (digests) is replaced afterwards by
//! [`super::hash_placeholders`].

use serde_json::{Map, Value};

/// `text`, the content of the record file `name`, as a snapshot shows it
/// (see the module); a file that is neither `.json` nor `.jsonl` is
/// returned as it is.
pub fn render_record(name: &str, text: &str) -> String {
    if name.ends_with(".jsonl") {
        let mut previous = Map::new();
        let mut rendered = String::new();
        for line in text.lines() {
            match serde_json::from_str::<Value>(line) {
                Ok(mut event) => {
                    summarize_checkpoint(&mut event, &mut previous);
                    rendered.push_str(&pretty(event));
                }
                Err(_) => rendered.push_str(line),
            }
            rendered.push('\n');
        }
        rendered
    } else if name.ends_with(".json") {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => format!("{}\n", pretty(value)),
            Err(_) => text.to_string(),
        }
    } else {
        text.to_string()
    }
}

/// Pretty JSON, each text of several lines split into its lines.
fn pretty(value: Value) -> String {
    let value = split_lines(without_sandbox(value));
    serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string())
}

/// `value` without the `sandbox` of any `details` (see the module).
fn without_sandbox(value: Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(without_sandbox).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| match (key.as_str(), value) {
                    ("details", Value::Object(mut details)) => {
                        details.shift_remove("sandbox");
                        (key, without_sandbox(Value::Object(details)))
                    }
                    (_, value) => (key, without_sandbox(value)),
                })
                .collect(),
        ),
        other => other,
    }
}

fn split_lines(value: Value) -> Value {
    match value {
        Value::String(text) if text.trim_end_matches('\n').contains('\n') => {
            Value::Array(text.split_inclusive('\n').map(|line| Value::String(line.to_string())).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(split_lines).collect()),
        Value::Object(fields) => {
            Value::Object(fields.into_iter().map(|(key, value)| (key, split_lines(value))).collect())
        }
        other => other,
    }
}

/// Replaces the checkpoint of a head line by what it adds (see the
/// module); `previous` is the state of the previous head line, and
/// becomes this one's.
fn summarize_checkpoint(event: &mut Value, previous: &mut Map<String, Value>) {
    let Some(checkpoint) = event.pointer_mut("/details/checkpoint") else { return };
    let Some(state) = checkpoint.get("state").and_then(Value::as_object).cloned() else { return };
    let changed: Map<String, Value> = state
        .iter()
        .filter(|(key, value)| previous.get(*key) != Some(*value))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let history: Vec<Value> = checkpoint
        .get("history")
        .and_then(Value::as_array)
        .map(|records| records.iter().map(record_label).collect())
        .unwrap_or_default();
    let mut summary = Map::new();
    summary.insert("state_changed".to_string(), Value::Object(changed));
    summary.insert("history_added".to_string(), Value::Array(history));
    if checkpoint.get("plan").is_some_and(|plan| !plan.is_null()) {
        summary.insert("plan".to_string(), Value::String("[the plan, as in plan.json]".to_string()));
    }
    *checkpoint = Value::Object(summary);
    *previous = state;
}

/// `<step_id> attempt <n>: <status>` of a step record.
fn record_label(record: &Value) -> Value {
    let field = |key: &str| match record.get(key) {
        Some(Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
        None => "?".to_string(),
    };
    Value::String(format!("{} attempt {}: {}", field("step_id"), field("attempt"), field("status")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_file_is_one_field_per_line_in_its_own_order() {
        let rendered = render_record("state.json", r#"{"z":1,"a":{"b":[true]}}"#);
        assert_eq!(rendered, "{\n  \"z\": 1,\n  \"a\": {\n    \"b\": [\n      true\n    ]\n  }\n}\n");
    }

    #[test]
    fn a_step_s_sandbox_is_left_out() {
        let line = r#"{"step_id":"s","details":{"rule":"ls","sandbox":{"kind":"landlock","abi":7},"exit_code":0}}"#;
        let rendered = render_record("history.jsonl", line);
        assert!(!rendered.contains("sandbox") && !rendered.contains("abi"), "{rendered}");
        assert!(rendered.contains("\"rule\": \"ls\"") && rendered.contains("\"exit_code\": 0"), "{rendered}");
    }

    #[test]
    fn a_text_of_several_lines_is_the_list_of_its_lines() {
        let rendered = render_record("h.jsonl", r#"{"output_text":"a\nb\n","one":"x\n"}"#);
        assert_eq!(rendered, "{\n  \"output_text\": [\n    \"a\\n\",\n    \"b\\n\"\n  ],\n  \"one\": \"x\\n\"\n}\n");
    }

    #[test]
    fn a_head_line_shows_what_its_checkpoint_adds() {
        let log = [
            r#"{"seq":1,"event_type":"run_started"}"#,
            r#"{"seq":2,"event_type":"state_saved","details":{"state_version":1,"checkpoint":{"state":{"status":"running","state_version":1,"goal":"g"},"history":[],"plan":{"id":"p"}}}}"#,
            r#"{"seq":3,"event_type":"state_saved","details":{"state_version":2,"checkpoint":{"state":{"status":"done","state_version":2,"goal":"g"},"history":[{"step_id":"s","attempt":1,"status":"done"}]}}}"#,
            r#"{"seq":4,"torn"#,
        ]
        .join("\n");
        let rendered = render_record("audit.jsonl", &log);
        let values: Vec<Value> = serde_json::Deserializer::from_str(rendered.trim_end_matches("{\"seq\":4,\"torn\n"))
            .into_iter()
            .collect::<Result<_, _>>()
            .expect("blocks of JSON");
        let first = &values[1]["details"]["checkpoint"];
        assert_eq!(first["state_changed"], serde_json::json!({"status": "running", "state_version": 1, "goal": "g"}));
        assert_eq!(first["plan"], "[the plan, as in plan.json]");
        let second = &values[2]["details"]["checkpoint"];
        assert_eq!(second["state_changed"], serde_json::json!({"status": "done", "state_version": 2}));
        assert_eq!(second["history_added"], serde_json::json!(["s attempt 1: done"]));
        assert!(second.get("plan").is_none());
        assert!(rendered.ends_with("\n{\"seq\":4,\"torn\n"), "a torn line stays as it is: {rendered}");
    }

    #[test]
    fn other_files_and_text_that_is_not_json_stay_as_they_are() {
        assert_eq!(render_record("notes.txt", "a\nb"), "a\nb");
        assert_eq!(render_record("x.json", "not json"), "not json");
    }
}
