//! The settings of decision requests: the service policy's `[decision]`
//! section (`timeout_secs`, `max_tokens`, `temperature`, `system_prompt`).

use std::time::Duration;

use crate::server::decision::prompt::DEFAULT_SYSTEM_PROMPT;

/// How decision requests are made (the service policy's `[decision]`).
/// The defaults suit a small model on a CPU: a long timeout, few tokens
/// (an answer is one short JSON object), greedy decoding.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionSettings {
    /// One decision call; on expiry the call is cancelled (its connection
    /// closed) and the stub rules decide.
    pub timeout: Duration,
    pub max_tokens: u32,
    pub temperature: f64,
    pub system_prompt: String,
}

impl Default for DecisionSettings {
    fn default() -> Self {
        DecisionSettings {
            timeout: Duration::from_secs(60),
            max_tokens: 128,
            temperature: 0.0,
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
        }
    }
}
