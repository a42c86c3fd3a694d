//! `planrun policy check [--policy NAME] -- <argv…>`: the decision for one
//! command line, as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::DirArgs;
use crate::cli::output::{fail, print_diagnostics};
use crate::confine::{PathRules, ProgramResolver, Workspace};
use crate::diag::{Severity, display_path};
use crate::load::Loader;
use crate::ops::ExitStatus;
use crate::policy::evaluate_shell_with;

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print the decision for a command line: `{decision, rule, reason, program}`.
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
    let valid_name = !args.policy.is_empty()
        && args.policy.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if !valid_name {
        return fail(ExitStatus::InvalidInput, &format!("invalid policy name `{}`", args.policy.escape_debug()));
    }
    let Some(path) = ["toml", "yaml", "yml"]
        .iter()
        .map(|extension| dirs.policies.join(format!("{}.{extension}", args.policy)))
        .find(|path: &PathBuf| path.is_file())
    else {
        return fail(
            ExitStatus::InvalidInput,
            &format!("no policy `{}` in `{}`", args.policy, display_path(&dirs.policies)),
        );
    };
    let mut loader = Loader::new();
    let Some(policy) = loader.load_policy(&path) else {
        print_diagnostics(loader.sources(), loader.sorted_diagnostics(), Severity::Error);
        return fail(ExitStatus::InvalidInput, &format!("policy `{}` is invalid; run `planrun check`", args.policy));
    };
    let mut resolver = ProgramResolver::new(&policy.shell);
    let evaluation = if dirs.workspace.is_dir() {
        match Workspace::open(&dirs.workspace, &policy.files) {
            Ok(workspace) => evaluate_shell_with(&policy.shell, &workspace, &mut resolver, &args.argv),
            Err(error) => {
                return fail(
                    ExitStatus::InvalidInput,
                    &format!("cannot open workspace `{}`: {error}", display_path(&dirs.workspace)),
                );
            }
        }
    } else {
        evaluate_shell_with(&policy.shell, &PathRules::new(&policy.files), &mut resolver, &args.argv)
    };
    anstream::println!("{}", serde_json::to_string_pretty(&evaluation).unwrap_or_default());
    ExitStatus::from_success(evaluation.is_allowed()).into()
}
