//! `planrun answer <run_id> TEXT`: answers the question a `waiting_input`
//! run's agent step asked, and continues the run.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::resume::GoOnArgs;
use crate::cli::run::report;
use crate::ops;
use crate::ops::ResumeRequest;
use crate::runtime::RuntimeEnv;

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The run that waits for an answer.
    pub run_id: String,
    /// The answer (1 to 2000 bytes); the model reads it as untrusted data.
    pub text: String,
    #[command(flatten)]
    pub go_on: GoOnArgs,
}

/// Exit code: as a run (0 done, 1 failed, 3 waiting for approval, 4
/// waiting for another answer); 1 when the run asks no question; 2 for bad
/// input (run id, an empty or too long answer, records that fail
/// verification).
pub fn answer(args: &AnswerArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    if let Err(message) = ops::check_answer(&args.text) {
        return crate::exit::fail(ops::ExitStatus::InvalidInput, &message);
    }
    let request = ResumeRequest {
        workspace: dirs.workspace.clone(),
        run_id,
        allow_changed_files: args.go_on.allow_changed_files,
        policies: Some(dirs.policies.clone()),
        answer: Some(args.text.clone()),
    };
    report(args.go_on.quiet, args.go_on.json, dirs, env, |progress| ops::resume(request, env, progress))
}
