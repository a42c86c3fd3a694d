//! `planrun export <run_id> --out DIR`: writes a run of a database store
//! (`--store postgres://…`) as the file store's folder `DIR/runs/<run_id>/`
//! (see [`crate::ops::export`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, fail_with, paint};
use crate::diag::display_path;
use crate::ops;
use crate::runtime::RuntimeEnv;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The run to export (`latest`: the newest run).
    pub run_id: String,
    /// The workspace folder to write it into (as `DIR/runs/<run_id>/`; never over an existing run).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Exit code: 0 written, 2 an unknown run, a run whose records fail
/// verification, an existing folder, or a store without runs to export.
pub fn export(args: &ExportArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    match ops::export(&dirs.workspace, &run_id, &args.out, env) {
        Ok(exported) => {
            anstream::println!(
                "{} run {} to {}",
                paint(BOLD, "exported:"),
                exported.run_id,
                display_path(&exported.folder)
            );
            ExitCode::SUCCESS
        }
        Err(error) => fail_with(&error),
    }
}
