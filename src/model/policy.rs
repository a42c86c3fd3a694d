//! A validated policy: what a plan's steps may do.

use std::collections::BTreeMap;
use std::path::PathBuf;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::model::{FailureClass, SourceRef};

/// A policy file after validation.
#[derive(Debug, Clone, Serialize)]
pub struct Policy {
    /// The file stem (`default` for `policies/default.toml`).
    pub name: String,
    pub shell: ShellPolicy,
    pub files: FilePolicy,
    pub retry: RetryPolicy,
    pub budget: Budget,
    /// `[secrets.NAME]`: where each secret a step's `env` may use comes
    /// from. The values are read when a run starts and never stored.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, SecretSpec>,
    #[serde(skip)]
    pub source: SourceRef,
    /// The policies this one extends (`extends`), nearest first, as their
    /// files are shown (`policies/default.toml`); empty when it extends none.
    #[serde(skip)]
    pub extends: Vec<String>,
    /// `[mcp.servers.NAME]`: the MCP servers `mcp` steps may call.
    #[serde(skip_serializing_if = "crate::model::McpPolicy::is_empty")]
    pub mcp: crate::model::McpPolicy,
    /// `[http]`: the egress policy of `http` steps (left out of the
    /// serialised policy while it is the default, as records always had it).
    #[serde(skip_serializing_if = "crate::model::HttpPolicy::is_default")]
    pub http: crate::model::HttpPolicy,
    /// `[models.NAME]`: the model profiles agent steps may use.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, crate::model::ModelProfile>,
}

/// One `[secrets.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretSpec {
    pub source: SecretSource,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Where a secret's value is read from when a run starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretSource {
    /// `from_env`: a variable of planrun's own environment.
    FromEnv(String),
    /// `from_file`: a file (relative paths were resolved against the policy
    /// file's folder at load); one trailing newline is trimmed.
    FromFile(PathBuf),
}

/// How the shell tool decides and runs.
#[derive(Debug, Clone, Serialize)]
pub struct ShellPolicy {
    /// Program names that are always forbidden (checked on the plan's name
    /// and on the file name of the resolved, canonical path).
    pub blocked: Vec<String>,
    /// Rules in file order. Where several match, the strictest decision wins.
    pub allow: Vec<ShellRule>,
    /// Absolute folders searched, in order, for a bare program name. Never
    /// the workspace, never the caller's `PATH`.
    pub search_path: Vec<PathBuf>,
    /// The child's whole environment (it starts from nothing).
    pub env: BTreeMap<String, String>,
    /// Names a step's own `env` may set (`shell.env_allow`); a name of
    /// `env` above still wins over a step's value.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_allow: Vec<String>,
    /// The operating-system sandbox around every program a step starts
    /// (`shell.sandbox`, default `landlock`).
    pub sandbox: SandboxMode,
    /// `shell.require_sandbox`: refuse to run where the kernel cannot
    /// enforce the sandbox, instead of running unconfined.
    pub require_sandbox: bool,
}

/// `shell.sandbox`: what confines the programs a step starts. Ordered so
/// that the stricter is the greater (`extends` keeps the greater).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// No sandbox: the program can do what planrun's user can.
    None,
    /// Linux Landlock: reads the system folders and the workspace, writes
    /// only the workspace (never its protected folders) and a private
    /// temporary folder, no network unless its rule allows it.
    #[default]
    Landlock,
}

impl SandboxMode {
    pub const fn as_str(self) -> &'static str {
        match self {
            SandboxMode::None => "none",
            SandboxMode::Landlock => "landlock",
        }
    }
}

/// What network a rule's program may use under the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkAccess {
    /// No TCP connection or listening socket (the default).
    #[default]
    Off,
    /// `network = true`: any connection.
    On,
    /// `network_ports = [...]`: TCP connections to these ports only.
    Ports(Vec<u16>),
}

/// One `[[shell.allow]]` rule.
#[derive(Debug, Clone, Serialize)]
pub struct ShellRule {
    /// A stable name for records: the rule's `id`, or `shell.allow[<index>]`.
    pub name: String,
    pub program: String,
    /// The argument lists this rule accepts (argv without the program). An
    /// empty outer list never happens: a rule without `args` accepts exactly
    /// the program alone (`[[]]`).
    pub args: Vec<ArgPattern>,
    /// When true a pattern need only match the leading arguments; refused at
    /// load for shells, interpreters, wrappers and package managers.
    pub prefix: bool,
    pub decision: Decision,
    /// Why the rule exists, shown with every decision it makes.
    pub reason: Option<String>,
    /// The network the program may use under the sandbox (`network`,
    /// `network_ports`).
    #[serde(skip_serializing_if = "is_off")]
    pub network: NetworkAccess,
    /// Where the rule was written: `policies/default.toml:24` (the file as
    /// shown and the rule's line); `None` for rules built in code.
    #[serde(skip)]
    pub origin: Option<String>,
}

/// One accepted argument list: a matcher per token, equal length (or a
/// leading part of argv when the rule is a prefix rule).
#[derive(Debug, Clone, Serialize)]
pub struct ArgPattern(pub Vec<ArgMatcher>);

/// How one argv token is matched.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgMatcher {
    /// Byte-for-byte equality.
    Literal(String),
    /// The whole token matches the regex (anchored at both ends).
    Regex(#[serde(serialize_with = "serialize_regex")] Regex),
    /// A typed slot.
    Slot {
        kind: SlotKind,
        /// Whether the token may start with `-`.
        allow_dash: bool,
    },
}

fn is_off(network: &NetworkAccess) -> bool {
    *network == NetworkAccess::Off
}

fn serialize_regex<S: serde::Serializer>(regex: &Regex, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(regex.as_str())
}

/// What a typed slot accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotKind {
    /// A workspace-relative path that passes the file tools' confinement.
    Path,
}

/// A rule's decision. Ordered so that the strictest is the greatest:
/// `allow` < `prompt` (the step then needs a person's approval) < `forbidden`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Prompt,
    Forbidden,
}

impl Decision {
    pub const fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Prompt => "prompt",
            Decision::Forbidden => "forbidden",
        }
    }
}

/// File confinement beyond the always-protected `runs/` and `.git/`.
#[derive(Debug, Clone, Serialize)]
pub struct FilePolicy {
    /// Workspace-relative glob patterns (`*` within a component, `**` across
    /// components) that file tools may never touch.
    pub deny: Vec<String>,
    pub max_read_bytes: u64,
    pub max_write_bytes: u64,
}

/// Max attempts per failure class and the hard cap.
#[derive(Debug, Clone, Serialize)]
pub struct RetryPolicy {
    pub max_attempts: BTreeMap<FailureClass, u32>,
    /// No step gets more attempts than this, whatever it asks.
    pub cap: u32,
    /// `[retry_backoff]`: the wait before each retry.
    pub backoff: crate::model::RetryBackoff,
}

impl RetryPolicy {
    /// How many attempts a step that failed with `class` gets in all,
    /// honouring the step's own override and the cap.
    pub fn attempts_for(&self, class: FailureClass, step_override: Option<u32>) -> u32 {
        if !class.is_retryable() {
            return 1;
        }
        let by_class = self.max_attempts.get(&class).copied().unwrap_or(1);
        step_override.unwrap_or(by_class).min(self.cap).max(1)
    }

    /// The wait after failed attempt `failed` of a step with its own
    /// `retry_backoff` (if any), in run `run_id`.
    pub fn wait_after(
        &self,
        step_backoff: Option<&crate::model::BackoffOverride>,
        run_id: &str,
        step_id: &str,
        failed: u32,
    ) -> std::time::Duration {
        self.backoff.with(step_backoff).delay(run_id, step_id, failed)
    }
}

/// Limits that end a run `failed` with `stop_reason = "budget_exhausted"`.
#[derive(Debug, Clone, Serialize)]
pub struct Budget {
    pub max_steps: u64,
    pub max_tool_calls: u64,
    pub max_consecutive_failures: u64,
    pub step_timeout_secs: u64,
    pub max_output_bytes: u64,
    /// Whole-run deadline in seconds (wall clock from the run's start,
    /// across pauses); `None` for no deadline.
    pub max_run_secs: Option<u64>,
}

impl Budget {
    /// This budget lowered by a plan's overrides (never raised).
    pub fn lowered_by(&self, plan: &crate::model::BudgetOverride) -> Budget {
        let lower = |policy: u64, plan: Option<u64>| plan.map_or(policy, |plan| plan.min(policy));
        Budget {
            max_steps: lower(self.max_steps, plan.max_steps),
            max_tool_calls: lower(self.max_tool_calls, plan.max_tool_calls),
            max_consecutive_failures: lower(self.max_consecutive_failures, plan.max_consecutive_failures),
            step_timeout_secs: lower(self.step_timeout_secs, plan.step_timeout_secs),
            max_output_bytes: self.max_output_bytes,
            max_run_secs: match (self.max_run_secs, plan.max_run_secs) {
                (Some(policy), Some(plan)) => Some(policy.min(plan)),
                (policy, plan) => policy.or(plan),
            },
        }
    }
}

impl Policy {
    /// The agent tool named `name` under this policy: a shell or http rule
    /// id, a pinned MCP tool as `SERVER.TOOL`, or a built-in tool.
    pub fn agent_tool(&self, name: &str) -> Option<crate::model::AgentTool<'_>> {
        use crate::model::AgentTool;
        match name {
            "read_file" => Some(AgentTool::ReadFile),
            "write_file" => Some(AgentTool::WriteFile),
            "ticket_lookup" => Some(AgentTool::TicketLookup),
            "ticket_close" => Some(AgentTool::TicketClose),
            _ => self
                .shell
                .allow
                .iter()
                .position(|rule| rule.name == name)
                .map(|index| AgentTool::Shell(index, self.shell.allow[index].name.as_str()))
                .or_else(|| {
                    let index = self.http.allow.iter().position(|rule| rule.name == name)?;
                    Some(AgentTool::Http(index, self.http.allow[index].name.as_str()))
                })
                .or_else(|| {
                    let (server, tool) = name.split_once('.')?;
                    let (server, declared) = self.mcp.servers.get_key_value(server)?;
                    let (tool, _) = declared.tools.get_key_value(tool)?;
                    Some(AgentTool::Mcp(server.as_str(), tool.as_str()))
                }),
        }
    }
}
