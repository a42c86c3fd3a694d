//! `planrun policy check [--policy NAME] -- <argv…>`: the decision for one
//! command line, as JSON.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::DirArgs;
use crate::cli::output::{fail, fail_with, print_diagnostics};
use crate::diag::Severity;
use crate::ops::{self, ExitStatus, OpsError, PolicyCheckInput};

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print the decision for a command line: `{decision, rule, reason, program, program_canonical}` (and
    /// `extends`, `origin` for a policy that extends another).
    Check(PolicyCheckArgs),
}

#[derive(Debug, Args)]
pub struct PolicyCheckArgs {
    /// The policy to ask (`<--policies>/<NAME>.toml`).
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub policy: String,
    /// The command line, after `--`: the program, then its arguments.
    #[arg(last = true, required = true, value_name = "ARGV")]
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
    let input = PolicyCheckInput {
        policy: &args.policy,
        policies: &dirs.policies,
        workspace: &dirs.workspace,
        argv: &args.argv,
    };
    let verdict = match ops::policy_check(input) {
        Ok(verdict) => verdict,
        Err(OpsError::InvalidFiles { sources, diagnostics }) => {
            print_diagnostics(&sources, &diagnostics, Severity::Error);
            let message = format!("policy `{}` is invalid; run `planrun check`", args.policy);
            return fail(ExitStatus::InvalidInput, &message);
        }
        Err(error) => return fail_with(&error),
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
