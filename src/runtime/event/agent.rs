//! The events of agent steps: a model's answer sealed, what came of it,
//! and the pinned MCP tools a step listed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `agent_answer_recorded`: a model answer of an agent step, sealed before
/// anything acts on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentAnswerRecorded {
    #[serde(skip)]
    pub step_id: String,
    pub turn: u32,
    pub answer: crate::store::ModelAnswer,
}

/// `agent_observation`: what came of a turn's answer (a tool's result, a
/// refusal with its rule, a person's answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentObserved {
    #[serde(skip)]
    pub step_id: String,
    pub turn: u32,
    pub outcome: String,
    pub source: String,
    pub trust: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    pub text: String,
}

/// `agent_tools_listed`: the pinned MCP tools an agent step offers, as
/// their servers listed them when the step started or resumed (each
/// definition's digest equal to its pin); what the prompt offered and the
/// arguments were checked against, so `planrun replay` decides the same.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentToolsListed {
    #[serde(skip)]
    pub step_id: String,
    pub tools: Vec<ListedTool>,
}

/// One pinned MCP tool as its server listed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedTool {
    /// `SERVER.TOOL`, as the step's `tools` names it.
    pub tool: String,
    /// The definition's digest (`sha256:…`), equal to the policy's pin.
    pub digest: String,
    /// The server's description of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
}
