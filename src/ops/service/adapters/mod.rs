//! Adapters: how a bridge run executes its instruction.
//!
//! | adapter | mode | execution |
//! |---|---|---|
//! | `stub` | `stub` | echoes the instruction, in process |
//! | `local_echo` | `real` | a child process (`echo`) with a cleared environment |
//! | `agent` | `real` | the plan interpreter for the goal, in process, as run `agent-<bridge id>` |
//! | `openai` | `real` / `stub` | chat completions when `OPENAI_API_KEY` is set, else a stub |
//! | `ollama` | `real` / `stub` | `POST /api/generate` when Ollama answered at start-up, else a stub |
//! | `cloudcode` | `unavailable` | no transport: every run fails |
//!
//! A new adapter is one file here, one [`AdapterKind`] variant and one arm
//! in [`Adapters::execute`].

pub mod agent;
pub mod cloudcode;
pub mod local_echo;
pub mod ollama;
pub mod openai;
pub mod stub;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::model::RunStatus;
use crate::ops::ExitStatus;
use crate::ops::service::config::{OllamaSettings, OpenAiSettings};

pub use agent::AgentRunner;

/// The adapters a bridge run can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    Stub,
    LocalEcho,
    Agent,
    OpenAi,
    Ollama,
    CloudCode,
}

impl AdapterKind {
    pub const ALL: [AdapterKind; 6] = [
        AdapterKind::Stub,
        AdapterKind::LocalEcho,
        AdapterKind::Agent,
        AdapterKind::OpenAi,
        AdapterKind::Ollama,
        AdapterKind::CloudCode,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AdapterKind::Stub => "stub",
            AdapterKind::LocalEcho => "local_echo",
            AdapterKind::Agent => "agent",
            AdapterKind::OpenAi => "openai",
            AdapterKind::Ollama => "ollama",
            AdapterKind::CloudCode => "cloudcode",
        }
    }

    pub fn parse(name: &str) -> Option<AdapterKind> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

/// Whether an adapter really executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdapterMode {
    Real,
    Stub,
    Unavailable,
}

impl AdapterMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AdapterMode::Real => "real",
            AdapterMode::Stub => "stub",
            AdapterMode::Unavailable => "unavailable",
        }
    }
}

/// What the agent adapter adds to a result.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentMetadata {
    pub agent_run_id: String,
    /// `None` when the agent run could not start (nothing ran).
    pub agent_final_status: Option<RunStatus>,
    pub agent_state_path: Option<String>,
    /// The failure class of the agent run's last failed attempt.
    pub failure_class: Option<crate::model::FailureClass>,
    /// The frozen action when the agent run paused (`waiting_approval`).
    pub pending_action: Option<crate::store::PendingAction>,
    /// The question when the agent run's agent step asked a person
    /// (`waiting_input`).
    pub pending_question: Option<PendingQuestion>,
}

/// The question an agent run's agent step asked a person: the run waits
/// (`waiting_input`) until it is answered (`POST /runs/{id}/answer`,
/// `planrun answer`). The text is the model's: untrusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingQuestion {
    pub step_id: String,
    /// The agent turn that asked (1-based).
    pub turn: u32,
    pub question: String,
}

impl AgentMetadata {
    /// Metadata of agent run `agent_run_id` before anything is known.
    pub fn new(agent_run_id: String) -> Self {
        AgentMetadata {
            agent_run_id,
            agent_final_status: None,
            agent_state_path: None,
            failure_class: None,
            pending_action: None,
            pending_question: None,
        }
    }
}

/// The outcome of one adapter call. `exit_code == Some(0)` means success;
/// the agent adapter answers 3 for a run paused for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterResult {
    pub response: String,
    pub error: Option<String>,
    pub exit_code: Option<i32>,
    pub mode: AdapterMode,
    pub agent: Option<AgentMetadata>,
}

impl AdapterResult {
    pub fn ok(response: String, mode: AdapterMode) -> Self {
        AdapterResult { response, error: None, exit_code: Some(ExitStatus::Done.into()), mode, agent: None }
    }

    pub fn failed(error: String, exit_code: Option<i32>, mode: AdapterMode) -> Self {
        AdapterResult { response: String::new(), error: Some(error), exit_code, mode, agent: None }
    }

    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(ExitStatus::Done.into()) && self.error.is_none()
    }
}

/// What a bridge run hands its adapter: the user's goal and the
/// instruction built from it. The `agent` adapter routes and records the
/// goal itself (as `planrun route` and `planrun --goal` would); the others
/// send the instruction.
#[derive(Debug, Clone, Copy)]
pub struct Task<'a> {
    pub goal: &'a str,
    /// The plan inputs the request gave (the `agent` adapter only).
    pub inputs: &'a serde_json::Map<String, serde_json::Value>,
    pub instruction: &'a str,
}

/// Every adapter with what it needs, fixed at start-up.
pub struct Adapters {
    pub agent: Arc<AgentRunner>,
    /// The `echo` program found at start-up (`None`: `local_echo` unavailable).
    pub echo_program: Option<PathBuf>,
    pub client: reqwest::Client,
    pub openai: OpenAiSettings,
    pub ollama: OllamaSettings,
    /// Whether Ollama answered the start-up probe.
    pub ollama_up: bool,
    pub timeout: Duration,
}

impl Adapters {
    /// The mode each adapter runs in, as `/health` reports it.
    pub fn mode(&self, kind: AdapterKind) -> AdapterMode {
        match kind {
            AdapterKind::Stub => AdapterMode::Stub,
            AdapterKind::LocalEcho if self.echo_program.is_some() => AdapterMode::Real,
            AdapterKind::LocalEcho => AdapterMode::Unavailable,
            AdapterKind::Agent => AdapterMode::Real,
            AdapterKind::OpenAi if self.openai.api_key.is_some() => AdapterMode::Real,
            AdapterKind::OpenAi => AdapterMode::Stub,
            AdapterKind::Ollama if self.ollama_up => AdapterMode::Real,
            AdapterKind::Ollama => AdapterMode::Stub,
            AdapterKind::CloudCode => AdapterMode::Unavailable,
        }
    }

    /// Runs `task` through `kind` for bridge run `bridge_run_id`.
    pub async fn execute(&self, kind: AdapterKind, task: Task<'_>, bridge_run_id: &str) -> AdapterResult {
        let mode = self.mode(kind);
        let instruction = task.instruction;
        match kind {
            AdapterKind::Stub => stub::execute(instruction),
            AdapterKind::LocalEcho => match &self.echo_program {
                Some(program) => local_echo::execute(program, instruction, self.timeout).await,
                None => AdapterResult::failed("no `echo` program found at start-up".into(), None, mode),
            },
            AdapterKind::Agent => agent::execute(Arc::clone(&self.agent), task.goal, task.inputs, bridge_run_id).await,
            AdapterKind::OpenAi => openai::execute(&self.client, &self.openai, self.timeout, instruction, mode).await,
            AdapterKind::Ollama => ollama::execute(&self.client, &self.ollama, self.timeout, instruction, mode).await,
            AdapterKind::CloudCode => cloudcode::execute(),
        }
    }
}
