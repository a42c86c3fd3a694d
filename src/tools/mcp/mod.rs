//! `mcp` steps: a tool of an MCP server the policy declares, called over
//! stdio ([`client`]), after its definition was checked against the digest
//! the policy pins ([`ToolDefinition::digest`]) and the step's arguments
//! against the tool's input schema ([`schema`]). Nothing is called when
//! either check fails. The result's content is the step output, untrusted.
//!
//! The client is hand-written rather than the `rmcp` SDK: see Cargo.toml
//! (`rmcp`'s cold build, and a tokio runtime in the engine's sync tools).

pub mod client;
mod definition;
pub mod schema;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::confine::Workspace;
use crate::model::{FailureClass, NetworkAccess, SandboxFacts, ShellPolicy};
use crate::tools::sandbox::{self, SandboxError};
use crate::tools::{ToolFailure, ToolSuccess};

pub use client::{PROTOCOL_VERSION, Session, clip, server_command};
pub use definition::ToolDefinition;

/// The largest `initialize` or `tools/list` answer read, in bytes (tool
/// definitions with their schemas); a `tools/call` answer may be at most the
/// policy's `budget.max_output_bytes`.
pub const MAX_LIST_BYTES: usize = 1 << 20;

/// Why talking to a server failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("the server could not be started: {0}")]
    Start(String),
    #[error("the server ended ({status}) before it answered{}", if stderr.is_empty() { String::new() } else { format!("; its stderr ends with: {stderr}") })]
    Exited { status: String, stderr: String },
    #[error("the server did not answer `{0}` before the step's timeout")]
    Timeout(String),
    #[error("the server was not started: {0}")]
    Sandbox(String),
    #[error("the server's answer to `{method}` is larger than {limit} bytes")]
    TooLarge { method: String, limit: usize },
    #[error("the server answered garbage: {0}")]
    Garbage(String),
    #[error("the server refused `{method}`: {message} (code {code})")]
    Rpc { method: String, code: i64, message: String },
}

impl McpError {
    /// A crash, a hang or a server that cannot start may pass; an answer of
    /// the wrong shape is `invalid_tool_result`.
    pub fn class(&self) -> FailureClass {
        match self {
            McpError::Start(_) | McpError::Exited { .. } | McpError::Timeout(_) | McpError::Rpc { .. } => {
                FailureClass::ExecutionError
            }
            McpError::TooLarge { .. } | McpError::Garbage(_) => FailureClass::InvalidToolResult,
            McpError::Sandbox(_) => FailureClass::SecurityDenied,
        }
    }

    /// The failure of a step talking to server `server`.
    pub fn failure(&self, server: &str) -> ToolFailure {
        refused(self.class(), format!("MCP server `{server}`: {self}"))
    }
}

/// How to start one server: its resolved program and arguments, its whole
/// environment, the sandbox it runs in (the shell policy's, with the
/// network of the rule that allows its command), its folder and when
/// everything must be over.
pub struct Launch<'a> {
    /// The server's name in the policy (for messages).
    pub name: &'a str,
    /// The program's canonical path.
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: Vec<(String, String)>,
    pub shell: &'a ShellPolicy,
    pub workspace: &'a Workspace,
    pub network: &'a NetworkAccess,
    pub deadline: Instant,
}

impl Launch<'_> {
    /// Starts the server in its sandbox, initialises it and reads its tools.
    pub fn open(&self, max_message_bytes: usize) -> Result<(Session, Vec<ToolDefinition>), McpError> {
        let request = sandbox::Request {
            shell: self.shell,
            workspace: self.workspace,
            program: self.program,
            network: self.network,
        };
        let env: BTreeMap<String, String> = self.env.iter().cloned().collect();
        let sandboxed = sandbox::command_for(&request, self.args, &env).map_err(|error| match error {
            SandboxError::Required(why) => McpError::Sandbox(why),
            SandboxError::Io(error) => McpError::Start(format!("cannot prepare the sandbox: {error}")),
        })?;
        let command = server_command(sandboxed.command, self.workspace.root());
        let limit = max_message_bytes.max(MAX_LIST_BYTES);
        let mut session = Session::start(command, self.deadline, limit, (sandboxed.facts, sandboxed.temp))?;
        session.max_message_bytes = MAX_LIST_BYTES;
        session.initialize()?;
        let listed = session.list_tools()?;
        let tools = listed.iter().map(ToolDefinition::from_listed).collect::<Result<Vec<_>, _>>()?;
        Ok((session, tools))
    }
}

/// One `mcp` call: the tool, the digest its definition must have, the
/// arguments and the cap on the answer.
pub struct Call<'a> {
    pub tool: &'a str,
    pub pinned: &'a str,
    pub arguments: &'a Value,
    pub max_output_bytes: usize,
}

fn refused(class: FailureClass, message: String) -> ToolFailure {
    ToolFailure { class, message, output_text: String::new() }
}

fn from_error(server: &str, error: &McpError) -> ToolFailure {
    error.failure(server)
}

/// Starts the server, checks the tool's definition and the arguments, and
/// calls the tool: nothing is called when a check fails. The sandbox the
/// server ran in comes back beside the result (`None` when it never started).
pub fn call(launch: &Launch<'_>, call: &Call<'_>) -> (Result<ToolSuccess, ToolFailure>, Option<SandboxFacts>) {
    match launch.open(call.max_output_bytes) {
        Ok((session, tools)) => {
            let facts = session.sandbox_facts().clone();
            (call_tool(launch.name, session, &tools, call), Some(facts))
        }
        Err(error) => (Err(from_error(launch.name, &error)), None),
    }
}

fn call_tool(
    server: &str,
    mut session: Session,
    tools: &[ToolDefinition],
    call: &Call<'_>,
) -> Result<ToolSuccess, ToolFailure> {
    let Some(definition) = tools.iter().find(|tool| tool.name == call.tool) else {
        return Err(refused(
            FailureClass::SecurityDenied,
            format!(
                "MCP server `{server}` no longer offers tool `{}` (pinned at {}); review its tools with `planrun mcp pin {server}`",
                call.tool, call.pinned
            ),
        ));
    };
    let digest = definition.digest();
    if digest != call.pinned {
        return Err(refused(
            FailureClass::SecurityDenied,
            format!(
                "definition of `{}` changed: new digest {digest}; review it and pin it with `planrun mcp pin {server}`",
                call.tool
            ),
        ));
    }
    let problems = schema::problems(&definition.input_schema, call.arguments);
    if !problems.is_empty() {
        return Err(refused(
            FailureClass::SecurityDenied,
            format!("the arguments do not fit the input schema of tool `{}`: {}", call.tool, problems.join("; ")),
        ));
    }
    session.max_message_bytes = call.max_output_bytes;
    let result = session
        .request("tools/call", json!({"name": call.tool, "arguments": call.arguments}))
        .map_err(|error| from_error(server, &error))?;
    drop(session);
    tool_result(server, call.tool, &result)
}

/// A `tools/call` result: its content as text (the step output) and, in
/// `output_json`, the content itself, marked untrusted.
fn tool_result(server: &str, tool: &str, result: &Value) -> Result<ToolSuccess, ToolFailure> {
    let garbage = |detail: &str| from_error(server, &McpError::Garbage(format!("`tools/call` {detail}")));
    let Some(content) = result.get("content").and_then(Value::as_array) else {
        return Err(garbage("answered without a `content` array"));
    };
    let mut parts = Vec::new();
    for item in content {
        match (item.get("type").and_then(Value::as_str), item.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(text)) => parts.push(text.to_string()),
            (Some("text"), None) => return Err(garbage("answered a `text` item without text")),
            (Some(other), _) => parts.push(format!("[{other} content]")),
            (None, _) => return Err(garbage("answered a content item without a `type`")),
        }
    }
    let output_text = parts.join("\n");
    let is_error = match result.get("isError") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err(garbage("answered an `isError` that is not a boolean")),
    };
    if is_error {
        return Err(ToolFailure {
            class: FailureClass::ExecutionError,
            message: format!("MCP tool `{tool}` of server `{server}` reported an error: {}", clip(&output_text, 300)),
            output_text,
        });
    }
    let mut json = json!({
        "server": server,
        "tool": tool,
        "content": content,
        "untrusted_fields": ["content"],
    });
    if let Some(structured) = result.get("structuredContent").filter(|value| !value.is_null()) {
        json["structured_content"] = structured.clone();
        json["untrusted_fields"] = json!(["content", "structured_content"]);
    }
    Ok(ToolSuccess { output_text, output_json: Some(json) })
}
