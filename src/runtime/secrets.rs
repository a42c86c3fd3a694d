//! The secrets a run uses: read when it starts (and again when it is
//! resumed), held in memory only, and turned into the run's [`Redactor`].
//!
//! Only the secrets some step's `env` or `headers`, the `env` of an MCP
//! server some step calls, or an agent step's model profile (`api_key`)
//! names are read; one that is not set
//! stops the run before anything is created ([`SecretError`], exit 2). A
//! message names the secret and where it was looked for, never a value.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::model::{Action, AgentTool, Plan, Policy, SecretSource};
use crate::redact::{MIN_SECRET_BYTES, Redactor};
use crate::runtime::process_var;

/// Why a run's secrets could not be read; nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error(
        "secret `{name}` is not set: the policy reads it from the environment variable `{variable}`, which is unset or empty"
    )]
    NotSet { name: String, variable: String },
    #[error("secret `{name}` cannot be read from `{}`: {reason}", path.display())]
    Unreadable { name: String, path: PathBuf, reason: String },
    #[error("secret `{name}` is shorter than {MIN_SECRET_BYTES} bytes: too short to be redacted reliably")]
    TooShort { name: String },
    #[error("secret `{name}` is named by the plan but not declared by policy `{policy}`")]
    Undeclared { name: String, policy: String },
}

/// The secret values of one run and the redactor built from them.
#[derive(Debug, Clone, Default)]
pub struct RunSecrets {
    values: BTreeMap<String, String>,
    redactor: Redactor,
}

impl RunSecrets {
    /// The value of secret `name`, when the run uses it.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// Reads the secrets `plan`'s steps use, as `policy` says: a step's own
    /// `env` and `headers`, the `env` of each MCP server a step calls (an
    /// `mcp` step, or an agent step offering its pinned tools), and an
    /// agent step's model's `api_key`.
    pub fn resolve(plan: &Plan, policy: &Policy) -> Result<RunSecrets, SecretError> {
        let mut servers = Vec::new();
        let mut keys = Vec::new();
        for step in &plan.steps {
            match &step.action {
                Action::Mcp { server, .. } => servers.extend(policy.mcp.servers.get(server)),
                Action::Agent(spec) => {
                    for tool in &spec.tools {
                        if let Some(AgentTool::Mcp(server, _)) = policy.agent_tool(tool) {
                            servers.extend(policy.mcp.servers.get(server));
                        }
                    }
                    keys.extend(policy.models.get(&spec.model).and_then(|profile| profile.api_key.clone()));
                }
                _ => {}
            }
        }
        let names: Vec<String> = plan
            .steps
            .iter()
            .flat_map(|step| step.secrets())
            .chain(servers.into_iter().flat_map(|server| server.secrets()))
            .chain(keys)
            .collect();
        Self::read_all(names, policy)
    }

    /// Reads the secrets the `env` of MCP server `server` uses (`planrun
    /// mcp pin` starts the server as a step would).
    pub fn for_server(server: &crate::model::McpServer, policy: &Policy) -> Result<RunSecrets, SecretError> {
        Self::read_all(server.secrets(), policy)
    }

    /// `env` rendered with these secrets (its templates name secrets only).
    pub fn render_env(
        &self,
        env: &BTreeMap<String, crate::template::Template>,
    ) -> Result<Vec<(String, String)>, crate::template::TemplateError> {
        env.iter().map(|(name, value)| Ok((name.clone(), value.render(self)?))).collect()
    }

    fn read_all(names: Vec<String>, policy: &Policy) -> Result<RunSecrets, SecretError> {
        let mut values = BTreeMap::new();
        for name in names {
            if values.contains_key(&name) {
                continue;
            }
            let value = read(&name, policy)?;
            if value.len() < MIN_SECRET_BYTES {
                return Err(SecretError::TooShort { name });
            }
            values.insert(name, value);
        }
        let redactor = Redactor::new(values.iter().map(|(name, value)| (name.as_str(), value.as_str())));
        Ok(RunSecrets { values, redactor })
    }
}

/// Secrets alone: an MCP server's `env` names nothing else.
impl crate::template::RenderContext for RunSecrets {
    fn run_id(&self) -> &str {
        ""
    }
    fn last(&self) -> Option<&crate::template::StepOutput> {
        None
    }
    fn step(&self, _id: &str) -> Option<&crate::template::StepOutput> {
        None
    }
    fn secret(&self, name: &str) -> Option<&str> {
        self.value(name)
    }
}

fn read(name: &str, policy: &Policy) -> Result<String, SecretError> {
    let spec = policy
        .secrets
        .get(name)
        .ok_or_else(|| SecretError::Undeclared { name: name.to_string(), policy: policy.name.clone() })?;
    match &spec.source {
        SecretSource::FromEnv(variable) => process_var(variable)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| SecretError::NotSet { name: name.to_string(), variable: variable.clone() }),
        SecretSource::FromFile(path) => {
            let unreadable =
                |reason: String| SecretError::Unreadable { name: name.to_string(), path: path.clone(), reason };
            let mut text = std::fs::read_to_string(path).map_err(|error| unreadable(error.kind().to_string()))?;
            if text.ends_with('\n') {
                text.pop();
                if text.ends_with('\r') {
                    text.pop();
                }
            }
            if text.is_empty() {
                return Err(unreadable("the file is empty".to_string()));
            }
            Ok(text)
        }
    }
}
