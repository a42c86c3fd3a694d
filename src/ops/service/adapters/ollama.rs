//! The `ollama` adapter: `POST /api/generate` with the instruction when
//! Ollama answered at start-up, a stub answer otherwise.

use std::time::Duration;

use crate::ops::service::adapters::{AdapterMode, AdapterResult};
use crate::ops::service::config::OllamaSettings;
use crate::ops::service::decision::ollama::generate_text;

pub async fn execute(
    client: &reqwest::Client,
    settings: &OllamaSettings,
    timeout: Duration,
    instruction: &str,
    mode: AdapterMode,
) -> AdapterResult {
    if mode != AdapterMode::Real {
        return AdapterResult::ok(format!("[ollama stub] {instruction}"), AdapterMode::Stub);
    }
    match generate_text(client, settings, timeout, instruction).await {
        Ok(text) => AdapterResult::ok(text, AdapterMode::Real),
        Err(error) => AdapterResult::failed(format!("ollama: {error}"), Some(1), AdapterMode::Real),
    }
}
