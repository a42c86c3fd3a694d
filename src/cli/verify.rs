//! `planrun verify <run_id>`: checks a run's records end to end (see
//! [`crate::ops::verify`]) and prints what it found.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, GREEN, fail, fail_with, paint, run_status};
use crate::ops::{self, Verification};
use crate::runtime::{RuntimeEnv, StoryCheck};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The run to verify (`latest`: the newest run, as for `show`).
    pub run_id: String,
}

/// Exit code: 0 every record verifies, 2 a record fails verification (or
/// an unknown or invalid run id), as `show` and `resume` do for it.
pub fn verify(args: &VerifyArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    let verification = match ops::verify(&dirs.workspace, &run_id, env) {
        Ok(verification) => verification,
        Err(error) => return fail_with(&error),
    };
    match &verification {
        Verification::Verified(run) => {
            let seal = if run.keyed { "HMAC-SHA256" } else { "SHA-256 (unkeyed: detects edits, not forgeries)" };
            anstream::println!(
                "{} run {} · {} · state version {} · {} audit events · {} history records · {seal}",
                paint(GREEN, "verified:"),
                paint(BOLD, &run.run_id),
                run_status(run.status),
                run.state_version,
                run.events,
                run.history_records,
            );
            if run.tail_events > 0 || run.tail_history > 0 {
                anstream::println!(
                    "crash tail: {} audit events and {} history records past the checkpoint are not trusted \
                     (`resume` drops them)",
                    run.tail_events,
                    run.tail_history
                );
            }
            if let StoryCheck::Unchecked(why) = &run.story {
                anstream::println!("story not checked: {why}");
            }
            for behind in &run.views_behind {
                anstream::println!(
                    "view behind the log: {behind} (what a power cut leaves; written again when the run is next opened)"
                );
            }
        }
        Verification::Failed { run_id, reason } => {
            // The same message `show` and `resume` give for this record.
            return fail(verification.exit_status(), &format!("run `{run_id}` failed verification: {reason}"));
        }
    }
    verification.exit_status().into()
}
