//! The HTTP call every model backend makes: POST JSON, read JSON, within a
//! timeout; and why a call gave no answer ([`BackendError`]).
//!
//! A call that times out is dropped, and dropping a reqwest request that is
//! still waiting for its response closes its connection (it never goes
//! back to the pool), so the server sees the client go away; a server that
//! watches for that (vLLM, Ollama) stops generating.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::strict_json::{self, JsonError};

/// Why a model call gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("unreachable: {0}")]
    Unreachable(String),
    #[error("timed out after {0} ms (the call was cancelled and its connection closed)")]
    Timeout(u128),
    #[error("http status {0}")]
    Status(u16),
    #[error("unexpected response: {0}")]
    Protocol(String),
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

    /// Whether the server may have refused the request's shape (so another
    /// shape may work): servers without JSON Schema support answer 400, 422
    /// (a validating framework), 500 or 501.
    pub fn is_refusal(&self) -> bool {
        let refusals = [
            StatusCode::BAD_REQUEST,
            StatusCode::UNPROCESSABLE_ENTITY,
            StatusCode::INTERNAL_SERVER_ERROR,
            StatusCode::NOT_IMPLEMENTED,
        ];
        matches!(self, BackendError::Status(code) if refusals.iter().any(|status| status.as_u16() == *code))
    }
}

/// A JSON answer and the `x-request-id` header, if the server sent one.
pub struct JsonReply {
    pub body: Value,
    pub request_id: Option<String>,
}

/// POSTs JSON and reads a JSON answer, with `timeout` on the whole call.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    timeout: Duration,
    bearer: Option<&str>,
) -> Result<JsonReply, BackendError> {
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
        let request_id =
            response.headers().get("x-request-id").and_then(|value| value.to_str().ok()).map(str::to_string);
        let bytes = response.bytes().await.map_err(|error| BackendError::from_reqwest(&error, timeout))?;
        let body = strict_json::parse_slice(&bytes).map_err(|error| match error {
            JsonError::Truncated { .. } => BackendError::Protocol("truncated response body".to_string()),
            error => BackendError::Protocol(format!("body is not strict JSON: {error}")),
        })?;
        Ok(JsonReply { body, request_id })
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => Err(BackendError::Timeout(timeout.as_millis())),
    }
}

/// GETs `url` within `timeout`; `Err` says why it did not answer 2xx.
pub(crate) async fn probe(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
    bearer: Option<&str>,
) -> Result<(), BackendError> {
    let mut request = client.get(url).timeout(timeout);
    if let Some(token) = bearer {
        request = request.bearer_auth(token);
    }
    match tokio::time::timeout(timeout, request.send()).await {
        Ok(Ok(response)) if response.status().is_success() => Ok(()),
        Ok(Ok(response)) => Err(BackendError::Status(response.status().as_u16())),
        Ok(Err(error)) => Err(BackendError::from_reqwest(&error, timeout)),
        Err(_) => Err(BackendError::Timeout(timeout.as_millis())),
    }
}
