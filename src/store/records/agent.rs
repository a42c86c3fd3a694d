//! What a run keeps of an agent step in progress (`agent` in
//! `state.json`): every model answer, sealed in the run's log before its
//! action starts, and the observation the action left. A resumed run acts
//! on a recorded answer instead of asking the model again, and its budgets
//! (model calls, tokens, refusals) go on from the counts kept here.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest raw answer kept in a record (the rest is dropped and marked).
pub const MAX_RAW_ANSWER_BYTES: usize = 4096;

/// The largest observation text kept in a record and shown to the model.
pub const MAX_OBSERVATION_BYTES: usize = 2048;

/// An agent step in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentProgress {
    pub step_id: String,
    /// Model calls made (answered or not).
    pub model_calls: u32,
    /// Prompt and answer tokens, as the backend counted them.
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Proposals refused (not offered, bad arguments, denied by the policy
    /// or by confinement, undecodable).
    pub refusals: u32,
    /// The turns, in order.
    pub turns: Vec<AgentTurn>,
    /// The question the last turn asked a person; set exactly while the run
    /// is `waiting_input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

impl AgentProgress {
    pub fn new(step_id: &str) -> Self {
        AgentProgress {
            step_id: step_id.to_string(),
            model_calls: 0,
            tokens_in: 0,
            tokens_out: 0,
            refusals: 0,
            turns: Vec::new(),
            question: None,
        }
    }

    /// The last turn, when its answer was recorded and not yet acted on.
    pub fn unanswered(&self) -> Option<&AgentTurn> {
        self.turns.last().filter(|turn| turn.observation.is_none())
    }
}

/// One turn: the model's answer and what came of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentTurn {
    /// 1-based.
    pub turn: u32,
    pub answer: ModelAnswer,
    /// `None` until the answer was acted on.
    pub observation: Option<Observation>,
}

/// A model answer as it was received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelAnswer {
    /// The answer parsed as JSON, `null` when it was not JSON.
    pub decoded: Value,
    /// The text, capped at [`MAX_RAW_ANSWER_BYTES`].
    pub raw: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raw_truncated: bool,
    pub model: String,
    pub latency_ms: u64,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub finish_reason: Option<String>,
    /// `json_object` when the OpenAI-compatible server refused
    /// `response_format: json_schema` and answered when asked again with
    /// `{"type": "json_object", "schema": …}`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<String>,
}

/// What the runtime tells the model about an answer: a tool's result, a
/// refusal, a person's answer, as untrusted data with its label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// `ok`, `failed`, `refused`, `answered`.
    pub outcome: String,
    /// Where the text comes from: `tool:<name>`, `runtime`, `person`.
    pub source: String,
    /// `untrusted` (tool output, a person's answer) or `trusted` (the
    /// runtime's own refusal text).
    pub trust: String,
    /// The rule that refused the proposal, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Capped at [`MAX_OBSERVATION_BYTES`].
    pub text: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// `text` cut to at most `max` bytes on a character boundary, and whether
/// it was cut.
pub fn capped(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_string(), false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_string(), true)
}
