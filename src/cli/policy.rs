//! `planrun policy check [--policy NAME] -- <argv…>`: the decision for one
//! command line, as JSON; `planrun policy check --url URL [--method M]`:
//! the egress policy's decision for one HTTP request.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::DirArgs;
use crate::cli::output::{fail, fail_with, print_diagnostics};
use crate::diag::Severity;
use crate::ops::{self, ExitStatus, OpsError, PolicyCheckInput, PolicyUrlInput};

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print the decision for a command line: `{decision, rule, reason, program, program_canonical}` (and
    /// `extends`, `origin` for a policy that extends another); with `--url`, the decision for an HTTP
    /// request: `{decision, rule, reason, url, method}`.
    Check(PolicyCheckArgs),
}

#[derive(Debug, Args)]
pub struct PolicyCheckArgs {
    /// The policy to ask (`<--policies>/<NAME>.toml`).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub policy: String,
    /// An HTTP request's URL to judge by the policy's `[http]` rules, instead of a command line.
    #[arg(long, value_name = "URL", conflicts_with = "argv")]
    pub url: Option<String>,
    /// The request's method, with `--url`.
    #[arg(long, value_name = "METHOD", default_value = "GET", requires = "url")]
    pub method: String,
    /// The command line, after `--`: the program, then its arguments.
    #[arg(last = true, required_unless_present = "url", value_name = "ARGV")]
    pub argv: Vec<String>,
}

pub fn policy(args: &PolicyArgs, dirs: &DirArgs) -> ExitCode {
    match &args.command {
        PolicyCommand::Check(check) => policy_check(check, dirs),
    }
}

/// Exit code: 0 allow, 1 forbidden, 2 bad input (unknown or invalid
/// policy). Nothing is executed or created: `path` slots are judged against
/// the workspace when it exists and lexically when it does not; the program
/// is looked up on the policy's `search_path` (read-only).
fn policy_check(args: &PolicyCheckArgs, dirs: &DirArgs) -> ExitCode {
    if let Some(url) = &args.url {
        return policy_check_url(args, url, dirs);
    }
    let input = PolicyCheckInput {
        policy: &args.policy,
        policies: &dirs.policies,
        workspace: &dirs.workspace,
        argv: &args.argv,
    };
    let verdict = match ops::policy_check(input) {
        Ok(verdict) => verdict,
        Err(error) => return failed(args, error),
    };
    let mut value = serde_json::to_value(&verdict.evaluation).unwrap_or_default();
    // A policy that extends another also says its chain and where the
    // deciding rule came from.
    if let (false, Some(object)) = (verdict.extends.is_empty(), value.as_object_mut()) {
        object.insert("extends".to_string(), serde_json::json!(verdict.extends));
        object.insert("origin".to_string(), serde_json::json!(verdict.origin));
    }
    anstream::println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
    verdict.exit_status().into()
}

/// Exit code: 0 allowed, 1 refused, 2 bad input. Nothing is sent and no
/// host name is resolved: a name's addresses are judged when a step sends
/// the request.
fn policy_check_url(args: &PolicyCheckArgs, url: &str, dirs: &DirArgs) -> ExitCode {
    let input = PolicyUrlInput {
        policy: &args.policy,
        policies: &dirs.policies,
        workspace: &dirs.workspace,
        method: &args.method,
        url,
    };
    let verdict = match ops::policy_check_url(input) {
        Ok(verdict) => verdict,
        Err(error) => return failed(args, error),
    };
    let mut value = serde_json::to_value(&verdict.evaluation).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("method".to_string(), serde_json::json!(verdict.method));
        if let Some(proxy) = &verdict.proxy {
            object.insert("proxy".to_string(), serde_json::json!(proxy));
        }
        if !verdict.extends.is_empty() {
            object.insert("extends".to_string(), serde_json::json!(verdict.extends));
            object.insert("origin".to_string(), serde_json::json!(verdict.origin));
        }
    }
    anstream::println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
    verdict.exit_status().into()
}

/// An invalid policy's findings (exit 2), or the error.
fn failed(args: &PolicyCheckArgs, error: OpsError) -> ExitCode {
    match error {
        OpsError::InvalidFiles { sources, diagnostics } => {
            print_diagnostics(&sources, &diagnostics, Severity::Error);
            let message = format!("policy `{}` is invalid; run `planrun check`", args.policy);
            fail(ExitStatus::InvalidInput, &message)
        }
        error => fail_with(&error),
    }
}
