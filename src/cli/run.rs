//! `planrun --plan FILE` and `planrun --goal TEXT` (with `--queue`: queued
//! for a worker instead of driven here).

use std::process::ExitCode;

use crate::cli::output::{StderrProgress, fail, fail_with};
use crate::cli::{DirArgs, RunArgs};
use crate::ops::{self, ExitStatus, OpsError, RunInput, RunOutcome, RunTarget};
use crate::runtime::{NoProgress, Progress, RuntimeEnv};

pub fn run(args: &RunArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let catalog;
    let target = if let Some(plan) = &args.plan {
        RunTarget::PlanFile { plan, policies: &dirs.policies }
    } else if let Some(goal) = &args.goal {
        catalog = match ops::load_catalog(&dirs.plans, &dirs.policies, Some(&dirs.workspace)) {
            Ok(catalog) => catalog,
            Err(error) => return fail_with(&error),
        };
        RunTarget::Goal { goal, catalog: &catalog }
    } else {
        return fail_with(&OpsError::NothingToRun);
    };
    let inputs = match ops::given_inputs(args.inputs_file.as_deref(), &args.inputs) {
        Ok(inputs) => inputs,
        Err(error) => return fail_with(&error),
    };
    let input = RunInput { target, run_id: args.run_id.clone(), workspace: dirs.workspace.clone(), inputs };
    if args.queue {
        return queue(input, args, env);
    }
    report(args.quiet, args.json, dirs, env, |progress| ops::run(input, env, progress))
}

/// `--queue`: records the run as queued and prints its id (exit 0), or
/// why it cannot be queued (exit 2: bad files, the file store, a taken id).
fn queue(input: RunInput<'_>, args: &RunArgs, env: &RuntimeEnv) -> ExitCode {
    let queued = match ops::queue(input, env) {
        Ok(queued) => queued,
        Err(error) => return fail_with(&error),
    };
    if args.json {
        let value = serde_json::json!({"run_id": queued.run_id, "status": "queued", "plan_path": queued.plan_path});
        anstream::println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
    } else {
        anstream::println!("{}", queued.run_id);
    }
    if !args.quiet {
        anstream::eprintln!(
            "queued: run {} (plan {}): a `planrun worker` or `planrun serve` of this workspace starts it",
            queued.run_id,
            queued.plan_path
        );
    }
    ExitStatus::Done.into()
}

/// Runs `work` with the progress printer (unless `quiet`), then prints the
/// run's full state when `json`; the exit code is the run's (shared by
/// `--plan`/`--goal` and `resume`).
pub fn report(
    quiet: bool,
    json: bool,
    dirs: &DirArgs,
    env: &RuntimeEnv,
    work: impl FnOnce(&mut dyn Progress) -> Result<RunOutcome, OpsError>,
) -> ExitCode {
    let mut silent = NoProgress;
    let mut printer = StderrProgress::new(&dirs.workspace);
    let progress: &mut dyn Progress = if quiet { &mut silent } else { &mut printer };
    let outcome = match work(progress) {
        Ok(outcome) => outcome,
        Err(error) => return fail_with(&error),
    };
    if json {
        let state = crate::store::RunId::parse(&outcome.state.run_id)
            .map_err(ops::OpsError::from)
            .and_then(|run_id| ops::full_state_json(&dirs.workspace, &run_id, env));
        match state {
            Ok(state) => anstream::println!("{}", serde_json::to_string_pretty(&state).unwrap_or_default()),
            Err(error) => return fail(ExitStatus::Failed, &error.to_string()),
        }
    }
    ExitStatus::for_run(outcome.state.status).into()
}
