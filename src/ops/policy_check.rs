//! Ask a policy about one command line or one HTTP request (`planrun
//! policy check`), executing, sending and creating nothing.

use std::path::{Path, PathBuf};

use crate::confine::{PathRules, ProgramResolver, Workspace};
use crate::diag::display_path;
use crate::load::Loader;
use crate::model::Policy;
use crate::ops::{ExitStatus, OpsError};
use crate::policy::{HttpEvaluation, ShellEvaluation, evaluate_http_url, evaluate_shell_with};

/// Which policy, which command line, judged against which workspace.
pub struct PolicyCheckInput<'a> {
    /// The policy's name: `<policies>/<name>.toml` (or `.yaml`, `.yml`).
    pub policy: &'a str,
    pub policies: &'a Path,
    /// `path` slots are judged against this workspace when it exists, and
    /// lexically when it does not.
    pub workspace: &'a Path,
    pub argv: &'a [String],
}

/// The policy's decision, with the rule and reason behind it.
#[derive(Debug)]
pub struct PolicyVerdict {
    pub evaluation: ShellEvaluation,
    /// The policies the asked one extends, nearest first (their files as
    /// shown); empty when it extends none.
    pub extends: Vec<String>,
    /// Where the deciding rule was written (`policies/default.toml:24`);
    /// `None` when no rule decided (blocked, default deny…).
    pub origin: Option<String>,
}

impl PolicyVerdict {
    /// 0 allow, 1 anything else.
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::from_success(self.evaluation.is_allowed())
    }
}

pub fn policy_check(input: PolicyCheckInput<'_>) -> Result<PolicyVerdict, OpsError> {
    let policy = load_named_policy(input.policy, input.policies, input.workspace)?;
    let mut resolver = ProgramResolver::new(&policy.shell);
    let evaluation = if input.workspace.is_dir() {
        let workspace = open_workspace(input.workspace, &policy)?;
        let mut resolver = resolver.outside(workspace.root());
        evaluate_shell_with(&policy.shell, &workspace, &mut resolver, input.argv)
    } else {
        evaluate_shell_with(&policy.shell, &PathRules::new(&policy.files), &mut resolver, input.argv)
    };
    let origin =
        policy.shell.allow.iter().find(|rule| rule.name == evaluation.rule).and_then(|rule| rule.origin.clone());
    Ok(PolicyVerdict { evaluation, extends: policy.extends, origin })
}

/// Which policy, which request (`planrun policy check --url URL --method M`).
pub struct PolicyUrlInput<'a> {
    pub policy: &'a str,
    pub policies: &'a Path,
    pub workspace: &'a Path,
    pub method: &'a str,
    pub url: &'a str,
}

/// The egress policy's decision on one request, with the rule behind it.
#[derive(Debug)]
pub struct HttpVerdict {
    pub evaluation: HttpEvaluation,
    pub method: String,
    pub extends: Vec<String>,
    /// Where the allowing rule was written.
    pub origin: Option<String>,
    /// `http.proxy`, which an allowed request would go through.
    pub proxy: Option<String>,
}

impl HttpVerdict {
    /// 0 allow, 1 anything else.
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::from_success(self.evaluation.is_allowed())
    }
}

/// Judges one request without sending it or resolving its host: a host
/// name's addresses are judged when a step sends it (see docs/effects.md).
pub fn policy_check_url(input: PolicyUrlInput<'_>) -> Result<HttpVerdict, OpsError> {
    let method = input.method.to_ascii_uppercase();
    if !crate::model::HTTP_METHODS.contains(&method.as_str()) {
        return Err(OpsError::Usage(format!(
            "unknown method `{}`: expected one of {}",
            input.method.escape_debug(),
            crate::model::HTTP_METHODS.join(", ")
        )));
    }
    let policy = load_named_policy(input.policy, input.policies, input.workspace)?;
    let evaluation = evaluate_http_url(&policy.http, &method, input.url);
    let origin =
        policy.http.allow.iter().find(|rule| rule.name == evaluation.rule).and_then(|rule| rule.origin.clone());
    let proxy = policy.http.proxy.as_ref().filter(|_| evaluation.is_allowed()).map(crate::model::HttpProxy::url);
    Ok(HttpVerdict { evaluation, method, extends: policy.extends, origin, proxy })
}

/// The workspace at `path` under `policy`'s file rules (a usage error when
/// it cannot be opened).
pub(super) fn open_workspace(path: &Path, policy: &Policy) -> Result<Workspace, OpsError> {
    Workspace::open(path, &policy.files)
        .map_err(|error| OpsError::Usage(format!("cannot open workspace `{}`: {error}", display_path(path))))
}

/// Policy `name` of folder `policies` (`.toml`, `.yaml` or `.yml`),
/// validated with `workspace` in view.
pub(super) fn load_named_policy(name: &str, policies: &Path, workspace: &Path) -> Result<Policy, OpsError> {
    let valid_name =
        !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if !valid_name {
        return Err(OpsError::Usage(format!("invalid policy name `{}`", name.escape_debug())));
    }
    let Some(path) = ["toml", "yaml", "yml"]
        .iter()
        .map(|extension| policies.join(format!("{name}.{extension}")))
        .find(|path: &PathBuf| path.is_file())
    else {
        return Err(OpsError::Usage(format!("no policy `{name}` in `{}`", display_path(policies))));
    };
    let mut loader = Loader::new().in_workspace(workspace);
    loader.load_policy(&path).ok_or_else(|| OpsError::invalid_files(&loader))
}
