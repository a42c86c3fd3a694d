//! What a step's templates render to: its action ([`render_action`], the
//! data fields only: the loader keeps programs and paths literal), and
//! what its program, server or request gets beside it — a step's own `env`
//! (or the `env` of the MCP server it calls) and an `http` step's
//! `headers`, rendered with their secrets, never recorded. A template
//! failure of `env` or `headers` names the variable or header only.

use std::collections::BTreeMap;

use crate::model::{Action, FailureClass, McpServer, Policy, Step};
use crate::template::Template;
use crate::template::TemplateError;
use crate::tools::ResolvedAction;
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

/// Renders every template of an action. Only data fields can hold step
/// output: the loader guarantees that the program and paths are literal
/// (or built from `run.id`).
pub(super) fn render_action(step: &Step, outputs: &Outputs) -> Result<ResolvedAction, ToolFailure> {
    let fail =
        |error: TemplateError| failure(FailureClass::TemplateError, format!("template resolution failed: {error}"));
    Ok(match &step.action {
        Action::Shell { command, cwd, stdin } => ResolvedAction::Shell {
            argv: command.iter().map(|token| token.render(outputs)).collect::<Result<_, _>>().map_err(fail)?,
            env: step.env.iter().map(|(name, value)| (name.clone(), value.source().to_string())).collect(),
            secrets: step.secrets(),
            cwd: cwd.as_ref().map(|cwd| cwd.render(outputs)).transpose().map_err(fail)?,
            stdin: stdin.as_ref().map(|stdin| stdin.render(outputs)).transpose().map_err(fail)?,
        },
        Action::WriteFile { path, content, json } => ResolvedAction::WriteFile {
            path: path.render(outputs).map_err(fail)?,
            content: match (content, json) {
                (_, Some(json)) => json.render_text(outputs).map_err(fail)?,
                (Some(content), None) => content.render(outputs).map_err(fail)?,
                (None, None) => String::new(),
            },
        },
        Action::ReadFile { path } => ResolvedAction::ReadFile { path: path.render(outputs).map_err(fail)? },
        Action::Finish { message } => ResolvedAction::Finish {
            message: message.as_ref().map(|message| message.render(outputs)).transpose().map_err(fail)?,
        },
        Action::Flaky { failures, output } => {
            ResolvedAction::Flaky { failures: *failures, output: output.render(outputs).map_err(fail)? }
        }
        Action::TicketLookup { ticket_id } => ResolvedAction::TicketLookup { ticket_id: ticket_id.clone() },
        Action::TicketClose { ticket_id } => ResolvedAction::TicketClose { ticket_id: ticket_id.clone() },
        Action::Mcp { server, tool, arguments } => ResolvedAction::Mcp {
            server: server.clone(),
            tool: tool.clone(),
            arguments: arguments.render_value(outputs).map_err(fail)?,
        },
        Action::Http { method, url, headers, body, json, max_response_bytes, response_headers } => {
            ResolvedAction::Http {
                method: method.clone(),
                url: url.render_escaped(outputs, percent_encode).map_err(fail)?,
                headers: headers.iter().map(|(name, value)| (name.clone(), value.source().to_string())).collect(),
                secrets: step.secrets(),
                body: match (body, json) {
                    (_, Some(json)) => Some(json.render_value(outputs).map_err(fail)?.to_string()),
                    (Some(body), None) => Some(body.render(outputs).map_err(fail)?),
                    (None, None) => None,
                },
                json_body: json.is_some(),
                expect_status: step.expect.as_ref().and_then(|expect| expect.status.clone()).unwrap_or_default(),
                max_response_bytes: *max_response_bytes,
                response_headers: response_headers.clone(),
            }
        }
        Action::Agent(_) => {
            return Err(failure(
                FailureClass::UnknownError,
                "an agent step has no single action to render".to_string(),
            ));
        }
    })
}

/// A value put into a URL: every byte but the unreserved ones
/// (`A-Z a-z 0-9 - . _ ~`) percent-encoded, so it cannot add a path
/// segment, a query parameter or a fragment.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
