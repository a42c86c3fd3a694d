//! The `mcp` step: the policy's server and pinned tool, the server's
//! program judged by the shell allowlist like any program a step starts,
//! then the call ([`mcp::call`]) under the step's timeout.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::model::{Decision, FailureClass, NetworkAccess, ToolFacts};
use crate::policy::{display_argv, evaluate_shell};
use crate::tools::mcp::{self, Call, Launch};
use crate::tools::shell_step::verdict_facts;
use crate::tools::{ToolOutcome, Tools};

impl Tools<'_> {
    pub(super) fn mcp(&mut self, server_name: &str, tool: &str, arguments: &Value, timeout: Duration) -> ToolOutcome {
        let policy = self.policy;
        let denied =
            |message: String, facts: ToolFacts| ToolOutcome::failure(FailureClass::SecurityDenied, message, facts);
        let Some(server) = policy.mcp.servers.get(server_name) else {
            return denied(format!("policy `{}` declares no MCP server `{server_name}`", policy.name), ToolFacts::None);
        };
        let Some(pinned) = server.tools.get(tool) else {
            return denied(format!("MCP server `{server_name}` has no pinned tool `{tool}`"), ToolFacts::None);
        };
        let verdict = evaluate_shell(&policy.shell, self.workspace, &mut self.resolver, &server.command);
        let mut facts = verdict_facts(&verdict);
        if verdict.decision != Decision::Allow {
            let message = format!(
                "MCP server `{server_name}` runs `{}`, which the shell allowlist does not allow (rule `{}`)",
                display_argv(&server.command),
                verdict.rule
            );
            return denied(message, ToolFacts::Shell(facts));
        }
        let Some(program) = verdict.program else {
            return ToolOutcome::failure(
                FailureClass::ExecutionError,
                format!("`{}` was not found in the policy's search path", server.command[0]),
                ToolFacts::Shell(facts),
            );
        };
        facts.program = Some(program.path.to_string_lossy().into_owned());
        if program.canonical != program.path {
            facts.program_canonical = Some(program.canonical.to_string_lossy().into_owned());
        }
        // The policy's `shell.env`, then the server's own `env` (rendered
        // by the runtime, its secrets included).
        let mut env = policy.shell.env.clone();
        env.extend(self.step_env.iter().map(|(name, value)| (name.clone(), value.clone())));
        // The sandbox, with the network of the rule that allowed the command.
        let network = policy.shell.allow.iter().find(|rule| rule.name == verdict.rule).map(|rule| &rule.network);
        let launch = Launch {
            name: server_name,
            program: &program.canonical,
            args: &server.command[1..],
            env: env.into_iter().collect(),
            shell: &policy.shell,
            workspace: self.workspace,
            network: network.unwrap_or(&NetworkAccess::Off),
            deadline: Instant::now() + timeout,
        };
        let max_output_bytes = usize::try_from(policy.budget.max_output_bytes).unwrap_or(usize::MAX);
        let call = Call { tool, pinned, arguments, max_output_bytes };
        let (result, sandbox) = mcp::call(&launch, &call);
        facts.sandbox = sandbox;
        ToolOutcome { result, facts: ToolFacts::Shell(facts), stderr_text: None }
    }
}
