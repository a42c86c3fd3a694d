//! Service settings from the environment, read once at start-up.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `PLANRUN_API_TOKEN` | unset | when set, every endpoint but `GET /health` needs `Authorization: Bearer <token>` |
//! | `PLANRUN_DECISION_BACKEND` | `auto` | `stub`, `ollama`, `openai` or `auto` (Ollama when it answers, else the stub) |
//! | `OLLAMA_HOST` | `http://127.0.0.1:11434` | `0.0.0.0` becomes `127.0.0.1`; scheme and port are added when missing |
//! | `OLLAMA_MODEL` | `qwen2.5:7b` | |
//! | `OPENAI_API_KEY` | unset | makes the `openai` adapter real; sent by the `openai` backend when set (a local server needs none) |
//! | `OPENAI_BASE_URL` | `https://api.openai.com/v1` | any OpenAI-compatible server (llama.cpp, vLLM, Ollama's `/v1`) |
//! | `OPENAI_MODEL` | `gpt-4o-mini` | |
//! | `PLANRUN_PROBE_TIMEOUT_MS` | `1000` | the start-up probe of the decision backend |
//! | `PLANRUN_ADAPTER_TIMEOUT_MS` | `60000` | one adapter call (HTTP adapters, `local_echo`) |
//!
//! The decision requests' settings (timeout, `max_tokens`, temperature,
//! system prompt) are not environment settings but the service policy's
//! `[decision]` section ([`crate::model::DecisionSettings`]).

use std::time::Duration;

/// Which decision backend was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// Ollama when it answers the start-up probe, else the stub.
    Auto,
    Stub,
    Ollama,
    OpenAi,
}

/// Connection settings of an Ollama server.
#[derive(Debug, Clone)]
pub struct OllamaSettings {
    /// Base URL, e.g. `http://127.0.0.1:11434` (no trailing slash).
    pub host: String,
    pub model: String,
}

/// Connection settings of an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// Base URL, e.g. `https://api.openai.com/v1` (no trailing slash).
    pub base_url: String,
    pub model: String,
    /// `None`: the `openai` adapter is a stub, and the `openai` decision
    /// backend sends no `Authorization` header.
    pub api_key: Option<String>,
}

/// Timeouts of the start-up probe and of adapter calls.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub probe: Duration,
    pub adapter: Duration,
}

/// Everything the service reads from the environment.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub api_token: Option<String>,
    pub backend: BackendChoice,
    pub ollama: OllamaSettings,
    pub openai: OpenAiSettings,
    pub timeouts: Timeouts,
}

impl ServiceConfig {
    /// Reads the settings through `get` (the process environment in
    /// production); `Err` explains a bad value.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<ServiceConfig, String> {
        let non_empty = |name: &str| get(name).filter(|value| !value.trim().is_empty());
        let backend = match non_empty("PLANRUN_DECISION_BACKEND").as_deref().map(str::trim) {
            None | Some("auto") => BackendChoice::Auto,
            Some("stub") => BackendChoice::Stub,
            Some("ollama") => BackendChoice::Ollama,
            Some("openai") => BackendChoice::OpenAi,
            Some(other) => {
                return Err(format!(
                    "`PLANRUN_DECISION_BACKEND` must be `stub`, `ollama`, `openai` or `auto`, found `{other}`"
                ));
            }
        };
        let millis = |name: &str, default: u64| -> Result<Duration, String> {
            match non_empty(name) {
                None => Ok(Duration::from_millis(default)),
                Some(text) => match text.trim().parse::<u64>() {
                    Ok(value) if value > 0 => Ok(Duration::from_millis(value)),
                    _ => Err(format!("`{name}` must be a positive number of milliseconds, found `{text}`")),
                },
            }
        };
        let openai = OpenAiSettings {
            base_url: non_empty("OPENAI_BASE_URL")
                .unwrap_or_else(|| "https://api.openai.com/v1".to_string())
                .trim_end_matches('/')
                .to_string(),
            model: non_empty("OPENAI_MODEL").unwrap_or_else(|| "gpt-4o-mini".to_string()),
            api_key: non_empty("OPENAI_API_KEY"),
        };
        Ok(ServiceConfig {
            api_token: api_token(get("PLANRUN_API_TOKEN"))?,
            backend,
            ollama: OllamaSettings {
                host: normalize_ollama_host(non_empty("OLLAMA_HOST").as_deref()),
                model: non_empty("OLLAMA_MODEL").unwrap_or_else(|| "qwen2.5:7b".to_string()),
            },
            openai,
            timeouts: Timeouts {
                probe: millis("PLANRUN_PROBE_TIMEOUT_MS", 1_000)?,
                adapter: millis("PLANRUN_ADAPTER_TIMEOUT_MS", 60_000)?,
            },
        })
    }

    pub fn from_env() -> Result<ServiceConfig, String> {
        Self::from_lookup(crate::runtime::process_var)
    }
}

/// `PLANRUN_API_TOKEN`: unset or empty means no token; anything else must be
/// printable ASCII without white space. A blank value would have left the
/// service open while looking set, and a padded one could never match
/// (HTTP trims header values), so both are refused.
fn api_token(value: Option<String>) -> Result<Option<String>, String> {
    match value {
        None => Ok(None),
        Some(token) if token.is_empty() => Ok(None),
        Some(token) if token.bytes().all(|byte| byte.is_ascii_graphic()) => Ok(Some(token)),
        Some(_) => Err("`PLANRUN_API_TOKEN` must be printable ASCII without spaces \
             (for example `openssl rand -hex 32`); it holds white space or other characters"
            .to_string()),
    }
}

/// `OLLAMA_HOST` as a base URL: scheme and default port added when missing,
/// the listen-everywhere `0.0.0.0` replaced by `127.0.0.1`.
pub fn normalize_ollama_host(value: Option<&str>) -> String {
    let value = value.map(str::trim).filter(|value| !value.is_empty()).unwrap_or("127.0.0.1:11434");
    let (scheme, rest) = match value.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("http", value),
    };
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|byte| byte.is_ascii_digit()) => {
            (host, port.to_string())
        }
        _ => (rest, "11434".to_string()),
    };
    let host = if host == "0.0.0.0" || host.is_empty() { "127.0.0.1" } else { host };
    format!("{scheme}://{host}:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn ollama_host_is_normalised() {
        for (input, expected) in [
            (None, "http://127.0.0.1:11434"),
            (Some("0.0.0.0"), "http://127.0.0.1:11434"),
            (Some("0.0.0.0:9999"), "http://127.0.0.1:9999"),
            (Some("http://0.0.0.0:11434/"), "http://127.0.0.1:11434"),
            (Some("localhost"), "http://localhost:11434"),
            (Some("https://ollama.internal:443"), "https://ollama.internal:443"),
        ] {
            assert_eq!(normalize_ollama_host(input), expected, "{input:?}");
        }
    }

    #[test]
    fn settings_are_read_and_checked() {
        let lookup = |pairs: &[(&str, &str)]| {
            let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            ServiceConfig::from_lookup(move |name| map.get(name).cloned())
        };
        let config = lookup(&[]).expect("defaults");
        assert_eq!(config.backend, BackendChoice::Auto);
        assert_eq!(config.ollama.model, "qwen2.5:7b");
        assert!(config.api_token.is_none());
        assert_eq!(config.timeouts.probe, Duration::from_secs(1));
        let config =
            lookup(&[("PLANRUN_DECISION_BACKEND", "stub"), ("PLANRUN_PROBE_TIMEOUT_MS", "250")]).expect("valid");
        assert_eq!(config.backend, BackendChoice::Stub);
        assert_eq!(config.timeouts.probe, Duration::from_millis(250));
        assert!(lookup(&[("PLANRUN_DECISION_BACKEND", "gpt")]).is_err());
        assert!(lookup(&[("PLANRUN_PROBE_TIMEOUT_MS", "0")]).is_err());
        // A keyless local OpenAI-compatible server needs no dummy key.
        let config = lookup(&[("PLANRUN_DECISION_BACKEND", "openai")]).expect("valid");
        assert_eq!((config.backend, config.openai.api_key), (BackendChoice::OpenAi, None));
    }

    /// A blank token would leave the service open while it looks set, and a
    /// padded one could never be sent (HTTP trims header values).
    #[test]
    fn an_api_token_is_printable_ascii_or_refused() {
        assert_eq!(api_token(None), Ok(None));
        assert_eq!(api_token(Some(String::new())), Ok(None));
        assert_eq!(api_token(Some("s3cret-token_1.2~".into())), Ok(Some("s3cret-token_1.2~".into())));
        for bad in ["  ", " s3cret ", "s3cret\n", "two words", "pässword"] {
            let error = api_token(Some(bad.into())).expect_err(bad);
            assert!(error.contains("printable ASCII without spaces"), "{error}");
        }
    }
}
