//! Agent steps: a model proposes one action per turn, the runtime decides.
//!
//! [`AgentSpec`] is a `kind = "agent"` step's payload; [`ModelProfile`] a
//! policy's `[models.NAME]`. The tools an agent step may offer are named by
//! [`AgentTool`]: a shell or http rule id of the policy, a pinned MCP tool
//! (`SERVER.TOOL`), or one of the built-in
//! file and ticket tools.

use serde::Serialize;

use crate::template::Template;

/// The built-in tools an agent step may offer besides shell rule ids.
pub const AGENT_BUILTIN_TOOLS: [&str; 4] = ["read_file", "write_file", "ticket_lookup", "ticket_close"];

/// Default `max_refusals` of an agent step.
pub const DEFAULT_MAX_REFUSALS: u32 = 3;

/// The payload of a `kind = "agent"` step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentSpec {
    /// What the model is asked to achieve (a template: inputs, outputs, the
    /// run's goal).
    pub goal: Template,
    /// The tools offered, by name (shell and `[[http.allow]]` rule ids of the policy,
    /// `read_file`, `write_file`, `ticket_lookup`, `ticket_close`).
    pub tools: Vec<String>,
    /// The policy's model profile (`[models.NAME]`).
    pub model: String,
    /// Model answers per step at most (every answer is a turn).
    pub max_turns: u32,
    /// Model calls per step at most (default `max_turns`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_model_calls: Option<u32>,
    /// Prompt tokens per step at most, as the backend counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_in: Option<u64>,
    /// Answer tokens per step at most, as the backend counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_out: Option<u64>,
    /// Refused proposals per step before the step fails.
    pub max_refusals: u32,
}

impl AgentSpec {
    /// The model calls the step may make.
    pub fn model_calls(&self) -> u32 {
        self.max_model_calls.unwrap_or(self.max_turns)
    }
}

/// A tool an agent step offers, as the runtime runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentTool<'p> {
    /// A `[[shell.allow]]` rule, by index in the policy's rules.
    Shell(usize, &'p str),
    /// An `[[http.allow]]` rule, by index in the policy's rules.
    Http(usize, &'p str),
    /// A pinned tool of a `[mcp.servers.NAME]`, named `SERVER.TOOL`: the
    /// server's name and the tool's.
    Mcp(&'p str, &'p str),
    ReadFile,
    WriteFile,
    TicketLookup,
    TicketClose,
}

/// How a model is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelBackend {
    /// `POST {endpoint}/chat/completions` (llama.cpp, vLLM, OpenAI, Ollama's `/v1`).
    Openai,
    /// `POST {endpoint}/api/chat` (Ollama's own API).
    Ollama,
}

impl ModelBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelBackend::Openai => "openai",
            ModelBackend::Ollama => "ollama",
        }
    }
}

/// One `[models.NAME]` of a policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelProfile {
    pub backend: ModelBackend,
    /// `http://host:port` or `https://host[:port]` (with a path prefix such
    /// as `/v1` for `openai`).
    pub endpoint: String,
    /// The model name the server knows.
    pub model: String,
    pub temperature: f64,
    pub max_tokens: u32,
    pub timeout_secs: u64,
    /// The secret (`[secrets.NAME]`) that holds the bearer token, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// PEM certificates an `https://` endpoint's certificate must chain to,
    /// instead of the system's roots (absolute: resolved against the policy
    /// file's folder at load).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<std::path::PathBuf>,
}
