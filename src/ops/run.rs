//! Run a plan file or a goal: load, route, execute, report.
//!
//! The command line (`planrun --plan`, `planrun --goal`) and the service's
//! agent adapter both come through [`run`].

use std::path::{Path, PathBuf};

use crate::load::Catalog;
use crate::ops::{ExitStatus, OpsError, load_plan_file};
use crate::router::select;
use crate::runtime::{Progress, RunRequest, RuntimeEnv, execute};
use crate::store::RunState;

/// What to run.
pub enum RunTarget<'a> {
    /// One plan file and the folder of policies it may name.
    PlanFile { plan: &'a Path, policies: &'a Path },
    /// A goal, routed over a loaded catalog.
    Goal { goal: &'a str, catalog: &'a Catalog },
}

/// A run request: the target, an optional run id, the workspace.
pub struct RunInput<'a> {
    pub target: RunTarget<'a>,
    /// An explicit run id; `None` takes one from the runtime's id generator.
    pub run_id: Option<String>,
    /// The workspace folder; created when missing.
    pub workspace: PathBuf,
}

/// A run that ended or paused (any status: a failed step is an outcome).
#[derive(Debug)]
pub struct RunOutcome {
    pub state: RunState,
}

impl RunOutcome {
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::for_run(self.state.status)
    }
}

impl From<crate::runtime::RunOutcome> for RunOutcome {
    fn from(outcome: crate::runtime::RunOutcome) -> Self {
        RunOutcome { state: outcome.state }
    }
}

/// Loads (or routes to) the plan and its policy, then runs it to its end or
/// its first approval gate.
pub fn run(input: RunInput<'_>, env: &RuntimeEnv, progress: &mut dyn Progress) -> Result<RunOutcome, OpsError> {
    let single;
    let (plan, policy, goal) = match input.target {
        RunTarget::PlanFile { plan, policies } => {
            single = load_plan_file(plan, policies, &input.workspace)?;
            (&single.0, &single.1, None)
        }
        RunTarget::Goal { goal, catalog } => {
            let (plan, policy) = select(catalog, goal).map_err(OpsError::NoRoute)?;
            (plan, policy, Some(goal.to_string()))
        }
    };
    let request = RunRequest { plan, policy, goal, run_id: input.run_id, workspace: input.workspace };
    Ok(execute(request, env, progress)?.into())
}
