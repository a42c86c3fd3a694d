//! MCP in policies and plans: a policy's `[mcp.servers.NAME]` tables
//! ([`servers`]), a plan's `mcp` steps ([`ActionBuilder::mcp_action`]), and
//! the checks across the two (`cross_check.rs` calls [`plan_mcp_findings`];
//! `extends.rs` calls [`server_command_findings`] on the merged policy).
//!
//! A server's `command` is literal and its program a bare name that the
//! shell allowlist must `allow` (a server starts with no person present, so
//! `prompt` is refused too); its `env` values may hold `{{ secrets.NAME }}`
//! and nothing else; each entry of `tools` is a tool name and the digest of
//! its definition, `sha256:` and 64 lowercase hex digits.

use std::collections::BTreeMap;

use crate::confine::PathRules;
use crate::diag::Diagnostic;
use crate::load::did_you_mean::did_you_mean;
use crate::load::keys::{MCP, MCP_SERVER};
use crate::load::loaded_plan::LoadedPlan;
use crate::load::node::Node;
use crate::load::table::{TableReader, bare_name, error_count, expect_string, is_name, section, strings, wrong_type};
use crate::load::validate_secrets::is_env_name;
use crate::load::validate_step::ActionBuilder;
use crate::model::{Action, Decision, McpPolicy, McpServer, Policy, SecretSpec};
use crate::policy::{display_argv, evaluate_argv};
use crate::template::{JsonTemplate, RefTarget, Template};

/// The longest server name.
const MAX_SERVER_NAME: usize = 64;

/// Whether `text` is a pinned digest: `sha256:` and 64 lowercase hex digits.
pub(crate) fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
    })
}

/// `[mcp]`: the servers, or `None` after an error. `secrets` are the
/// secrets the policy (with the one it extends) declares.
pub(super) fn servers(
    node: Option<&Node>,
    secrets: &[&BTreeMap<String, SecretSpec>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<McpPolicy> {
    let Some(node) = node else {
        return Some(McpPolicy::default());
    };
    let errors_before = error_count(diagnostics);
    let mut reader = section(Some(node), "mcp", MCP.keys, node, diagnostics)?;
    let mut servers = BTreeMap::new();
    if let Some(table) = reader.get("servers") {
        match table.as_table() {
            Some(entries) => {
                for (key, value) in entries {
                    if !is_name(&key.name, MAX_SERVER_NAME) {
                        diagnostics.push(
                            Diagnostic::error("invalid-value", format!("`{}` is not a valid server name", key.name))
                                .with_span(key.span)
                                .with_help(format!(
                                    "use ASCII letters, digits, `_` and `-` (at most {MAX_SERVER_NAME})"
                                )),
                        );
                        continue;
                    }
                    if let Some(server) = server(&key.name, value, secrets, diagnostics) {
                        servers.insert(key.name.clone(), server);
                    }
                }
            }
            None => diagnostics.push(wrong_type(table, "`mcp.servers`", "a table of `[mcp.servers.NAME]` tables")),
        }
    }
    reader.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(McpPolicy { servers })
}

fn server(
    name: &str,
    node: &Node,
    secrets: &[&BTreeMap<String, SecretSpec>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<McpServer> {
    let what = format!("`mcp.servers.{name}`");
    let errors_before = error_count(diagnostics);
    let mut reader = TableReader::new(node, &what, format!(" in {what}"), MCP_SERVER.keys, diagnostics)?;
    let command = reader.required("command", diagnostics).and_then(|node| {
        let items = node.as_array().filter(|items| !items.is_empty());
        let Some(items) = items else {
            diagnostics.push(wrong_type(node, &format!("{what}.command"), "a non-empty array of strings"));
            return None;
        };
        let key = format!("mcp.servers.{name}.command");
        let mut first = true;
        let argv = strings(items, &key, diagnostics, |text, item, diagnostics| {
            let literal = !text.contains("{{");
            if !literal {
                diagnostics.push(
                    Diagnostic::error("untrusted-control-field", "a server's `command` must be literal")
                        .with_span(item.span)
                        .with_label("no template here"),
                );
            }
            let program = !std::mem::take(&mut first) || bare_name(text, item, diagnostics);
            literal && program
        });
        (argv.len() == items.len()).then_some(argv)
    });
    let env = reader.get("env").map(|node| env(name, node, secrets, diagnostics)).unwrap_or_default();
    let tools = reader.get("tools").map(|node| tools(name, node, diagnostics)).unwrap_or_default();
    let description = reader.string("description", diagnostics).map(|(text, _)| text.to_string());
    reader.finish(diagnostics);
    if error_count(diagnostics) > errors_before {
        return None;
    }
    Some(McpServer { command: command?, env, tools, description })
}

/// A server's `env`: variable names and templates that name secrets only.
fn env(
    server: &str,
    node: &Node,
    secrets: &[&BTreeMap<String, SecretSpec>],
    diagnostics: &mut Vec<Diagnostic>,
) -> BTreeMap<String, Template> {
    let mut env = BTreeMap::new();
    let Some(entries) = node.as_table() else {
        diagnostics.push(wrong_type(node, &format!("`mcp.servers.{server}.env`"), "a table of strings"));
        return env;
    };
    for (key, value) in entries {
        let what = format!("`mcp.servers.{server}.env.{}`", key.name);
        if !is_env_name(&key.name) {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("`{}` is not a valid variable name", key.name))
                    .with_span(key.span)
                    .with_help("use ASCII letters, digits and `_`, not starting with a digit"),
            );
            continue;
        }
        let Some(text) = expect_string(value, &what, diagnostics) else { continue };
        let template = match Template::parse(text) {
            Ok(template) => template,
            Err(error) => {
                diagnostics.push(
                    Diagnostic::error("template-syntax", format!("invalid template in {what}: {}", error.message))
                        .with_span(value.span),
                );
                continue;
            }
        };
        let mut ok = true;
        for reference in template.references() {
            match &reference.target {
                RefTarget::Secret(secret) if secrets.iter().any(|declared| declared.contains_key(secret)) => {}
                RefTarget::Secret(secret) => {
                    ok = false;
                    diagnostics.push(
                        Diagnostic::error(
                            "unknown-secret",
                            format!("`{{{{ {} }}}}` names no secret of this policy", reference.expr),
                        )
                        .with_span(value.span)
                        .with_help(format!("declare it: `[secrets.{secret}]` with `from_env` or `from_file`")),
                    );
                }
                _ => {
                    ok = false;
                    diagnostics.push(
                        Diagnostic::error(
                            "untrusted-control-field",
                            format!("{what} may hold `{{{{ secrets.NAME }}}}` only"),
                        )
                        .with_span(value.span)
                        .with_label(format!("`{{{{ {} }}}}` is not a secret", reference.expr))
                        .with_help("a server's environment is fixed by the policy; step output never reaches it"),
                    );
                }
            }
        }
        if ok {
            env.insert(key.name.clone(), template);
        }
    }
    env
}

/// A server's `tools`: tool name → pinned digest.
fn tools(server: &str, node: &Node, diagnostics: &mut Vec<Diagnostic>) -> BTreeMap<String, String> {
    let mut tools = BTreeMap::new();
    let Some(entries) = node.as_table() else {
        diagnostics.push(wrong_type(node, &format!("`mcp.servers.{server}.tools`"), "a table of digests"));
        return tools;
    };
    for (key, value) in entries {
        let what = format!("`mcp.servers.{server}.tools.{}`", key.name);
        let Some(text) = expect_string(value, &what, diagnostics) else { continue };
        if !is_digest(text) {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("{what} is not a digest"))
                    .with_span(value.span)
                    .with_label("expected `sha256:` and 64 lowercase hex digits")
                    .with_help(format!("`planrun mcp pin {server}` shows each tool's definition and digest")),
            );
            continue;
        }
        tools.insert(key.name.clone(), text.to_string());
    }
    tools
}

/// `mcp-server-not-allowed` for each server this file declares whose
/// `command` the merged policy's shell allowlist does not `allow`.
pub(super) fn server_command_findings(policy: &Policy, root: &Node, diagnostics: &mut Vec<Diagnostic>) {
    let Some(entries) = root.get("mcp").and_then(|mcp| mcp.get("servers")).and_then(Node::as_table) else {
        return;
    };
    let slots = PathRules::new(&policy.files);
    for (key, value) in entries {
        let Some(server) = policy.mcp.servers.get(&key.name) else { continue };
        let evaluation = evaluate_argv(&policy.shell, &slots, &server.command);
        if evaluation.decision == Decision::Allow {
            continue;
        }
        let span = value.get("command").map_or(value.span, |command| command.span);
        diagnostics.push(
            Diagnostic::error(
                "mcp-server-not-allowed",
                format!(
                    "MCP server `{}` runs `{}`, which the shell allowlist does not allow ({}: {})",
                    key.name,
                    display_argv(&server.command),
                    evaluation.rule,
                    evaluation.decision.as_str()
                ),
            )
            .with_span(span)
            .with_label("a server is an allowlisted program, started with no person present")
            .with_help("add a `[[shell.allow]]` rule that allows exactly this argv (`decision = \"allow\"`)"),
        );
    }
}

/// A plan's `mcp` steps against its policy: the server is declared
/// (`unknown-mcp-server`) and the tool pinned (`unknown-mcp-tool`).
pub(super) fn plan_mcp_findings(loaded: &LoadedPlan, policy: &Policy, diagnostics: &mut Vec<Diagnostic>) {
    for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
        let Action::Mcp { server, tool, .. } = &step.action else { continue };
        let [server_span, tool_span] = spans.mcp;
        let Some(declared) = policy.mcp.servers.get(server) else {
            let mut diagnostic = Diagnostic::error(
                "unknown-mcp-server",
                format!(
                    "step `{}` names MCP server `{server}`, which policy `{}` does not declare",
                    step.id, policy.name
                ),
            )
            .with_span(server_span.unwrap_or(spans.id))
            .with_help(format!("declare it in the policy: `[mcp.servers.{server}]` with `command` and `tools`"));
            if let Some(close) = did_you_mean(server, policy.mcp.servers.keys().map(String::as_str)) {
                diagnostic = diagnostic.with_label(format!("did you mean `{close}`?"));
            }
            diagnostics.push(diagnostic);
            continue;
        };
        if declared.tools.contains_key(tool) {
            continue;
        }
        let mut diagnostic = Diagnostic::error(
            "unknown-mcp-tool",
            format!("step `{}` calls tool `{tool}`, which MCP server `{server}` does not pin", step.id),
        )
        .with_span(tool_span.unwrap_or(spans.id))
        .with_help(format!(
            "review the tool with `planrun mcp pin {server} --policy {}` and pin it in `mcp.servers.{server}.tools`",
            policy.name
        ));
        if let Some(close) = did_you_mean(tool, declared.tools.keys().map(String::as_str)) {
            diagnostic = diagnostic.with_label(format!("did you mean `{close}`?"));
        }
        diagnostics.push(diagnostic);
    }
}

impl ActionBuilder<'_, '_, '_> {
    /// An `mcp` step's payload: literal `server` and `tool`, templated
    /// `arguments` (a table).
    pub(super) fn mcp_action(&mut self) -> Option<Action> {
        let server = self.reader.required_string("server", self.diagnostics).and_then(|(text, node)| {
            self.mcp_spans[0] = Some(node.span);
            self.literal_target(text, node, "server")
        });
        let tool = self.reader.required_string("tool", self.diagnostics).and_then(|(text, node)| {
            self.mcp_spans[1] = Some(node.span);
            self.literal_target(text, node, "tool")
        });
        let arguments = match self.reader.get("arguments") {
            None => Some(JsonTemplate::Object(Vec::new())),
            Some(node) if node.as_table().is_none() => {
                self.diagnostics.push(wrong_type(node, "`arguments`", "a table"));
                None
            }
            Some(node) => self.json_template(node),
        };
        Some(Action::Mcp { server: server?, tool: tool?, arguments: arguments? })
    }
}
