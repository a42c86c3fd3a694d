//! The Ollama HTTP API: `GET /api/tags` (probe) and `POST /api/generate`
//! with `stream: false`, `format: "json"` and a low temperature.

use std::time::Duration;

use serde_json::{Value, json};

use crate::server::config::OllamaSettings;
use crate::server::decision::BackendError;

/// Whether Ollama answers `GET /api/tags` within `timeout`.
pub async fn probe(client: &reqwest::Client, settings: &OllamaSettings, timeout: Duration) -> bool {
    let request = client.get(format!("{}/api/tags", settings.host)).timeout(timeout).send();
    matches!(tokio::time::timeout(timeout, request).await, Ok(Ok(response)) if response.status().is_success())
}

/// Asks the model for a JSON decision; returns the text of its answer.
pub async fn generate(
    client: &reqwest::Client,
    settings: &OllamaSettings,
    timeout: Duration,
    prompt: &str,
) -> Result<String, BackendError> {
    let body = json!({
        "model": settings.model,
        "prompt": prompt,
        "stream": false,
        "format": "json",
        "options": {"temperature": 0.1, "num_predict": 150},
    });
    let value = post_json(client, &format!("{}/api/generate", settings.host), &body, timeout, None).await?;
    if value.get("done_reason").and_then(Value::as_str) == Some("length") {
        return Err(BackendError::Truncated);
    }
    value
        .get("response")
        .and_then(Value::as_str)
        .filter(|text| !text.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| BackendError::Protocol("no `response` text".to_string()))
}

/// Sends a prompt to the `ollama` adapter (plain text, no JSON format).
pub async fn generate_text(
    client: &reqwest::Client,
    settings: &OllamaSettings,
    timeout: Duration,
    prompt: &str,
) -> Result<String, BackendError> {
    let body = json!({"model": settings.model, "prompt": prompt, "stream": false});
    let value = post_json(client, &format!("{}/api/generate", settings.host), &body, timeout, None).await?;
    value
        .get("response")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| BackendError::Protocol("no `response` text".to_string()))
}

/// POSTs JSON and reads a JSON answer, with `timeout` on the whole call.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    timeout: Duration,
    bearer: Option<&str>,
) -> Result<Value, BackendError> {
    let call = async {
        let mut request = client.post(url).timeout(timeout).json(body);
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|error| BackendError::from_reqwest(&error, timeout))?;
        let status = response.status();
        if !status.is_success() {
            return Err(BackendError::Status(status.as_u16()));
        }
        let bytes = response.bytes().await.map_err(|error| BackendError::from_reqwest(&error, timeout))?;
        serde_json::from_slice::<Value>(&bytes).map_err(|error| {
            if error.is_eof() {
                BackendError::Protocol("truncated response body".to_string())
            } else {
                BackendError::Protocol("body is not JSON".to_string())
            }
        })
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(BackendError::Timeout(timeout.as_millis())),
    }
}
