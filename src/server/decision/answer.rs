//! Validation of a model's answer after decoding, against the [`Choices`]
//! the request offered. Structured output makes a valid answer likely, not
//! certain (a server may ignore the schema), so nothing is trusted:
//!
//! - the answer is exactly one JSON object (inside one markdown fence at
//!   most); prose around it is refused, because a model that talks around
//!   its JSON did not follow the schema and its first `{` may be an echo;
//! - the keys are `action`, `plan_id` and `reason`, nothing else (an echo of
//!   the schema itself has `type` and `properties`);
//! - `action` is an offered action, `plan_id` an offered plan for
//!   `run_plan`;
//! - `reason` is at most [`MAX_REASON_CHARS`] characters and is not a
//!   placeholder (`<…>`) or the schema's own description.

use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use crate::server::decision::choices::{Choices, MAX_REASON_CHARS, REASON_DESCRIPTION};
use crate::strict_json;

/// What a valid answer chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    RunPlan(String),
    Stop,
}

/// A model's answer that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDecision {
    pub choice: Choice,
    pub reason: Option<String>,
}

/// Why a model's answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidDecision {
    #[error("no JSON object in the answer")]
    NoJson,
    #[error("truncated JSON")]
    Truncated,
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("text around the JSON object (the answer must be the object alone)")]
    Prose,
    #[error("the answer echoes the decision schema instead of choosing")]
    SchemaEcho,
    #[error("unknown key `{0}` (allowed: `action`, `plan_id`, `reason`)")]
    UnknownKey(String),
    #[error("`action` must be one of {offered}, found {found}")]
    Action { found: String, offered: String },
    #[error("`plan_id` must be one of {offered}, found {found}")]
    Plan { found: String, offered: String },
    #[error("`reason` must be a string of at most 200 characters")]
    Reason,
    #[error("`reason` is a placeholder or the schema's text, not a reason")]
    Placeholder,
}

/// Validates `text` against `choices`.
pub fn parse_decision(text: &str, choices: &Choices) -> Result<ParsedDecision, InvalidDecision> {
    let object = json_object(text)?;
    if object.contains_key("properties") || object.contains_key("type") || object.contains_key("$schema") {
        return Err(InvalidDecision::SchemaEcho);
    }
    if let Some(key) = object.keys().find(|key| !matches!(key.as_str(), "action" | "plan_id" | "reason")) {
        return Err(InvalidDecision::UnknownKey(key.clone()));
    }
    let offered_actions = quoted(choices.actions());
    let action = match object.get("action") {
        Some(Value::String(action)) if choices.actions().contains(&action.as_str()) => action.as_str(),
        Some(other) => return Err(InvalidDecision::Action { found: other.to_string(), offered: offered_actions }),
        None => return Err(InvalidDecision::Action { found: "nothing".to_string(), offered: offered_actions }),
    };
    let choice = if action == "run_plan" {
        match object.get("plan_id") {
            Some(Value::String(id)) if choices.offers_plan(id) => Choice::RunPlan(id.clone()),
            found => {
                return Err(InvalidDecision::Plan {
                    found: found.map_or_else(|| "nothing".to_string(), Value::to_string),
                    offered: quoted(choices.plan_ids()),
                });
            }
        }
    } else {
        // A `plan_id` next to `stop` is ignored: grammar-constrained decoding
        // may fill it with an offered id, and stopping runs nothing.
        Choice::Stop
    };
    let reason = match object.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) if reason.chars().count() <= MAX_REASON_CHARS => {
            let reason = reason.trim();
            if is_placeholder(reason) {
                return Err(InvalidDecision::Placeholder);
            }
            Some(reason.to_string()).filter(|reason| !reason.is_empty())
        }
        Some(_) => return Err(InvalidDecision::Reason),
    };
    Ok(ParsedDecision { choice, reason })
}

/// The one JSON object `text` holds (optionally in one markdown fence).
fn json_object(text: &str) -> Result<Map<String, Value>, InvalidDecision> {
    let body = unfenced(text.trim())?;
    if !body.starts_with('{') {
        return Err(if body.contains('{') { InvalidDecision::Prose } else { InvalidDecision::NoJson });
    }
    // Where the first value ends; the strict reader then reads it (or
    // says why the text is not one).
    let mut stream = serde_json::Deserializer::from_str(body).into_iter::<IgnoredAny>();
    let end = match stream.next() {
        Some(Ok(_)) => stream.byte_offset(),
        Some(Err(error)) if error.is_eof() => return Err(InvalidDecision::Truncated),
        Some(Err(_)) | None => body.len(),
    };
    if !body[end..].trim().is_empty() {
        return Err(InvalidDecision::Prose);
    }
    match strict_json::parse(&body[..end]).map_err(|error| InvalidDecision::Json(error.to_string()))? {
        Value::Object(object) => Ok(object),
        _ => Err(InvalidDecision::NoJson),
    }
}

/// The inside of a fence that spans the whole text, or the text itself; a
/// fence with text before or after it is prose.
fn unfenced(text: &str) -> Result<&str, InvalidDecision> {
    let Some(open) = text.find("```") else {
        return Ok(text);
    };
    if open > 0 {
        return Err(InvalidDecision::Prose);
    }
    let after = &text[3..];
    // Skip the language tag (```json).
    let after = after.find('\n').map_or(after, |newline| &after[newline + 1..]);
    match after.rfind("```") {
        Some(close) if after[close + 3..].trim().is_empty() => Ok(after[..close].trim()),
        Some(_) => Err(InvalidDecision::Prose),
        None => Ok(after.trim()),
    }
}

/// A reason that is a template slot (`<short reason>`) or the schema's text.
fn is_placeholder(reason: &str) -> bool {
    let lowered = reason.to_lowercase();
    (reason.starts_with('<') && reason.ends_with('>')) || lowered.contains(REASON_DESCRIPTION) || lowered.contains("{{")
}

fn quoted(items: Vec<&str>) -> String {
    items.iter().map(|item| format!("`{item}`")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::decision::choices::OfferedPlan;

    fn run_or_stop() -> Choices {
        Choices::run_or_stop(OfferedPlan { id: "flow_pwd".into(), description: "pwd".into() })
    }

    #[test]
    fn answers_choose_from_the_offered_set() {
        let choices = run_or_stop();
        let ok = |text: &str| parse_decision(text, &choices).expect("valid");
        assert_eq!(
            ok(r#"{"action": "run_plan", "plan_id": "flow_pwd", "reason": "first run"}"#),
            ParsedDecision { choice: Choice::RunPlan("flow_pwd".into()), reason: Some("first run".into()) }
        );
        assert_eq!(ok("```json\n{\"action\": \"stop\", \"plan_id\": null}\n```").choice, Choice::Stop);
        assert_eq!(ok(r#"{"action": "stop", "plan_id": "flow_pwd", "reason": ""}"#).reason, None);
        let refused = |text: &str| parse_decision(text, &choices).expect_err("invalid");
        assert_eq!(refused(r#"{"action": "run_plan", "plan_id": "flow_pwd"#), InvalidDecision::Truncated);
        assert_eq!(refused("no json here"), InvalidDecision::NoJson);
        assert_eq!(refused("Sure! {\"action\": \"stop\"}"), InvalidDecision::Prose);
        assert_eq!(refused("{\"action\": \"stop\"} thanks"), InvalidDecision::Prose);
        assert_eq!(refused("Here:\n```json\n{\"action\": \"stop\"}\n```"), InvalidDecision::Prose);
        assert!(matches!(refused(r#"{"action": "run_agent", "plan_id": "flow_pwd"}"#), InvalidDecision::Action { .. }));
        assert!(matches!(refused(r#"{"action": "run_plan", "plan_id": "fallback"}"#), InvalidDecision::Plan { .. }));
        assert!(matches!(refused(r#"{"action": "run_plan"}"#), InvalidDecision::Plan { .. }));
        assert_eq!(
            refused(r#"{"action": "run_plan", "plan_id": "flow_pwd", "goal": "<goal for the agent>"}"#),
            InvalidDecision::UnknownKey("goal".into())
        );
        assert_eq!(refused(r#"{"type": "object", "properties": {}}"#), InvalidDecision::SchemaEcho);
        assert_eq!(refused(r#"{"action": "stop", "reason": "<short reason>"}"#), InvalidDecision::Placeholder);
        let echo = format!(r#"{{"action": "stop", "reason": "{REASON_DESCRIPTION}"}}"#);
        assert_eq!(refused(&echo), InvalidDecision::Placeholder);
        let long = format!(r#"{{"action": "stop", "reason": "{}"}}"#, "x".repeat(201));
        assert_eq!(refused(&long), InvalidDecision::Reason);
        let longest = format!(r#"{{"action": "stop", "reason": "{}"}}"#, "é".repeat(200));
        assert!(parse_decision(&longest, &choices).is_ok());
        assert!(matches!(refused(r#"{"action": "stop",, }"#), InvalidDecision::Json(_)));
        // Strict JSON: a repeated key (which one would the model mean?) and
        // a non-number are refused by name.
        let twice = refused(r#"{"action": "stop", "action": "run_plan", "plan_id": "flow_pwd"}"#);
        assert!(
            matches!(&twice, InvalidDecision::Json(message) if message.contains("duplicate key `action`")),
            "{twice}"
        );
        let nan = refused(r#"{"action": "stop", "n": NaN}"#);
        assert!(
            matches!(&nan, InvalidDecision::Json(message) if message.contains("`NaN` is not a JSON number")),
            "{nan}"
        );
    }

    #[test]
    fn only_stop_is_valid_when_only_stop_is_offered() {
        let choices = Choices::stop_only("the last run is done and verified");
        assert!(matches!(
            parse_decision(r#"{"action": "run_plan", "plan_id": "flow_pwd"}"#, &choices),
            Err(InvalidDecision::Action { .. })
        ));
        assert_eq!(
            parse_decision(r#"{"action": "stop", "plan_id": null, "reason": "done"}"#, &choices).map(|d| d.choice),
            Ok(Choice::Stop)
        );
    }
}
