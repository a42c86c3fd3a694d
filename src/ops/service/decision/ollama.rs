//! The Ollama HTTP API: `GET /api/tags` (probe) and `POST /api/generate`
//! with `stream: false` and `format: <the decision's JSON Schema>`
//! (structured output, Ollama ≥ 0.5).

use serde_json::{Value, json};

use crate::model::DecisionSettings;
use crate::ops::service::config::OllamaSettings;
use crate::ops::service::decision::evidence::{Reply, Usage};
use crate::ops::service::decision::http::{BackendError, post_json, probe as get_probe};

/// Whether Ollama answers `GET /api/tags` within the probe timeout.
pub async fn probe(
    client: &reqwest::Client,
    settings: &OllamaSettings,
    timeout: std::time::Duration,
) -> Result<(), BackendError> {
    get_probe(client, &format!("{}/api/tags", settings.host), timeout, None).await
}

/// Asks the model for a decision shaped by `schema`.
pub async fn generate(
    client: &reqwest::Client,
    settings: &OllamaSettings,
    decision: &DecisionSettings,
    system: &str,
    prompt: &str,
    schema: &Value,
) -> Result<Reply, BackendError> {
    let body = json!({
        "model": settings.model,
        "system": system,
        "prompt": prompt,
        "stream": false,
        "format": schema,
        "options": {"temperature": decision.temperature, "num_predict": decision.max_tokens},
    });
    let reply = post_json(client, &format!("{}/api/generate", settings.host), &body, decision.timeout, None).await?;
    let text = reply
        .body
        .get("response")
        .and_then(Value::as_str)
        .ok_or_else(|| BackendError::Protocol("no `response` text".to_string()))?;
    Ok(Reply {
        text: text.to_string(),
        finish_reason: reply.body.get("done_reason").and_then(Value::as_str).map(str::to_string),
        usage: Usage::from_ollama(&reply.body),
        request_id: reply.request_id,
    })
}

/// Sends a prompt to the `ollama` adapter (plain text, no JSON format).
pub async fn generate_text(
    client: &reqwest::Client,
    settings: &OllamaSettings,
    timeout: std::time::Duration,
    prompt: &str,
) -> Result<String, BackendError> {
    let body = json!({"model": settings.model, "prompt": prompt, "stream": false});
    let reply = post_json(client, &format!("{}/api/generate", settings.host), &body, timeout, None).await?;
    reply
        .body
        .get("response")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| BackendError::Protocol("no `response` text".to_string()))
}
