//! `planrun cancel <run_id>`: abandons a run that waits for approval or was
//! interrupted; it ends `cancelled` and nothing more runs.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, fail_with, paint, run_status};
use crate::ops;
use crate::runtime::RuntimeEnv;

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run to cancel.
    pub run_id: String,
    /// Why (recorded in the audit log and the state's `error`).
    #[arg(long, value_parser = crate::cli::parse_reason)]
    pub reason: Option<String>,
}

/// Exit code: 0 cancelled, 1 refused (the run has ended or is locked), 2
/// bad input.
pub fn cancel(args: &CancelArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    let input = ops::CancelInput {
        workspace: &dirs.workspace,
        policies: &dirs.policies,
        run_id: &run_id,
        reason: args.reason.clone(),
    };
    match ops::cancel(input, env) {
        Ok(ended) => {
            let state = &ended.state;
            anstream::println!("{} run {} is {}", paint(BOLD, "cancelled:"), state.run_id, run_status(state.status));
            ended.exit_status().into()
        }
        Err(error) => fail_with(&error),
    }
}
