//! `planrun --plan FILE` and `planrun --goal TEXT`.

use std::process::ExitCode;

use crate::cli::output::{StderrProgress, fail, print_diagnostics, run_exit_code};
use crate::cli::{DirArgs, RunArgs};
use crate::diag::Severity;
use crate::load::{Catalog, Loader};
use crate::model::{Plan, Policy};
use crate::ops::ExitStatus;
use crate::router::select;
use crate::runtime::{NoProgress, Progress, RunRequest, RuntimeEnv, execute};
use crate::store::{full_state, load_run};

pub fn run(args: &RunArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let mut loader = Loader::new();
    let single: (Plan, Policy);
    let catalog: Catalog;
    let (plan, policy, goal): (&Plan, &Policy, Option<String>) = if let Some(path) = &args.plan {
        let loaded = loader.load_plan_with_policy(path, &dirs.policies);
        match loaded {
            Some(loaded) if !loader.has_errors() => {
                single = loaded;
                (&single.0, &single.1, None)
            }
            _ => return invalid_files(&loader),
        }
    } else if let Some(goal) = &args.goal {
        catalog = loader.load_catalog(&dirs.plans, &dirs.policies);
        if loader.has_errors() {
            return invalid_files(&loader);
        }
        match select(&catalog, goal) {
            Ok((plan, policy)) => (plan, policy, Some(goal.clone())),
            Err(why) => return fail(ExitStatus::InvalidInput, &why),
        }
    } else {
        return fail(
            ExitStatus::InvalidInput,
            "nothing to run: give `--plan FILE` or `--goal TEXT`, or a command (see `planrun --help`)",
        );
    };

    let request = RunRequest { plan, policy, goal, run_id: args.run_id.clone(), workspace: dirs.workspace.clone() };
    let mut quiet = NoProgress;
    let mut printer = StderrProgress;
    let progress: &mut dyn Progress = if args.quiet { &mut quiet } else { &mut printer };
    let outcome = match execute(request, env, progress) {
        Ok(outcome) => outcome,
        Err(error) => {
            let code = if error.nothing_ran() { ExitStatus::InvalidInput } else { ExitStatus::Failed };
            return fail(code, &error.to_string());
        }
    };
    if args.json {
        match load_run(&dirs.workspace, &outcome.state.run_id, &env.sealer) {
            Ok(records) => {
                let text = serde_json::to_string_pretty(&full_state(&records)).unwrap_or_default();
                anstream::println!("{text}");
            }
            Err(error) => return fail(ExitStatus::Failed, &error.to_string()),
        }
    }
    run_exit_code(outcome.state.status)
}

fn invalid_files(loader: &Loader) -> ExitCode {
    print_diagnostics(loader.sources(), loader.sorted_diagnostics(), Severity::Error);
    let errors = loader.diagnostics().iter().filter(|diagnostic| diagnostic.is_error()).count();
    fail(ExitStatus::InvalidInput, &format!("{errors} error(s) in plan or policy files; nothing ran"))
}
