//! OpenAI-compatible chat completions: `POST {base}/chat/completions`, and
//! `GET {base}/models` as the start-up probe. llama.cpp's server, vLLM,
//! Ollama's `/v1` and OpenAI itself all speak it; a local server needs no
//! key (no `Authorization` header is sent without `OPENAI_API_KEY`).
//!
//! Decisions ask for `response_format: {"type": "json_schema", …,
//! "strict": true}`. A server that refuses that (HTTP 400, 422, 500 or
//! 501) is asked again with `{"type": "json_object", "schema": …}` (the
//! schema as llama-cpp-python reads it); when that works, every later call
//! of the service uses it directly. The evidence records which format was
//! used and why.

use std::time::Duration;

use serde_json::{Value, json};

use crate::model::DecisionSettings;
use crate::ops::service::config::OpenAiSettings;
use crate::ops::service::decision::evidence::{Reply, Usage};
use crate::ops::service::decision::http::{BackendError, post_json, probe as get_probe};

/// The schema's name in `response_format.json_schema`.
const SCHEMA_NAME: &str = "planrun_decision";

/// Whether `GET {base}/models` answers 2xx within `timeout`.
pub async fn probe(client: &reqwest::Client, settings: &OpenAiSettings, timeout: Duration) -> Result<(), BackendError> {
    get_probe(client, &format!("{}/models", settings.base_url), timeout, settings.api_key.as_deref()).await
}

/// How structured output is asked of an OpenAI-compatible server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseFormat {
    JsonSchema,
    JsonObject,
}

impl ResponseFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseFormat::JsonSchema => "json_schema",
            ResponseFormat::JsonObject => "json_object",
        }
    }

    fn body(self, schema: &Value) -> Value {
        match self {
            ResponseFormat::JsonSchema => json!({
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": true},
            }),
            // `schema` next to `json_object` is llama-cpp-python's way of
            // constraining the answer to a schema; servers ignore it or use it.
            ResponseFormat::JsonObject => json!({"type": "json_object", "schema": schema}),
        }
    }
}

/// Asks the model for a decision in `format`.
pub async fn complete(
    client: &reqwest::Client,
    settings: &OpenAiSettings,
    decision: &DecisionSettings,
    system: &str,
    prompt: &str,
    schema: &Value,
    format: ResponseFormat,
) -> Result<Reply, BackendError> {
    let body = json!({
        "model": settings.model,
        "messages": messages(Some(system), prompt),
        "temperature": decision.temperature,
        "max_tokens": decision.max_tokens,
        "response_format": format.body(schema),
    });
    request(client, settings, decision.timeout, &body).await
}

/// One plain chat completion (the `openai` adapter); `Err` when the model
/// hit `max_tokens`.
pub async fn chat(
    client: &reqwest::Client,
    settings: &OpenAiSettings,
    timeout: Duration,
    system: Option<&str>,
    prompt: &str,
    max_tokens: u32,
) -> Result<String, BackendError> {
    let body = json!({
        "model": settings.model,
        "messages": messages(system, prompt),
        "temperature": 0.1,
        "max_tokens": max_tokens,
    });
    let reply = request(client, settings, timeout, &body).await?;
    if reply.truncated() {
        return Err(BackendError::Protocol("truncated answer (the model hit its token limit)".to_string()));
    }
    if reply.text.trim().is_empty() {
        return Err(BackendError::Protocol("no `choices[0].message.content`".to_string()));
    }
    Ok(reply.text)
}

fn messages(system: Option<&str>, prompt: &str) -> Vec<Value> {
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": prompt}));
    messages
}

async fn request(
    client: &reqwest::Client,
    settings: &OpenAiSettings,
    timeout: Duration,
    body: &Value,
) -> Result<Reply, BackendError> {
    let url = format!("{}/chat/completions", settings.base_url);
    let reply = post_json(client, &url, body, timeout, settings.api_key.as_deref()).await?;
    let choice = reply
        .body
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| BackendError::Protocol("no `choices`".to_string()))?;
    let text = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| BackendError::Protocol("no `choices[0].message.content`".to_string()))?;
    Ok(Reply {
        text: text.to_string(),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
        usage: reply.body.get("usage").and_then(Usage::from_openai),
        request_id: reply.body.get("id").and_then(Value::as_str).map(str::to_string).or(reply.request_id),
    })
}
