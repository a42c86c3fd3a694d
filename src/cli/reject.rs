//! `planrun reject <run_id>`: ends a waiting run `rejected`; the frozen
//! action never runs.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, fail_with, paint, run_status};
use crate::ops;
use crate::runtime::RuntimeEnv;

#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The run waiting for approval.
    pub run_id: String,
    /// Why (recorded in the audit log and the state's `error`).
    #[arg(long, value_parser = crate::cli::parse_reason)]
    pub reason: Option<String>,
}

/// Exit code: 0 rejected, 1 refused (the run is not waiting), 2 bad input.
pub fn reject(args: &RejectArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    match ops::reject(&dirs.workspace, &run_id, args.reason.clone(), env) {
        Ok(ended) => {
            let state = &ended.state;
            anstream::println!("{} run {} is {}", paint(BOLD, "rejected:"), state.run_id, run_status(state.status));
            ended.exit_status().into()
        }
        Err(error) => fail_with(&error),
    }
}
