//! The pinned MCP tools (`SERVER.TOOL`) an agent step offers, as their
//! servers list them when the step starts or resumes. Each server is
//! started once in its sandbox (as an `mcp` step starts it) and asked for
//! its tools; nothing is called. A tool the server no longer lists, or
//! whose definition no longer has its pinned digest, ends the step before
//! the model is asked anything (`security_denied`). The listed input
//! schemas are what the prompt offers and what a proposal's arguments are
//! checked against before anyone is asked to approve the call; they are
//! recorded (`agent_tools_listed`) so that `planrun replay` decides the
//! same way without starting anything.

use std::collections::BTreeMap;

use crate::model::{AgentSpec, AgentTool, FailureClass, Policy, Step};
use crate::runtime::event::{AgentToolsListed, Event, ListedTool};
use crate::store::StoreError;
use crate::tools::ToolFailure;

use super::super::attempt::Attempt;
use super::super::outcome::failure;

/// The listed definitions by `SERVER.TOOL`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct McpListing {
    tools: BTreeMap<String, ListedTool>,
}

impl McpListing {
    /// The listing a run recorded (`agent_tools_listed`).
    pub(crate) fn recorded(tools: Vec<ListedTool>) -> McpListing {
        McpListing { tools: tools.into_iter().map(|tool| (tool.tool.clone(), tool)).collect() }
    }

    /// Tool `name`'s listed definition (`None`: not listed, or a run
    /// recorded before listings were).
    pub(crate) fn get(&self, name: &str) -> Option<&ListedTool> {
        self.tools.get(name)
    }
}

/// The MCP servers whose pinned tools `spec` offers, each with the names
/// (`SERVER.TOOL`, and the tool alone) of those tools.
fn offered_by_server<'p>(policy: &'p Policy, spec: &AgentSpec) -> BTreeMap<&'p str, Vec<(String, &'p str)>> {
    let mut servers: BTreeMap<&str, Vec<(String, &str)>> = BTreeMap::new();
    for name in &spec.tools {
        if let Some(AgentTool::Mcp(server, tool)) = policy.agent_tool(name) {
            servers.entry(server).or_default().push((name.clone(), tool));
        }
    }
    servers
}

impl Attempt<'_, '_> {
    /// Lists the pinned MCP tools agent step `step` offers and records
    /// them; `Err`: why the step ends instead.
    pub(super) fn list_mcp_tools(
        &mut self,
        step: &Step,
        spec: &AgentSpec,
    ) -> Result<Result<McpListing, ToolFailure>, StoreError> {
        let policy = self.policy;
        let servers = offered_by_server(policy, spec);
        if servers.is_empty() {
            return Ok(Ok(McpListing::default()));
        }
        let timeout = self.budgets.timeout(step);
        let mut listed = Vec::new();
        for (server, tools) in servers {
            let Some(declared) = policy.mcp.servers.get(server) else { continue };
            let env = match super::super::render::render_server_env(declared, self.outputs) {
                Ok(env) => env,
                Err(failed) => return Ok(Err(failed)),
            };
            self.tools.at_step(&step.id);
            self.tools.set_step_env(env);
            let definitions = match self.tools.mcp_tools(server, timeout) {
                Ok(definitions) => definitions,
                Err(failed) => return Ok(Err(failed)),
            };
            self.recorder.may_act()?;
            for (name, tool) in tools {
                let pinned = declared.tools.get(tool).map(String::as_str).unwrap_or_default();
                let Some(definition) = definitions.iter().find(|definition| definition.name == tool) else {
                    let message = format!(
                        "agent step `{}`: MCP server `{server}` no longer offers tool `{tool}` (pinned at {pinned}); review its tools with `planrun mcp pin {server}`",
                        step.id
                    );
                    return Ok(Err(failure(FailureClass::SecurityDenied, message)));
                };
                let digest = definition.digest();
                if digest != pinned {
                    let message = format!(
                        "agent step `{}`: the definition of `{tool}` of MCP server `{server}` changed: new digest {digest}, pinned {pinned}; review it and pin it with `planrun mcp pin {server}`",
                        step.id
                    );
                    return Ok(Err(failure(FailureClass::SecurityDenied, message)));
                }
                listed.push(ListedTool {
                    tool: name,
                    digest,
                    description: definition.description.clone(),
                    input_schema: definition.input_schema.clone(),
                });
            }
        }
        self.tools.set_step_env(Default::default());
        self.recorder
            .emit(Event::AgentToolsListed(AgentToolsListed { step_id: step.id.clone(), tools: listed.clone() }))?;
        Ok(Ok(McpListing::recorded(listed)))
    }
}
