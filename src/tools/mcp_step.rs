//! The `mcp` step: the policy's server and pinned tool, the server's
//! program judged by the shell allowlist like any program a step starts,
//! then the call ([`mcp::call`]) under the step's timeout. An agent step
//! that offers pinned tools lists them the same way first
//! ([`Tools::mcp_tools`]), so that it can offer their input schemas and
//! check a proposal's arguments before anyone approves it.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::model::{Decision, FailureClass, McpServer, NetworkAccess, ShellFacts, ToolFacts};
use crate::policy::{display_argv, evaluate_shell};
use crate::tools::mcp::{self, Call, Launch, ToolDefinition};
use crate::tools::shell_step::verdict_facts;
use crate::tools::{ToolFailure, ToolOutcome, Tools};

impl Tools<'_> {
    pub(super) fn mcp(&mut self, server_name: &str, tool: &str, arguments: &Value, timeout: Duration) -> ToolOutcome {
        let max_output_bytes = usize::try_from(self.policy.budget.max_output_bytes).unwrap_or(usize::MAX);
        let started = self.with_server(server_name, timeout, |launch, server| {
            let Some(pinned) = server.tools.get(tool) else {
                let message = format!("MCP server `{server_name}` has no pinned tool `{tool}`");
                return (
                    Err(ToolFailure { class: FailureClass::SecurityDenied, message, output_text: String::new() }),
                    None,
                );
            };
            mcp::call(launch, &Call { tool, pinned, arguments, max_output_bytes })
        });
        match started {
            Ok(((result, sandbox), mut facts)) => {
                facts.sandbox = sandbox;
                ToolOutcome { result, facts: ToolFacts::Shell(facts), stderr_text: None }
            }
            Err(refused) => {
                let (failure, facts) = *refused;
                ToolOutcome { result: Err(failure), facts, stderr_text: None }
            }
        }
    }

    /// The tools MCP server `server_name` lists, read by starting it in its
    /// sandbox as an `mcp` step would (its program allowed by the shell
    /// allowlist, its `env` the one [`Tools::set_step_env`] gave); nothing
    /// is called. A failure is the step's, as an `mcp` step's would be.
    pub fn mcp_tools(&mut self, server_name: &str, timeout: Duration) -> Result<Vec<ToolDefinition>, ToolFailure> {
        let listed = self.with_server(server_name, timeout, |launch, _| {
            launch.open(0).map(|(_, tools)| tools).map_err(|error| error.failure(server_name))
        });
        listed.map_err(|refused| refused.0)?.0
    }

    /// Resolves the policy's server `server_name` (declared, its command
    /// allowed by the shell allowlist and found on the search path) and
    /// hands its launch to `with`: the server's program and arguments, the
    /// policy's `shell.env` and the server's own `env` (rendered by the
    /// runtime, its secrets included), the sandbox with the network of the
    /// rule that allows the command, and the deadline.
    fn with_server<R>(
        &mut self,
        server_name: &str,
        timeout: Duration,
        with: impl FnOnce(&Launch<'_>, &McpServer) -> R,
    ) -> Result<(R, ShellFacts), Box<(ToolFailure, ToolFacts)>> {
        let policy = self.policy;
        let refused =
            |class, message, facts| Box::new((ToolFailure { class, message, output_text: String::new() }, facts));
        let Some(server) = policy.mcp.servers.get(server_name) else {
            let message = format!("policy `{}` declares no MCP server `{server_name}`", policy.name);
            return Err(refused(FailureClass::SecurityDenied, message, ToolFacts::None));
        };
        let verdict = evaluate_shell(&policy.shell, self.workspace, &mut self.resolver, &server.command);
        let mut facts = verdict_facts(&verdict);
        if verdict.decision != Decision::Allow {
            let message = format!(
                "MCP server `{server_name}` runs `{}`, which the shell allowlist does not allow (rule `{}`)",
                display_argv(&server.command),
                verdict.rule
            );
            return Err(refused(FailureClass::SecurityDenied, message, ToolFacts::Shell(facts)));
        }
        let Some(program) = verdict.program else {
            let message = format!("`{}` was not found in the policy's search path", server.command[0]);
            return Err(refused(FailureClass::ExecutionError, message, ToolFacts::Shell(facts)));
        };
        facts.program = Some(program.path.to_string_lossy().into_owned());
        if program.canonical != program.path {
            facts.program_canonical = Some(program.canonical.to_string_lossy().into_owned());
        }
        let mut env = policy.shell.env.clone();
        env.extend(self.step_env.iter().map(|(name, value)| (name.clone(), value.clone())));
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
        Ok((with(&launch, server), facts))
    }
}
