//! Queue a run (`planrun --plan FILE --queue`, `--goal TEXT --queue`): the
//! plan is loaded (or routed to) and validated as for a run,
//! then recorded as a queued run with copies of its plan and policy files,
//! for any worker of the workspace to start. Nothing runs here.

use std::path::Path;

use crate::load::Loader;
use crate::model::{InputValues, Plan, Policy, resolve_inputs};
use crate::ops::catalog::load_plan_file_with;
use crate::ops::run::parse_run_id;
use crate::ops::{OpsError, RunInput, RunTarget};
use crate::router::select;
use crate::runtime::{QueuedStart, RuntimeEnv, submit};
use crate::store::{RunId, RunStore};

/// A run recorded as queued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub run_id: String,
    /// The plan file it will run (as shown in its records).
    pub plan_path: String,
}

/// Validates the run `input` asks for and queues it.
pub fn queue(input: RunInput<'_>, env: &RuntimeEnv) -> Result<Queued, OpsError> {
    let (start, plan_path) = match input.target {
        RunTarget::PlanFile { plan, policies } => {
            let (loader, (plan, policy)) = load_plan_file_with(plan, policies, &input.workspace)?;
            let path = plan.source.path.clone();
            let inputs = resolve_inputs(&plan.id, &plan.inputs, &input.inputs)?;
            (request(&loader, &plan, &policy, None, inputs)?, path)
        }
        RunTarget::Goal { goal, catalog } => {
            let (routed, routed_policy) = select(catalog, goal).map_err(OpsError::NoRoute)?;
            // The catalog keeps no texts: the chosen files are read again,
            // and must be the ones routed to.
            let policies = Path::new(&routed_policy.source.path).parent().map(Path::to_path_buf).unwrap_or_default();
            let (loader, (plan, policy)) =
                load_plan_file_with(Path::new(&routed.source.path), &policies, &input.workspace)?;
            if plan.source.sha256 != routed.source.sha256 || policy.source.sha256 != routed_policy.source.sha256 {
                return Err(OpsError::Usage(format!(
                    "plan `{}` or its policy changed while the goal was routed to it; queue it again",
                    routed.source.path
                )));
            }
            let path = plan.source.path.clone();
            let inputs = resolve_inputs(&plan.id, &plan.inputs, &input.inputs)?;
            (request(&loader, &plan, &policy, Some(goal.to_string()), inputs)?, path)
        }
    };
    let run_id = submit(&start, parse_run_id(input.run_id.as_deref())?, &input.workspace, env)?;
    Ok(Queued { run_id, plan_path })
}

/// The queued request: the texts the loader validated, under the paths
/// the records name.
fn request(
    loader: &Loader,
    plan: &Plan,
    policy: &Policy,
    goal: Option<String>,
    inputs: InputValues,
) -> Result<QueuedStart, OpsError> {
    let text = |path: &str| {
        loader
            .sources()
            .named(path)
            .map(|file| file.text.clone())
            .ok_or_else(|| OpsError::Usage(format!("`{path}` was validated but its text is not at hand")))
    };
    let mut start = QueuedStart::new(plan, policy, (text(&plan.source.path)?, text(&policy.source.path)?), goal);
    start.inputs = inputs;
    for path in &policy.extends {
        start.parents.push(crate::runtime::FileCopy { path: path.clone(), text: text(path)? });
    }
    Ok(start)
}

/// A queued run as `show` and `runs` present it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedSummary {
    pub run_id: String,
    /// The plan file it will run; `None` when its request cannot be read.
    pub plan_path: Option<String>,
    pub goal: Option<String>,
    /// Whether a worker holds it now, starting it.
    pub starting: bool,
}

/// Queued run `run_id` of `workspace`, if it is one.
pub fn queued_run(workspace: &Path, run_id: &RunId, env: &RuntimeEnv) -> Result<Option<QueuedSummary>, OpsError> {
    queued_in(env.store(workspace).as_ref(), run_id.as_str())
}

/// Queued run `run_id` of `store`, if it is one.
pub(crate) fn queued_in(store: &dyn RunStore, run_id: &str) -> Result<Option<QueuedSummary>, OpsError> {
    let Some(queued) = store.queued_run(run_id)? else { return Ok(None) };
    let start = crate::strict_json::from_str::<QueuedStart>(&queued.request).ok();
    Ok(Some(QueuedSummary {
        run_id: queued.run_id,
        plan_path: start.as_ref().map(|start| start.plan.path.clone()),
        goal: start.and_then(|start| start.goal),
        starting: queued.starting,
    }))
}
