//! What a model answered, kept as evidence with every decision: the
//! backend, model, request id, latency, `finish_reason`, token usage, the
//! raw answer (capped at [`MAX_RAW_ANSWER_BYTES`], marked untrusted) and why
//! it was accepted or rejected. `controller_state.json`, the
//! `decision_made` audit event and `GET /controller/runs/{id}` all show it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ops::service::decision::answer::Stripped;

/// The most of a raw answer kept, in bytes (cut at a character boundary).
pub const MAX_RAW_ANSWER_BYTES: usize = 4096;

/// Token counts as the server reported them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}

impl Usage {
    /// OpenAI's `usage` object.
    pub fn from_openai(usage: &Value) -> Option<Usage> {
        let count = |name: &str| usage.get(name).and_then(Value::as_u64);
        usage.is_object().then(|| Usage {
            prompt_tokens: count("prompt_tokens"),
            completion_tokens: count("completion_tokens"),
            total_tokens: count("total_tokens"),
        })
    }

    /// Ollama's `prompt_eval_count` and `eval_count`.
    pub fn from_ollama(body: &Value) -> Option<Usage> {
        let prompt = body.get("prompt_eval_count").and_then(Value::as_u64);
        let completion = body.get("eval_count").and_then(Value::as_u64);
        (prompt.is_some() || completion.is_some()).then(|| Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt.zip(completion).map(|(prompt, completion)| prompt + completion),
        })
    }
}

/// A model's answer as it came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub text: String,
    /// `stop`, `length` (cut at the token limit), …
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub request_id: Option<String>,
}

impl Reply {
    /// Whether the model hit its token limit (the text is cut).
    pub fn truncated(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

/// How far a raw answer is trusted: never (model output is data, never
/// instructions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Untrusted,
}

/// Whether the decision used the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Accepted,
    Rejected,
}

/// The evidence of one model call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// `ollama` or `openai`.
    pub backend: String,
    pub model: String,
    /// How structured output was asked: `json_schema`, `json_object`
    /// (the server refused `json_schema`; see `response_format_note`) or
    /// `ollama_format_schema`.
    pub response_format: String,
    pub response_format_note: Option<String>,
    pub request_id: Option<String>,
    pub latency_ms: u64,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    /// The answer's text, at most [`MAX_RAW_ANSWER_BYTES`]; `null` when the
    /// call gave none.
    pub raw_answer: Option<String>,
    pub raw_answer_truncated: bool,
    /// Always `untrusted`: model output is data, never instructions.
    pub raw_answer_trust: Trust,
    pub verdict: Verdict,
    /// Why the answer was accepted or rejected.
    pub verdict_reason: String,
    /// The text around the JSON object that was stripped before the object
    /// was validated (prose, a markdown fence); absent when there was none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stripped: Option<Stripped>,
}

/// `text` cut to at most [`MAX_RAW_ANSWER_BYTES`] at a character boundary,
/// and whether it was cut.
pub fn cap(text: &str) -> (String, bool) {
    if text.len() <= MAX_RAW_ANSWER_BYTES {
        return (text.to_string(), false);
    }
    let mut end = MAX_RAW_ANSWER_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_string(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_answers_are_capped_at_a_char_boundary() {
        assert_eq!(cap("short"), ("short".to_string(), false));
        let (kept, cut) = cap(&"é".repeat(3000));
        assert!(cut && kept.len() <= MAX_RAW_ANSWER_BYTES && kept.chars().all(|c| c == 'é'));
    }
}
