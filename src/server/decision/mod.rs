//! Decision backends of the controller loop: what to do next.
//!
//! The backend is chosen once at start-up ([`DecisionBackend::select`]):
//! the deterministic [`stub`] rules, an [`ollama`] server or an
//! [`openai`]-compatible chat completions server. Every answer of a model
//! goes through [`parse_decision`] (fences and leading prose stripped;
//! `action` is `run_agent` or `stop`; `goal` a string of at most
//! [`MAX_GOAL_CHARS`] characters); an answer that is invalid, truncated,
//! slow or unreachable falls back to the stub rules. The decision records
//! which happened in `mode`:
//!
//! | mode | meaning |
//! |---|---|
//! | `ollama` / `openai` | the model's answer was parsed and accepted |
//! | `ollama-fallback` / `openai-fallback` | the model was called, its answer was unusable: stub rules used |
//! | `stub` | the stub backend (chosen, or Ollama unreachable at start-up) |

pub mod ollama;
pub mod openai;
pub mod stub;

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::server::config::{BackendChoice, OllamaSettings, OpenAiSettings, ServiceConfig};

/// The longest goal a decision may carry.
pub const MAX_GOAL_CHARS: usize = 500;
/// The longest reason kept from a model's answer.
const MAX_REASON_CHARS: usize = 500;

/// What the controller does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    RunAgent,
    Stop,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::RunAgent => "run_agent",
            Action::Stop => "stop",
        }
    }
}

/// What a decision is based on (the prompt context of the seed).
#[derive(Debug, Clone)]
pub struct DecisionContext<'a> {
    /// The goal the next run would get (rewritten by recovery, if applied).
    pub goal: &'a str,
    pub original_goal: &'a str,
    pub iteration: u32,
    pub max_iterations: u32,
    /// Status of the last bridge run; `None` before the first.
    pub last_status: Option<&'a str>,
    pub last_agent_status: Option<&'a str>,
    pub recovery_attempted: bool,
    /// A recovery rewrite was applied after the last run and not yet tried.
    pub recovery_pending: bool,
}

/// A decision as recorded in controller state and audit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub action: Action,
    pub goal: String,
    pub reason: String,
    /// `stub`, `ollama`, `ollama-fallback`, `openai`, `openai-fallback`.
    pub mode: String,
    /// Whether a model's answer was parsed and accepted.
    pub parsed_success: bool,
    /// Whether the stub rules replaced an unusable model answer.
    pub fallback_used: bool,
    /// Why the model's answer was not used (`null` otherwise).
    pub fallback_reason: Option<String>,
}

/// A decision backend, fixed at start-up.
pub enum DecisionBackend {
    Stub,
    Ollama { client: reqwest::Client, settings: OllamaSettings, timeout: Duration },
    OpenAi { client: reqwest::Client, settings: OpenAiSettings, timeout: Duration },
}

/// Why a model call gave no usable text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("unreachable: {0}")]
    Unreachable(String),
    #[error("timed out after {0} ms")]
    Timeout(u128),
    #[error("http status {0}")]
    Status(u16),
    #[error("unexpected response: {0}")]
    Protocol(String),
    #[error("truncated answer (the model hit its token limit)")]
    Truncated,
}

impl BackendError {
    /// Classifies a reqwest failure.
    pub(crate) fn from_reqwest(error: &reqwest::Error, timeout: Duration) -> BackendError {
        if error.is_timeout() {
            BackendError::Timeout(timeout.as_millis())
        } else if error.is_connect() {
            BackendError::Unreachable("connection failed".to_string())
        } else if let Some(status) = error.status() {
            BackendError::Status(status.as_u16())
        } else if error.is_decode() {
            BackendError::Protocol("body is not the expected JSON".to_string())
        } else {
            BackendError::Unreachable(error.to_string())
        }
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
    #[error("`action` must be `run_agent` or `stop`, found {0}")]
    Action(String),
    #[error("`goal` must be a non-empty string of at most 500 characters")]
    Goal,
    #[error("`reason` must be a string")]
    Reason,
}

/// A model's answer that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDecision {
    pub action: Action,
    pub goal: Option<String>,
    pub reason: Option<String>,
}

/// Validates a model's answer: markdown fences and leading prose are
/// stripped, the first JSON object is read, and its fields are checked.
pub fn parse_decision(text: &str) -> Result<ParsedDecision, InvalidDecision> {
    let body = strip_fences(text);
    let start = body.find('{').ok_or(InvalidDecision::NoJson)?;
    let mut stream = serde_json::Deserializer::from_str(&body[start..]).into_iter::<Value>();
    let value = match stream.next() {
        Some(Ok(value)) => value,
        Some(Err(error)) if error.is_eof() => return Err(InvalidDecision::Truncated),
        Some(Err(error)) => return Err(InvalidDecision::Json(error.to_string())),
        None => return Err(InvalidDecision::NoJson),
    };
    let object = value.as_object().ok_or(InvalidDecision::NoJson)?;
    let action = match object.get("action") {
        Some(Value::String(action)) if action == "run_agent" => Action::RunAgent,
        Some(Value::String(action)) if action == "stop" => Action::Stop,
        Some(other) => return Err(InvalidDecision::Action(other.to_string())),
        None => return Err(InvalidDecision::Action("nothing".to_string())),
    };
    let goal = match object.get("goal") {
        None | Some(Value::Null) if action == Action::Stop => None,
        Some(Value::String(goal)) if !goal.trim().is_empty() && goal.chars().count() <= MAX_GOAL_CHARS => {
            Some(goal.trim().to_string())
        }
        _ => return Err(InvalidDecision::Goal),
    };
    let reason = match object.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) => Some(reason.chars().take(MAX_REASON_CHARS).collect()),
        Some(_) => return Err(InvalidDecision::Reason),
    };
    Ok(ParsedDecision { action, goal, reason })
}

/// The text inside the first markdown code fence, or all of it.
fn strip_fences(text: &str) -> &str {
    let Some(open) = text.find("```") else {
        return text.trim();
    };
    let after = &text[open + 3..];
    // Skip the language tag (```json).
    let after = after.find('\n').map_or(after, |newline| &after[newline + 1..]);
    match after.find("```") {
        Some(close) => after[..close].trim(),
        None => after.trim(),
    }
}

/// The prompt sent to a model: the seed's context, and the expected shape.
pub fn prompt(context: &DecisionContext<'_>) -> String {
    format!(
        "You are the controller of a bounded agent runtime. Decide the next action.\n\
         Reply with one JSON object and nothing else: \
         {{\"action\": \"run_agent\" or \"stop\", \"goal\": \"<goal for the agent, at most 500 characters>\", \"reason\": \"<short reason>\"}}.\n\
         Run the agent when the goal is not yet achieved and another attempt can help; stop when the last run is done or retrying cannot help.\n\n\
         goal: {}\noriginal_goal: {}\niteration: {}/{}\nlast_status: {}\nlast_agent_status: {}\nrecovery_attempted: {}\n",
        context.goal,
        context.original_goal,
        context.iteration,
        context.max_iterations,
        context.last_status.unwrap_or("none"),
        context.last_agent_status.unwrap_or("none"),
        context.recovery_attempted,
    )
}

impl DecisionBackend {
    /// Picks the backend per `PLANRUN_DECISION_BACKEND`: `auto` and
    /// `ollama` probe Ollama (`GET /api/tags`) and fall back to the stub when
    /// it does not answer. Returns the backend and whether Ollama answered.
    pub async fn select(config: &ServiceConfig, client: &reqwest::Client) -> (DecisionBackend, bool) {
        let ollama_up = ollama::probe(client, &config.ollama, config.timeouts.probe).await;
        let ollama = || DecisionBackend::Ollama {
            client: client.clone(),
            settings: config.ollama.clone(),
            timeout: config.timeouts.decision,
        };
        let backend = match config.backend {
            BackendChoice::Stub => DecisionBackend::Stub,
            BackendChoice::Auto | BackendChoice::Ollama if ollama_up => ollama(),
            BackendChoice::Auto | BackendChoice::Ollama => DecisionBackend::Stub,
            BackendChoice::OpenAi => DecisionBackend::OpenAi {
                client: client.clone(),
                settings: config.openai.clone(),
                timeout: config.timeouts.decision,
            },
        };
        (backend, ollama_up)
    }

    /// `stub`, `ollama` or `openai`.
    pub fn name(&self) -> &'static str {
        match self {
            DecisionBackend::Stub => "stub",
            DecisionBackend::Ollama { .. } => "ollama",
            DecisionBackend::OpenAi { .. } => "openai",
        }
    }

    /// The model asked, if any.
    pub fn model(&self) -> Option<&str> {
        match self {
            DecisionBackend::Stub => None,
            DecisionBackend::Ollama { settings, .. } => Some(&settings.model),
            DecisionBackend::OpenAi { settings, .. } => Some(&settings.model),
        }
    }

    /// Decides the next action; never fails (the stub is the fallback).
    pub async fn decide(&self, context: &DecisionContext<'_>) -> Decision {
        let answer = match self {
            DecisionBackend::Stub => {
                let (action, goal, reason) = stub::decide(context);
                return Decision {
                    action,
                    goal,
                    reason,
                    mode: "stub".to_string(),
                    parsed_success: false,
                    fallback_used: false,
                    fallback_reason: None,
                };
            }
            DecisionBackend::Ollama { client, settings, timeout } => {
                ollama::generate(client, settings, *timeout, &prompt(context)).await
            }
            DecisionBackend::OpenAi { client, settings, timeout } => {
                openai::complete(client, settings, *timeout, &prompt(context)).await
            }
        };
        let parsed = answer
            .map_err(|error| error.to_string())
            .and_then(|text| parse_decision(&text).map_err(|error| format!("invalid answer: {error}")));
        match parsed {
            Ok(parsed) => Decision {
                action: parsed.action,
                goal: parsed.goal.unwrap_or_else(|| context.goal.to_string()),
                reason: parsed.reason.unwrap_or_default(),
                mode: self.name().to_string(),
                parsed_success: true,
                fallback_used: false,
                fallback_reason: None,
            },
            Err(why) => {
                let (action, goal, reason) = stub::decide(context);
                Decision {
                    action,
                    goal,
                    reason,
                    mode: format!("{}-fallback", self.name()),
                    parsed_success: false,
                    fallback_used: true,
                    fallback_reason: Some(why),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_validated() {
        let ok = |text: &str| parse_decision(text).expect("valid");
        assert_eq!(
            ok(r#"{"action": "run_agent", "goal": "test flow pwd to file", "reason": "first"}"#),
            ParsedDecision {
                action: Action::RunAgent,
                goal: Some("test flow pwd to file".into()),
                reason: Some("first".into())
            }
        );
        assert_eq!(ok("Sure! Here is my answer:\n```json\n{\"action\": \"stop\"}\n```\nthanks").action, Action::Stop);
        assert_eq!(ok("I think {\"action\":\"stop\",\"goal\":\"g\"} trailing").goal.as_deref(), Some("g"));
        assert_eq!(parse_decision(r#"{"action": "run_agent", "goal": "g"#), Err(InvalidDecision::Truncated));
        assert_eq!(parse_decision("no json here"), Err(InvalidDecision::NoJson));
        assert!(matches!(parse_decision(r#"{"action": "delete_all", "goal": "g"}"#), Err(InvalidDecision::Action(_))));
        assert!(matches!(parse_decision(r#"{"action": 1}"#), Err(InvalidDecision::Action(_))));
        assert_eq!(parse_decision(r#"{"action": "run_agent"}"#), Err(InvalidDecision::Goal));
        assert_eq!(parse_decision(r#"{"action": "run_agent", "goal": 5}"#), Err(InvalidDecision::Goal));
        let long = format!(r#"{{"action": "run_agent", "goal": "{}"}}"#, "x".repeat(501));
        assert_eq!(parse_decision(&long), Err(InvalidDecision::Goal));
        let longest = format!(r#"{{"action": "run_agent", "goal": "{}"}}"#, "é".repeat(500));
        assert!(parse_decision(&longest).is_ok());
        assert_eq!(parse_decision(r#"{"action": "stop", "reason": []}"#), Err(InvalidDecision::Reason));
        assert!(matches!(parse_decision(r#"{"action": "stop",, }"#), Err(InvalidDecision::Json(_))));
    }
}
