//! `planrun resume <run_id>`: continues a run that waits for approval (with
//! a valid approval) or was interrupted.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::run::report;
use crate::ops;
use crate::ops::ResumeRequest;
use crate::runtime::RuntimeEnv;

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run to continue.
    pub run_id: String,
    #[command(flatten)]
    pub go_on: GoOnArgs,
}

/// How a command that continues a run (`resume`, `answer`) goes on.
#[derive(Debug, Args)]
pub struct GoOnArgs {
    /// Continue even if the plan or policy file changed since the run started.
    #[arg(long)]
    pub allow_changed_files: bool,
    /// Print the final state as JSON to stdout.
    #[arg(long)]
    pub json: bool,
    /// Print no progress to stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Exit code: as a run (0 done, 1 failed or rejected, 3 waiting for another
/// approval); 1 when the resume was refused (an approval that does not
/// match, an ended run, changed files); 2 for bad input (run id, records
/// that fail verification, invalid files).
pub fn resume(args: &ResumeArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    let request = ResumeRequest {
        workspace: dirs.workspace.clone(),
        run_id,
        allow_changed_files: args.go_on.allow_changed_files,
        policies: Some(dirs.policies.clone()),
        answer: None,
    };
    report(args.go_on.quiet, args.go_on.json, dirs, env, |progress| ops::resume(request, env, progress))
}
