//! OpenAI-compatible chat completions: `POST {base}/chat/completions`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::server::config::OpenAiSettings;
use crate::server::decision::BackendError;
use crate::server::decision::ollama::post_json;

/// The system message of decision calls.
const SYSTEM: &str = "You decide the next step of a bounded agent. Answer with one JSON object only.";

/// Asks the model for a decision; returns the text of its answer.
pub async fn complete(
    client: &reqwest::Client,
    settings: &OpenAiSettings,
    timeout: Duration,
    prompt: &str,
) -> Result<String, BackendError> {
    chat(client, settings, timeout, Some(SYSTEM), prompt, 150).await
}

/// One chat completion; `Truncated` when the model hit `max_tokens`.
pub async fn chat(
    client: &reqwest::Client,
    settings: &OpenAiSettings,
    timeout: Duration,
    system: Option<&str>,
    prompt: &str,
    max_tokens: u32,
) -> Result<String, BackendError> {
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": prompt}));
    let body = json!({
        "model": settings.model,
        "messages": messages,
        "temperature": 0.1,
        "max_tokens": max_tokens,
    });
    let url = format!("{}/chat/completions", settings.base_url);
    let value = post_json(client, &url, &body, timeout, settings.api_key.as_deref()).await?;
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or_else(|| BackendError::Protocol("no `choices`".to_string()))?;
    if choice.get("finish_reason").and_then(Value::as_str) == Some("length") {
        return Err(BackendError::Truncated);
    }
    choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| BackendError::Protocol("no `choices[0].message.content`".to_string()))
}
