//! `planrun --plan FILE` and `planrun --goal TEXT`.

use std::process::ExitCode;

use crate::cli::output::{StderrProgress, fail_with};
use crate::cli::{DirArgs, RunArgs};
use crate::ops::{self, OpsError, RunInput, RunTarget};
use crate::runtime::{NoProgress, Progress, RuntimeEnv};

pub fn run(args: &RunArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let catalog;
    let target = if let Some(plan) = &args.plan {
        RunTarget::PlanFile { plan, policies: &dirs.policies }
    } else if let Some(goal) = &args.goal {
        catalog = match ops::load_catalog(&dirs.plans, &dirs.policies) {
            Ok(catalog) => catalog,
            Err(error) => return fail_with(&error),
        };
        RunTarget::Goal { goal, catalog: &catalog }
    } else {
        return fail_with(&OpsError::NothingToRun);
    };
    let input = RunInput { target, run_id: args.run_id.clone(), workspace: dirs.workspace.clone() };
    let mut quiet = NoProgress;
    let mut printer = StderrProgress;
    let progress: &mut dyn Progress = if args.quiet { &mut quiet } else { &mut printer };
    let outcome = match ops::run(input, env, progress) {
        Ok(outcome) => outcome,
        Err(error) => return fail_with(&error),
    };
    if args.json
        && let Err(code) = print_full_state(dirs, &outcome.state.run_id, env)
    {
        return code;
    }
    outcome.exit_status().into()
}

/// `--json`: the run's full state, read back from its verified records.
pub fn print_full_state(dirs: &DirArgs, run_id: &str, env: &RuntimeEnv) -> Result<(), ExitCode> {
    match ops::full_state_json(&dirs.workspace, run_id, &env.sealer) {
        Ok(state) => {
            anstream::println!("{}", serde_json::to_string_pretty(&state).unwrap_or_default());
            Ok(())
        }
        Err(error) => Err(crate::cli::output::fail(crate::ops::ExitStatus::Failed, &error.to_string())),
    }
}
