//! Validation of a model's answer after decoding, against the [`Choices`]
//! the request offered. Structured output makes a valid answer likely, not
//! certain (a server may ignore the schema), so nothing is trusted:
//!
//! - the answer holds exactly one JSON object, in at most one markdown
//!   fence. Text around it (a sentence before or after, the fence) is
//!   stripped and recorded ([`Stripped`]): small models add it even when
//!   given a schema. Two objects (an echo and an answer, say) are refused,
//!   and so are two fences;
//! - the keys are `action`, `plan_id` and `reason`, nothing else (an echo of
//!   the schema itself has `type` and `properties`);
//! - `action` is an offered action, `plan_id` an offered plan for
//!   `run_plan`;
//! - `reason` is at most [`MAX_REASON_CHARS`] characters and is not a
//!   placeholder (`<…>`) or the schema's own description.

use serde_json::{Map, Value};

use crate::ops::service::decision::choices::{Choices, MAX_REASON_CHARS, REASON_DESCRIPTION};
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
    /// What was stripped from around the JSON object, if anything.
    pub stripped: Option<Stripped>,
}

/// The text around an answer's one JSON object that validation stripped:
/// characters of prose before and after it (inside and outside the fence,
/// white space not counted) and whether it was in a markdown fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stripped {
    pub chars_before: usize,
    pub chars_after: usize,
    pub fence: bool,
}

impl Stripped {
    /// How the evidence's `verdict_reason` says it.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.fence {
            parts.push("a markdown fence".to_string());
        }
        if self.chars_before > 0 {
            parts.push(format!("{} characters before the object", self.chars_before));
        }
        if self.chars_after > 0 {
            parts.push(format!("{} characters after it", self.chars_after));
        }
        parts.join(", ")
    }
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
    #[error("more than one JSON object in the answer (exactly one is a decision)")]
    SeveralObjects,
    #[error("more than one markdown fence in the answer (at most one is stripped)")]
    SeveralFences,
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
    let (object, stripped) = json_object(text)?;
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
    Ok(ParsedDecision { choice, reason, stripped })
}

/// The one JSON object `text` holds, and what was stripped around it: at
/// most one markdown fence, and prose before and after the object.
fn json_object(text: &str) -> Result<(Map<String, Value>, Option<Stripped>), InvalidDecision> {
    let text = text.trim();
    let fenced = match unfenced(text)? {
        // A fence around no JSON (a stray closing fence after the object,
        // say): the object is outside it, and the fence is prose.
        fenced if fenced.fence && !fenced.body.contains('{') => Fenced { body: text, fence: true, before: 0, after: 0 },
        fenced => fenced,
    };
    let body = fenced.body;
    // An answer that starts as JSON is read as JSON: a cut-off or malformed
    // object is refused as such, never searched for another one inside it.
    if body.starts_with('{') {
        let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
        match stream.next() {
            Some(Err(error)) if error.is_eof() => return Err(InvalidDecision::Truncated),
            Some(Err(error)) => {
                // The strict reader names what a lenient one only calls
                // unexpected (`NaN`, a repeated key).
                let named =
                    strict_json::parse(body).err().map_or_else(|| error.to_string(), |strict| strict.to_string());
                return Err(InvalidDecision::Json(named));
            }
            _ => {}
        }
    }
    let mut found = objects(body);
    let (start, end) = match (found.next(), found.next()) {
        (Some((start, end, _)), None) => (start, end),
        (Some(_), Some(_)) => return Err(InvalidDecision::SeveralObjects),
        (None, _) if truncated_object(body) => return Err(InvalidDecision::Truncated),
        (None, _) => return Err(InvalidDecision::NoJson),
    };
    // The object found, read again by the strict reader: a repeated key or
    // a non-number is refused by name, never resolved by the last value.
    let object =
        match strict_json::parse(&body[start..end]).map_err(|error| InvalidDecision::Json(error.to_string()))? {
            Value::Object(object) => object,
            _ => return Err(InvalidDecision::NoJson),
        };
    let stripped = Stripped {
        chars_before: fenced.before + visible(&body[..start]),
        chars_after: visible(&body[end..]) + fenced.after,
        fence: fenced.fence,
    };
    let untouched = Stripped { chars_before: 0, chars_after: 0, fence: false };
    Ok((object, (stripped != untouched).then_some(stripped)))
}

/// Characters of `text` that are not white space.
fn visible(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

/// Every JSON object in `text` that starts at a `{` outside another one, in
/// order, with its byte span; a `{` where no JSON object starts is prose.
fn objects(text: &str) -> impl Iterator<Item = (usize, usize, Map<String, Value>)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while let Some(offset) = text[at..].find('{') {
            let start = at + offset;
            let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
            if let Some(Ok(Value::Object(object))) = stream.next() {
                at = start + stream.byte_offset();
                return Some((start, at, object));
            }
            at = start + 1;
        }
        None
    })
}

/// Whether a `{` of `text` opens a JSON value cut off at the end of the
/// text (the model hit its limit mid-object).
fn truncated_object(text: &str) -> bool {
    text.match_indices('{').any(|(start, _)| {
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        matches!(stream.next(), Some(Err(error)) if error.is_eof())
    })
}

/// An answer's text without its markdown fence.
struct Fenced<'a> {
    /// Inside the fence (the whole text when there is none), trimmed.
    body: &'a str,
    fence: bool,
    /// Visible characters before and after the fence.
    before: usize,
    after: usize,
}

/// The inside of the answer's one markdown fence, if any. An opening fence
/// without a closing one runs to the end; a second fence is refused.
fn unfenced(text: &str) -> Result<Fenced<'_>, InvalidDecision> {
    let Some(open) = text.find("```") else {
        return Ok(Fenced { body: text, fence: false, before: 0, after: 0 });
    };
    let after = &text[open + 3..];
    // Skip the language tag (```json) when the opening line holds nothing else.
    let inside = match after.split_once('\n') {
        Some((tag, rest)) if !tag.contains('{') => rest,
        _ => after,
    };
    let (inside, rest) = inside.split_once("```").unwrap_or((inside, ""));
    if rest.contains("```") {
        return Err(InvalidDecision::SeveralFences);
    }
    Ok(Fenced { body: inside.trim(), fence: true, before: visible(&text[..open]), after: visible(rest) })
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
    use crate::ops::service::decision::choices::OfferedPlan;

    fn run_or_stop() -> Choices {
        Choices::run_or_stop(OfferedPlan::new("flow_pwd", "pwd", "g"))
    }

    #[test]
    fn answers_choose_from_the_offered_set() {
        let choices = run_or_stop();
        let ok = |text: &str| parse_decision(text, &choices).expect("valid");
        assert_eq!(
            ok(r#"{"action": "run_plan", "plan_id": "flow_pwd", "reason": "first run"}"#),
            ParsedDecision {
                choice: Choice::RunPlan("flow_pwd".into()),
                reason: Some("first run".into()),
                stripped: None
            }
        );
        assert_eq!(ok("```json\n{\"action\": \"stop\", \"plan_id\": null}\n```").choice, Choice::Stop);
        assert_eq!(ok(r#"{"action": "stop", "plan_id": "flow_pwd", "reason": ""}"#).reason, None);
        let refused = |text: &str| parse_decision(text, &choices).expect_err("invalid");
        assert_eq!(refused(r#"{"action": "run_plan", "plan_id": "flow_pwd"#), InvalidDecision::Truncated);
        assert_eq!(refused("no json here"), InvalidDecision::NoJson);
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
    fn prose_and_one_fence_around_one_object_are_stripped_and_recorded() {
        let choices = run_or_stop();
        let stripped = |text: &str| {
            let parsed = parse_decision(text, &choices).expect("valid");
            assert_eq!(parsed.choice, Choice::Stop, "{text}");
            parsed.stripped
        };
        let around = |chars_before, chars_after, fence| Some(Stripped { chars_before, chars_after, fence });
        assert_eq!(stripped("Sure! {\"action\": \"stop\"}"), around(5, 0, false));
        assert_eq!(stripped("{\"action\": \"stop\"} thanks"), around(0, 6, false));
        assert_eq!(stripped("```json\n{\"action\": \"stop\", \"plan_id\": null}\n```"), around(0, 0, true));
        assert_eq!(stripped("Here:\n```json\n{\"action\": \"stop\"}\n```\nDone."), around(5, 5, true));
        assert_eq!(stripped("```{\"action\": \"stop\"}\n```"), around(0, 0, true));
        assert_eq!(stripped("{\"action\": \"stop\"}\n```"), around(0, 3, true));
        assert_eq!(stripped("I pick {this}: {\"action\": \"stop\", \"reason\": \"a {b}\"}."), around(12, 1, false));
        let refused = |text: &str| parse_decision(text, &choices).expect_err("invalid");
        assert_eq!(refused("{\"action\": \"stop\"} or {\"action\": \"stop\"}"), InvalidDecision::SeveralObjects);
        assert_eq!(
            refused("Echo: {\"type\": \"object\"} then {\"action\": \"stop\"}"),
            InvalidDecision::SeveralObjects
        );
        assert_eq!(
            refused("```json\n{\"action\": \"stop\"}\n```\n```json\n{\"action\": \"stop\"}\n```"),
            InvalidDecision::SeveralFences
        );
        assert_eq!(refused("Sure: {\"action\": \"run_plan\", \"plan_id\": \"flow"), InvalidDecision::Truncated);
        assert_eq!(
            refused("Sure: {\"action\": \"delete\"} ok"),
            InvalidDecision::Action { found: "\"delete\"".into(), offered: "`run_plan`, `stop`".into() }
        );
        // Stripping never loosens the checks of the object itself.
        assert_eq!(
            refused("Here: {\"action\": \"stop\", \"goal\": \"x\"}"),
            InvalidDecision::UnknownKey("goal".into())
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
