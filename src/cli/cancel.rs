//! `planrun cancel <run_id>`: abandons a run that waits for approval or was
//! interrupted; it ends `cancelled` and nothing more runs.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, control_error, paint, run_status};
use crate::ops::ExitStatus;
use crate::runtime::{RuntimeEnv, cancel as cancel_run};

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run to cancel.
    pub run_id: String,
    /// Why (recorded in the audit log and the state's `error`).
    #[arg(long)]
    pub reason: Option<String>,
}

/// Exit code: 0 cancelled, 1 refused (the run has ended or is locked), 2
/// bad input.
pub fn cancel(args: &CancelArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    match cancel_run(&dirs.workspace, &args.run_id, args.reason.clone(), env) {
        Ok(state) => {
            anstream::println!("{} run {} is {}", paint(BOLD, "cancelled:"), state.run_id, run_status(state.status));
            ExitStatus::Done.into()
        }
        Err(error) => control_error(&error),
    }
}
