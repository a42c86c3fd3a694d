//! A policy's `[mcp.servers.NAME]` tables: the MCP servers a plan's `mcp`
//! steps may call, each an allowlisted program started over stdio, with its
//! own environment and the digest of every tool definition it may use.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::template::Template;

/// The `[mcp]` section of a policy.
#[derive(Debug, Clone, Default, Serialize)]
pub struct McpPolicy {
    /// `[mcp.servers.NAME]`, by name.
    pub servers: BTreeMap<String, McpServer>,
}

impl McpPolicy {
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// One `[mcp.servers.NAME]` table.
#[derive(Debug, Clone, Serialize)]
pub struct McpServer {
    /// argv: a literal bare program name (the shell allowlist must allow
    /// the whole argv) and its literal arguments.
    pub command: Vec<String>,
    /// The server's own environment variables on top of the policy's
    /// `shell.env`; values are templates whose only references are
    /// `{{ secrets.NAME }}`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, Template>,
    /// The tools a step may call, each pinned by the digest of its
    /// definition (`sha256:<64 hex>`, see `tools::mcp::tool_digest`).
    pub tools: BTreeMap<String, String>,
    /// One line about the server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl McpServer {
    /// The secrets the server's `env` uses, by name, sorted and unique.
    pub fn secrets(&self) -> Vec<String> {
        crate::model::plan::secret_names(self.env.values())
    }
}
