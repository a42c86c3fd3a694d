//! `planrun mcp pin SERVER`: start a server of a policy as an `mcp` step
//! would, read its tools, and show each definition with its digest for
//! review; with `write`, put the digests into the policy file.
//!
//! Writing edits the text of the TOML file, nothing else of it: the
//! `tools = { … }` line of the `[mcp.servers.NAME]` table is replaced (or
//! added after the table's last line), every other byte stays. Where the
//! table is not written that way (a YAML policy, a dotted or inline table,
//! a `tools` value over several lines, a server of the policy it extends)
//! nothing is written and the outcome says which line to paste. The file
//! is loaded again after the edit; if it does not give the new digests the
//! original is put back.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::confine::ProgramResolver;
use crate::model::{Decision, McpServer, NetworkAccess, Policy};
use crate::ops::OpsError;
use crate::ops::policy_check::{load_named_policy, open_workspace};
use crate::policy::{display_argv, evaluate_shell_with};
use crate::runtime::RunSecrets;
use crate::tools::mcp::{Launch, ToolDefinition};

/// Which server of which policy, and whether to write the digests.
pub struct McpPinInput<'a> {
    pub policy: &'a str,
    pub policies: &'a Path,
    pub workspace: &'a Path,
    pub server: &'a str,
    pub write: bool,
    /// How long the server has to start and list its tools.
    pub timeout: Duration,
}

/// One tool the server offers now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReviewedTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub digest: String,
    /// The digest the policy pins now, if it pins the tool.
    pub pinned: Option<String>,
}

impl ReviewedTool {
    /// `new`, `unchanged` or `changed`.
    pub fn status(&self) -> &'static str {
        match &self.pinned {
            None => "new",
            Some(pinned) if *pinned == self.digest => "unchanged",
            Some(_) => "changed",
        }
    }
}

/// What the server offers, and what became of the policy file.
#[derive(Debug, serde::Serialize)]
pub struct McpPinOutcome {
    pub server: String,
    /// The policy file, as shown.
    pub policy_file: String,
    pub tools: Vec<ReviewedTool>,
    /// Pinned tools the server no longer offers.
    pub gone: Vec<String>,
    /// The line that pins every tool offered now.
    pub tools_line: String,
    /// Whether the line was written into the policy file.
    pub written: bool,
    /// Why it was not written, when writing was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_written: Option<String>,
}

pub fn mcp_pin(input: McpPinInput<'_>) -> Result<McpPinOutcome, OpsError> {
    let policy = load_named_policy(input.policy, input.policies, input.workspace)?;
    let Some(server) = policy.mcp.servers.get(input.server) else {
        let known: Vec<String> = policy.mcp.servers.keys().map(|name| format!("`{name}`")).collect();
        let known =
            if known.is_empty() { "it declares none".to_string() } else { format!("known: {}", known.join(", ")) };
        return Err(OpsError::Usage(format!(
            "policy `{}` declares no MCP server `{}` ({known})",
            policy.name, input.server
        )));
    };
    let tools = definitions(&policy, input.server, server, input.workspace, input.timeout)?;
    let reviewed: Vec<ReviewedTool> = tools
        .into_iter()
        .map(|tool| ReviewedTool {
            digest: tool.digest(),
            pinned: server.tools.get(&tool.name).cloned(),
            name: tool.name,
            description: tool.description,
            input_schema: tool.input_schema,
        })
        .collect();
    let gone = server.tools.keys().filter(|name| !reviewed.iter().any(|tool| tool.name == **name)).cloned().collect();
    let tools_line = tools_line(&reviewed);
    let mut outcome = McpPinOutcome {
        server: input.server.to_string(),
        policy_file: policy.source.path.clone(),
        tools: reviewed,
        gone,
        tools_line,
        written: false,
        not_written: None,
    };
    if input.write {
        match write(&policy, &input, &outcome) {
            Ok(()) => outcome.written = true,
            Err(reason) => outcome.not_written = Some(reason),
        }
    }
    Ok(outcome)
}

/// Starts the server as a step would (allowlisted program, `shell.env`
/// and its own `env` with its secrets, the workspace as its folder) and
/// reads its tools.
fn definitions(
    policy: &Policy,
    name: &str,
    server: &McpServer,
    workspace: &Path,
    timeout: Duration,
) -> Result<Vec<ToolDefinition>, OpsError> {
    let workspace = open_workspace(workspace, policy)?;
    let mut resolver = ProgramResolver::new(&policy.shell).outside(workspace.root());
    let verdict = evaluate_shell_with(&policy.shell, &workspace, &mut resolver, &server.command);
    if verdict.decision != Decision::Allow {
        return Err(OpsError::Usage(format!(
            "MCP server `{name}` runs `{}`, which the shell allowlist does not allow (rule `{}`)",
            display_argv(&server.command),
            verdict.rule
        )));
    }
    let Some(program) = verdict.program else {
        return Err(OpsError::Usage(format!("`{}` was not found in the policy's search path", server.command[0])));
    };
    let secrets = RunSecrets::for_server(server, policy).map_err(|error| OpsError::Usage(error.to_string()))?;
    let own = secrets.render_env(&server.env).map_err(|error| OpsError::Usage(error.to_string()))?;
    let mut env = policy.shell.env.clone();
    env.extend(own);
    let network = policy.shell.allow.iter().find(|rule| rule.name == verdict.rule).map(|rule| &rule.network);
    let launch = Launch {
        name,
        program: &program.canonical,
        args: &server.command[1..],
        env: env.into_iter().collect(),
        shell: &policy.shell,
        workspace: &workspace,
        network: network.unwrap_or(&NetworkAccess::Off),
        deadline: Instant::now() + timeout,
    };
    let redact = |text: String| secrets.redactor().text(&text);
    launch
        .open(0)
        .map(|(_, tools)| tools)
        .map_err(|error| OpsError::Usage(redact(format!("MCP server `{name}`: {error}"))))
}

/// `tools = { a = "sha256:…", b = "sha256:…" }`, tools by name.
fn tools_line(tools: &[ReviewedTool]) -> String {
    let mut sorted: Vec<&ReviewedTool> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let entries: Vec<String> =
        sorted.iter().map(|tool| format!("{} = \"{}\"", toml_key(&tool.name), tool.digest)).collect();
    format!("tools = {{ {} }}", entries.join(", "))
}

/// A bare TOML key when the name allows one, else a quoted key.
fn toml_key(name: &str) -> String {
    if !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-') {
        name.to_string()
    } else {
        serde_json::to_string(name).unwrap_or_default()
    }
}

/// Writes `outcome.tools_line` into the policy file, or says why not.
fn write(policy: &Policy, input: &McpPinInput<'_>, outcome: &McpPinOutcome) -> Result<(), String> {
    let path = Path::new(&policy.source.path);
    if path.extension().is_none_or(|extension| extension != "toml") {
        return Err(format!("`{}` is not a TOML file", policy.source.path));
    }
    let original =
        std::fs::read_to_string(path).map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
    let edited = edit_tools_line(&original, input.server, &outcome.tools_line)?;
    replace_file(path, &edited)?;
    let reloaded = load_named_policy(input.policy, input.policies, input.workspace).ok();
    let pinned = reloaded.as_ref().and_then(|policy| policy.mcp.servers.get(input.server)).map(|server| &server.tools);
    let expected: std::collections::BTreeMap<String, String> =
        outcome.tools.iter().map(|tool| (tool.name.clone(), tool.digest.clone())).collect();
    if pinned != Some(&expected) {
        replace_file(path, &original)?;
        return Err("the edited file did not load with the new digests; it was put back".to_string());
    }
    Ok(())
}

fn replace_file(path: &Path, text: &str) -> Result<(), String> {
    let temporary = path.with_extension("toml.pin");
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|error| format!("cannot write `{}`: {error}", path.display()))
}

/// `text` with the `tools` line of table `[mcp.servers.<server>]` replaced
/// by `line` (or added after the table's last non-blank line).
fn edit_tools_line(text: &str, server: &str, line: &str) -> Result<String, String> {
    let header = format!("[mcp.servers.{}]", toml_key(server));
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let is_header = |candidate: &str| {
        let code = candidate.split('#').next().unwrap_or_default().trim();
        code == header
    };
    let Some(start) = lines.iter().position(|candidate| is_header(candidate)) else {
        return Err(format!("no `{header}` table header in the file"));
    };
    let end = lines[start + 1..]
        .iter()
        .position(|candidate| candidate.trim_start().starts_with('['))
        .map_or(lines.len(), |offset| start + 1 + offset);
    let is_tools = |candidate: &str| {
        candidate.trim_start().strip_prefix("tools").is_some_and(|rest| rest.trim_start().starts_with('='))
    };
    let mut out: Vec<String> = lines.iter().map(|line| (*line).to_string()).collect();
    match (start + 1..end).find(|index| is_tools(lines[*index])) {
        Some(index) => {
            let old = lines[index];
            if old.matches('{').count() != old.matches('}').count() || !old.contains('{') {
                return Err("its `tools` value is not a table on one line".to_string());
            }
            let indent: String = old.chars().take_while(|character| character.is_whitespace()).collect();
            let newline = if old.ends_with('\n') { "\n" } else { "" };
            out[index] = format!("{indent}{line}{newline}");
        }
        None => {
            let last = (start..end).rev().find(|index| !lines[*index].trim().is_empty()).unwrap_or(start);
            if !out[last].ends_with('\n') {
                out[last].push('\n');
            }
            out.insert(last + 1, format!("{line}\n"));
        }
    }
    Ok(out.concat())
}

#[cfg(test)]
mod tests {
    use super::edit_tools_line;

    #[test]
    fn the_tools_line_is_replaced_or_added_and_nothing_else_changes() {
        let text = "# top\n[mcp.servers.docs]   # the docs\ncommand = [\"x\"]\n  tools = { a = \"old\" }  \n\n[budget]\nmax_steps = 3\n";
        let edited = edit_tools_line(text, "docs", "tools = { a = \"new\" }").expect("edited");
        assert_eq!(edited, text.replace("  tools = { a = \"old\" }  \n", "  tools = { a = \"new\" }\n"));
        let text = "[mcp.servers.docs]\ncommand = [\"x\"]\n\n[budget]\n";
        let edited = edit_tools_line(text, "docs", "tools = {}").expect("added");
        assert_eq!(edited, "[mcp.servers.docs]\ncommand = [\"x\"]\ntools = {}\n\n[budget]\n");
        assert!(edit_tools_line("[mcp]\nservers.docs.command = []\n", "docs", "tools = {}").is_err());
        let split = "[mcp.servers.docs]\ntools = {\n}\n";
        assert!(edit_tools_line(split, "docs", "tools = {}").is_err());
    }
}
