//! The `openai` adapter: a chat completion with the instruction when
//! `OPENAI_API_KEY` is set (any OpenAI-compatible server via
//! `OPENAI_BASE_URL`), a stub answer otherwise.

use std::time::Duration;

use crate::ops::service::adapters::{AdapterMode, AdapterResult};
use crate::ops::service::config::OpenAiSettings;
use crate::ops::service::decision::openai::chat;

pub async fn execute(
    client: &reqwest::Client,
    settings: &OpenAiSettings,
    timeout: Duration,
    instruction: &str,
    mode: AdapterMode,
) -> AdapterResult {
    if mode != AdapterMode::Real {
        return AdapterResult::ok(format!("[openai stub] {instruction}"), AdapterMode::Stub);
    }
    match chat(client, settings, timeout, None, instruction, 512).await {
        Ok(text) => AdapterResult::ok(text, AdapterMode::Real),
        Err(error) => AdapterResult::failed(format!("openai: {error}"), Some(1), AdapterMode::Real),
    }
}
