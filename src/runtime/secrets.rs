//! The secrets a run uses: read when it starts (and again when it is
//! resumed), held in memory only, and turned into the run's [`Redactor`].
//!
//! Only the secrets some step's `env` names are read; one that is not set
//! stops the run before anything is created ([`SecretError`], exit 2). A
//! message names the secret and where it was looked for, never a value.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::model::{Plan, Policy, SecretSource};
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

    /// Reads the secrets `plan`'s steps use, as `policy` says.
    pub fn resolve(plan: &Plan, policy: &Policy) -> Result<RunSecrets, SecretError> {
        let mut values = BTreeMap::new();
        for name in plan.steps.iter().flat_map(|step| step.secrets()) {
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
