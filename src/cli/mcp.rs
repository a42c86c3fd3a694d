//! `planrun mcp pin SERVER [--policy NAME] [--write] [--json]`: the tools of
//! one MCP server of a policy, each definition with its digest, for review.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::cli::DirArgs;
use crate::cli::output::{fail, fail_with, print_diagnostics};
use crate::diag::Severity;
use crate::ops::{self, ExitStatus, McpPinInput, McpPinOutcome, OpsError};

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start a server of the policy, show each tool's definition and digest, and (with `--write`) pin them.
    Pin(McpPinArgs),
}

#[derive(Debug, Args)]
pub struct McpPinArgs {
    /// The server: a `[mcp.servers.NAME]` of the policy.
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// The policy that declares it (`<--policies>/<NAME>.toml`).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub policy: String,
    /// Write `tools = { … }` with every tool's digest into the server's table of the policy file.
    #[arg(long)]
    pub write: bool,
    /// Print the review as JSON.
    #[arg(long)]
    pub json: bool,
    /// Seconds the server has to start and list its tools.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub timeout_secs: u64,
}

pub fn mcp(args: &McpArgs, dirs: &DirArgs) -> ExitCode {
    match &args.command {
        McpCommand::Pin(pin) => mcp_pin(pin, dirs),
    }
}

/// Exit code: 0 shown (and written, with `--write`), 1 `--write` could not
/// write (the line to paste is shown), 2 bad input: an unknown or invalid
/// policy or server, a server the allowlist refuses, or one that fails to
/// start or answers wrongly.
fn mcp_pin(args: &McpPinArgs, dirs: &DirArgs) -> ExitCode {
    let input = McpPinInput {
        policy: &args.policy,
        policies: &dirs.policies,
        workspace: &dirs.workspace,
        server: &args.server,
        write: args.write,
        timeout: Duration::from_secs(args.timeout_secs.max(1)),
    };
    let outcome = match ops::mcp_pin(input) {
        Ok(outcome) => outcome,
        Err(OpsError::InvalidFiles { sources, diagnostics }) => {
            print_diagnostics(&sources, &diagnostics, Severity::Error);
            return fail(
                ExitStatus::InvalidInput,
                &format!("policy `{}` is invalid; run `planrun check`", args.policy),
            );
        }
        Err(error) => return fail_with(&error),
    };
    if args.json {
        anstream::println!("{}", serde_json::to_string_pretty(&outcome).unwrap_or_default());
    } else {
        anstream::print!("{}", review(&outcome));
    }
    ExitStatus::from_success(!args.write || outcome.written).into()
}

/// The review as text: each tool's definition and digest, then the line.
fn review(outcome: &McpPinOutcome) -> String {
    let mut text = format!(
        "MCP server `{}` of `{}` offers {} tool(s).\n",
        outcome.server,
        outcome.policy_file,
        outcome.tools.len()
    );
    for tool in &outcome.tools {
        text.push_str(&format!("\ntool `{}` ({})\n", tool.name, tool.status()));
        text.push_str(&format!("  description: {}\n", tool.description.as_deref().unwrap_or("(none)")));
        let schema = serde_json::to_string_pretty(&tool.input_schema).unwrap_or_default();
        text.push_str(&format!("  input schema: {}\n", schema.replace('\n', "\n  ")));
        text.push_str(&format!("  digest: {}\n", tool.digest));
        if let Some(pinned) = tool.pinned.as_ref().filter(|pinned| **pinned != tool.digest) {
            text.push_str(&format!("  pinned: {pinned}\n"));
        }
    }
    for name in &outcome.gone {
        text.push_str(&format!("\ntool `{name}` is pinned but no longer offered\n"));
    }
    text.push('\n');
    match (&outcome.not_written, outcome.written) {
        (_, true) => text.push_str(&format!(
            "Wrote into `[mcp.servers.{}]` of `{}`:\n{}\n",
            outcome.server, outcome.policy_file, outcome.tools_line
        )),
        (Some(reason), false) => text.push_str(&format!(
            "Not written ({reason}). Paste into `[mcp.servers.{}]` of `{}`:\n{}\n",
            outcome.server, outcome.policy_file, outcome.tools_line
        )),
        (None, false) => text.push_str(&format!(
            "After review, pin them in `[mcp.servers.{}]` of `{}` (or run again with `--write`); remove a tool steps need not call:\n{}\n",
            outcome.server, outcome.policy_file, outcome.tools_line
        )),
    }
    text
}
