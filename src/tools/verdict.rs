//! The policy's verdict on a resolved action before it runs, from the same
//! decision functions the tools call when they run it: the shell policy
//! (and its `cwd` confinement), the workspace's path rules, the egress
//! rules of `http` (the URL; the address it resolves to is checked only
//! when it is sent), the pinned tools of `mcp` servers. Read-only: the
//! workspace's and the search path's folders are looked at, nothing is
//! started, written or sent. The interpreter's approval gate asks it
//! (`prompt`), and `planrun replay` compares it with what a run recorded.

use crate::confine::{CwdRefused, ProgramResolver, Workspace};
use crate::model::{Decision, Policy};
use crate::policy::{evaluate_http_url, evaluate_shell};
use crate::tools::ResolvedAction;

/// A decision, the rule that made it (if a rule did) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionVerdict {
    pub decision: Decision,
    pub rule: Option<String>,
    pub reason: String,
}

impl ActionVerdict {
    fn forbidden(rule: &str, reason: String) -> Self {
        ActionVerdict { decision: Decision::Forbidden, rule: Some(rule.to_string()), reason }
    }
}

/// The verdict of `policy` on `action` in `workspace`.
pub fn action_verdict(
    policy: &Policy,
    workspace: &Workspace,
    resolver: &mut ProgramResolver,
    action: &ResolvedAction,
) -> ActionVerdict {
    match action {
        ResolvedAction::Shell { argv, cwd, .. } => {
            let verdict = evaluate_shell(&policy.shell, workspace, resolver, argv);
            if verdict.decision != Decision::Forbidden
                && let Some(Err(CwdRefused::Denied(denied))) = cwd.as_deref().map(|cwd| workspace.check_cwd(cwd))
            {
                return ActionVerdict::forbidden(&denied.rule.clone(), format!("working directory {denied}"));
            }
            ActionVerdict { decision: verdict.decision, rule: Some(verdict.rule), reason: verdict.reason }
        }
        ResolvedAction::WriteFile { path, .. } | ResolvedAction::ReadFile { path } => {
            match workspace.check_path(path) {
                Ok(_) => ActionVerdict {
                    decision: Decision::Allow,
                    rule: Some("files.confined".to_string()),
                    reason: "inside the workspace and not denied by `files.deny`".to_string(),
                },
                Err(denied) => ActionVerdict::forbidden(&denied.rule.clone(), denied.to_string()),
            }
        }
        ResolvedAction::Http { method, url, .. } => {
            let evaluation = evaluate_http_url(&policy.http, method, url);
            ActionVerdict { decision: evaluation.decision, rule: Some(evaluation.rule), reason: evaluation.reason }
        }
        ResolvedAction::Mcp { server, tool, .. } => mcp_verdict(policy, workspace, resolver, server, tool),
        ResolvedAction::Finish { .. }
        | ResolvedAction::Flaky { .. }
        | ResolvedAction::TicketLookup { .. }
        | ResolvedAction::TicketClose { .. } => ActionVerdict {
            decision: Decision::Allow,
            rule: None,
            reason: "no policy rule judges this kind".to_string(),
        },
    }
}

/// An `mcp` action: the policy declares the server and pins the tool, and
/// the server's command is one the shell policy allows (whether the tool's
/// definition still matches its pin shows only when it runs).
fn mcp_verdict(
    policy: &Policy,
    workspace: &Workspace,
    resolver: &mut ProgramResolver,
    server: &str,
    tool: &str,
) -> ActionVerdict {
    let rule = format!("mcp.servers.{server}.tools.{tool}");
    let Some(declared) = policy.mcp.servers.get(server) else {
        return ActionVerdict::forbidden(&rule, format!("policy `{}` declares no MCP server `{server}`", policy.name));
    };
    if !declared.tools.contains_key(tool) {
        return ActionVerdict::forbidden(&rule, format!("MCP server `{server}` has no pinned tool `{tool}`"));
    }
    let command = evaluate_shell(&policy.shell, workspace, resolver, &declared.command);
    if command.decision != Decision::Allow {
        let reason = format!("MCP server `{server}`'s command is not allowed by the shell policy: {}", command.reason);
        return ActionVerdict::forbidden(&command.rule, reason);
    }
    ActionVerdict { decision: Decision::Allow, rule: Some(rule), reason: format!("tool `{tool}` is pinned") }
}
