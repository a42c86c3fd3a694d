//! Run a plan file or a goal: load, route, execute, report.
//!
//! The command line (`planrun --plan`, `planrun --goal`) and the service's
//! agent adapter both come through [`run`].

use std::path::{Path, PathBuf};

use crate::load::{Catalog, Loader};
use crate::model::{GivenInput, InputSource, inputs_from_object, resolve_inputs};
use crate::ops::{OpsError, load_plan_file};
use crate::router::select;
pub use crate::runtime::RunOutcome;
use crate::runtime::{Progress, RunError, RunRequest, RuntimeEnv, execute};
use crate::store::RunId;

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
    /// The plan's inputs as given (`--input`, `--inputs`, a request's
    /// `inputs`); checked against its declarations before anything runs.
    pub inputs: Vec<GivenInput>,
}

/// The `--run-id` of a run or a queued run, checked once the plan is loaded
/// (so a broken plan is reported first); `None` takes one from the
/// runtime's id generator.
pub(crate) fn parse_run_id(run_id: Option<&str>) -> Result<Option<RunId>, OpsError> {
    Ok(run_id.map(RunId::parse).transpose().map_err(RunError::InvalidRunId)?)
}

/// The inputs a run is given: those of `file` (`--inputs`), then `flags`
/// (`--input NAME=VALUE`), so a flag wins over the file.
pub fn given_inputs(file: Option<&Path>, flags: &[GivenInput]) -> Result<Vec<GivenInput>, OpsError> {
    let mut given = Vec::new();
    if let Some(path) = file {
        let mut loader = Loader::new();
        let Some(value) = loader.load_data_file(path) else {
            return Err(OpsError::invalid_files(&loader));
        };
        let source = InputSource::File(path.display().to_string());
        given = inputs_from_object(&value, source).map_err(OpsError::Usage)?;
    }
    given.extend(flags.iter().cloned());
    Ok(given)
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
    let inputs = resolve_inputs(&plan.id, &plan.inputs, &input.inputs)?;
    let run_id = parse_run_id(input.run_id.as_deref())?;
    let request = RunRequest { plan, policy, goal, inputs, run_id, workspace: input.workspace };
    Ok(execute(request, env, progress)?)
}
