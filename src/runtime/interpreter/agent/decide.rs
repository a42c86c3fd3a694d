//! What the runtime decides about one recorded model answer, before
//! anything acts on it: refused (with the rule), a finish, a question to a
//! person, or an action to run — with or without a person's approval
//! first. Pure: it reads the policy, the step and the answer, and asks the
//! confinement and the shell policy (which look at the workspace's and the
//! search path's folders, read-only). The turn loop acts on the decision
//! (`act.rs`); `planrun replay` compares it with what a run recorded.

use serde_json::Value;

use crate::confine::{ProgramResolver, Workspace};
use crate::model::{AgentSpec, AgentTool, Decision, Policy, Step};
use crate::policy::{evaluate_http_url, evaluate_shell};
use crate::tools::ResolvedAction;

use super::listing::McpListing;
use super::proposal::{Proposal, decode, resolve, writes};

/// The runtime's decision on one answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnDecision {
    /// Not run: the rule that refused it, and why.
    Refused { rule: String, message: String },
    /// The model answered `finish` with this summary.
    Finish(String),
    /// The model asked a person this question.
    Ask(String),
    /// The action `tool` proposed, resolved. `approval`: who requires a
    /// person's approval first (`step`, `risk` or `policy`), if anyone;
    /// `rule`: the shell rule that allows it, for a shell tool.
    Act { tool: String, action: Box<ResolvedAction>, approval: Option<&'static str>, rule: Option<String> },
}

impl TurnDecision {
    fn refused(rule: &str, message: String) -> Self {
        TurnDecision::Refused { rule: rule.to_string(), message }
    }
}

/// Decides what becomes of `answer` (a turn's decoded answer) in agent
/// step `step` under `policy`: the tool must be offered, its arguments fit
/// its schema, a path stay inside the workspace, a command be allowed by
/// the very rule offered; a write (or a step with `approval`, or a rule
/// that says `prompt`) waits for a person.
pub(crate) fn decide_turn(
    policy: &Policy,
    workspace: &Workspace,
    resolver: &mut ProgramResolver,
    step: &Step,
    spec: &AgentSpec,
    listing: &McpListing,
    answer: &Value,
) -> TurnDecision {
    let (tool, arguments) = match decode(answer) {
        Err(reason) => {
            let reason = if answer.is_null() { "the answer is not JSON".to_string() } else { reason };
            return TurnDecision::refused("agent.answer", reason);
        }
        Ok(Proposal::Finish(summary)) => return TurnDecision::Finish(summary),
        Ok(Proposal::Ask(question)) => return TurnDecision::Ask(question),
        Ok(Proposal::Act { tool, arguments }) => (tool, arguments),
    };
    let offered = spec.tools.contains(&tool);
    let Some(agent_tool) = policy.agent_tool(&tool).filter(|_| offered) else {
        let message = format!("tool `{tool}` is not offered to this step (offered: {})", spec.tools.join(", "));
        return TurnDecision::refused("agent.tools", message);
    };
    let action = match resolve(policy, agent_tool, &arguments) {
        Ok(action) => action,
        Err(message) => return TurnDecision::refused("agent.arguments", format!("arguments of `{tool}`: {message}")),
    };
    // A path outside the workspace is refused before anyone is asked
    // to approve it (the tool checks again when it runs).
    if let ResolvedAction::WriteFile { path, .. } | ResolvedAction::ReadFile { path } = &action
        && let Err(denied) = workspace.check_path(path)
    {
        return TurnDecision::Refused { rule: denied.rule.clone(), message: denied.to_string() };
    }
    if let (ResolvedAction::Mcp { arguments, .. }, AgentTool::Mcp(server, name)) = (&action, agent_tool)
        && let Some(listed) = listing.get(&tool)
    {
        // The definition is the pinned one when the step lists it; a
        // replayed run's recorded listing may not be under today's pin.
        let pinned = policy.mcp.servers.get(server).and_then(|server| server.tools.get(name));
        if pinned != Some(&listed.digest) {
            let message = format!(
                "`{tool}` was listed with digest {}, which the policy does not pin (pinned: {})",
                listed.digest,
                pinned.map_or("nothing", String::as_str)
            );
            return TurnDecision::refused("mcp.pin", message);
        }
        let problems = crate::tools::mcp::schema::problems(&listed.input_schema, arguments);
        if !problems.is_empty() {
            let message = format!("arguments of `{tool}` do not fit the tool's input schema: {}", problems.join("; "));
            return TurnDecision::refused("agent.arguments", message);
        }
    }
    let mut prompt = false;
    let mut allowed_by = None;
    if let (ResolvedAction::Shell { argv, .. }, AgentTool::Shell(_, rule)) = (&action, agent_tool) {
        let verdict = evaluate_shell(&policy.shell, workspace, resolver, argv);
        if verdict.decision == Decision::Forbidden {
            let message = format!("`{}` is refused by the policy: {}", argv.join(" "), verdict.reason);
            return TurnDecision::Refused { rule: verdict.rule, message };
        }
        if verdict.rule != rule {
            let message =
                format!("`{}` is decided by rule `{}`, not by the offered tool `{rule}`", argv.join(" "), verdict.rule);
            return TurnDecision::refused("agent.tools", message);
        }
        prompt = verdict.decision == Decision::Prompt;
        allowed_by = Some(verdict.rule);
    }
    if let (ResolvedAction::Http { method, url, .. }, AgentTool::Http(_, rule)) = (&action, agent_tool) {
        // Judged by the egress policy before anyone is asked to approve
        // it (the tool judges it again, with the address, when it runs).
        let judged = evaluate_http_url(&policy.http, method, url);
        if !judged.is_allowed() {
            let message = format!("{method} {url} is refused by the egress policy: {}", judged.reason);
            return TurnDecision::Refused { rule: judged.rule, message };
        }
        if judged.rule != rule {
            let message =
                format!("{method} {url} is allowed by rule `{}`, not by the offered tool `{rule}`", judged.rule);
            return TurnDecision::refused("agent.tools", message);
        }
        allowed_by = Some(judged.rule);
    }
    let approval = if step.approval {
        Some("step")
    } else if writes(&action) {
        Some("risk")
    } else if prompt {
        Some("policy")
    } else {
        None
    };
    TurnDecision::Act { tool, action: Box::new(action), approval, rule: allowed_by }
}
