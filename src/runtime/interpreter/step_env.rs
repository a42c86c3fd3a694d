//! What a step's program, server or request gets beside its action: a
//! step's own `env` (or the `env` of the MCP server it calls) and an
//! `http` step's `headers`, rendered with their secrets. Never recorded; a
//! template failure names the variable or header only.

use std::collections::BTreeMap;

use crate::model::{Action, FailureClass, McpServer, Policy, Step};
use crate::template::Template;
use crate::tools::ToolFailure;

use super::outcome::failure;
use super::outputs::Outputs;

pub(super) type Rendered = BTreeMap<String, String>;

/// A step's `env` (an `mcp` step's: its server's) and `headers`.
pub(super) fn render_env(step: &Step, policy: &Policy, outputs: &Outputs) -> Result<(Rendered, Rendered), ToolFailure> {
    let env = match &step.action {
        Action::Mcp { server, .. } => policy.mcp.servers.get(server).map_or(&step.env, |server| &server.env),
        _ => &step.env,
    };
    let headers = match &step.action {
        Action::Http { headers, .. } => render("headers", headers, outputs)?,
        _ => Rendered::new(),
    };
    Ok((render("env", env, outputs)?, headers))
}

/// The `env` of MCP server `server`, for an agent step that lists or calls
/// its tools.
pub(super) fn render_server_env(server: &McpServer, outputs: &Outputs) -> Result<Rendered, ToolFailure> {
    render("env", &server.env, outputs)
}

fn render(key: &str, values: &BTreeMap<String, Template>, outputs: &Outputs) -> Result<Rendered, ToolFailure> {
    values
        .iter()
        .map(|(name, value)| {
            value.render(outputs).map(|text| (name.clone(), text)).map_err(|error| {
                failure(FailureClass::TemplateError, format!("`{key}.{name}` could not be resolved: {error}"))
            })
        })
        .collect()
}
