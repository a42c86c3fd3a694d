//! `planrun reconcile <run_id> --applied|--not-applied`: settles a run that
//! ended `tool_result_uncertain`; `planrun resume` then continues it.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, fail_with, paint, run_status};
use crate::ops;
use crate::runtime::RuntimeEnv;

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("answer").required(true).multiple(false).args(["applied", "not_applied"])))]
pub struct ReconcileArgs {
    /// The run that ended `tool_result_uncertain`.
    pub run_id: String,
    /// The write was applied: the step counts as done, the run continues after it.
    #[arg(long)]
    pub applied: bool,
    /// The write was not applied: `resume` runs the step again.
    #[arg(long)]
    pub not_applied: bool,
    /// Who settled it (recorded in the audit log).
    #[arg(long = "by", value_name = "NAME", value_parser = crate::cli::parse_name)]
    pub settled_by: Option<String>,
}

/// Exit code: 0 settled, 1 refused (nothing uncertain, or locked), 2 bad
/// input.
pub fn reconcile(args: &ReconcileArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    let input = ops::ReconcileInput {
        workspace: &dirs.workspace,
        run_id: &run_id,
        applied: args.applied,
        settled_by: args.settled_by.clone(),
    };
    match ops::reconcile(input, env) {
        Ok(reconciled) => {
            let state = &reconciled.state;
            let answer = if reconciled.applied { "applied" } else { "not applied" };
            anstream::println!(
                "{} run {} is {} (the write was {answer}); `planrun resume {}` continues it",
                paint(BOLD, "reconciled:"),
                state.run_id,
                run_status(state.status),
                state.run_id
            );
            reconciled.exit_status().into()
        }
        Err(error) => fail_with(&error),
    }
}
