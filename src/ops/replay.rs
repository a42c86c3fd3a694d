//! `planrun replay <run_id>`: a recorded run — its planned steps and agent
//! turns — decided again under today's (or the given) plans and policies,
//! against its recorded step results and model answers, executing nothing:
//! what would now be denied, need approval, render differently, route to
//! another plan. The decisions are the runtime's own
//! ([`crate::runtime::interpreter::replay_steps`]).

use std::path::Path;

use serde::Serialize;

use crate::confine::Workspace;
use crate::model::{Plan, Policy};
use crate::ops::{ExitStatus, OpsError, load_catalog, load_plan_file};
use crate::router::Router;
use crate::runtime::interpreter::{StepReplay, replay_steps};
use crate::runtime::{RuntimeEnv, read_checked};
use crate::store::RunId;

/// What `replay` is asked.
#[derive(Debug, Clone, Copy)]
pub struct ReplayInput<'a> {
    /// The workspace whose store holds the run (and whose folders paths
    /// are judged against).
    pub workspace: &'a Path,
    pub run_id: &'a RunId,
    /// Today's plans and policies (or the ones to try).
    pub plans: &'a Path,
    pub policies: &'a Path,
}

/// How the run's goal routes today.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteReplay {
    /// The plan the goal routes to today; `null` when it routes nowhere
    /// (ambiguous, or no plan matches).
    pub plan: Option<String>,
    /// Whether that is another plan than the one the run ran.
    pub elsewhere: bool,
    /// The router's explanation.
    pub why: String,
}

/// What `replay` found: every recorded step and agent turn, decided again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    pub run_id: String,
    /// The plan the run ran (replayed against today's plan of this id).
    pub plan: String,
    /// The policy today's plan names.
    pub policy: String,
    /// The run's goal; `null` for a run started with `--plan`.
    pub goal: Option<String>,
    /// How the goal routes today; `null` for a run without a goal.
    pub route: Option<RouteReplay>,
    /// One per planned step, one per agent turn, in the order the run
    /// recorded them, then the steps today's plan adds.
    pub steps: Vec<StepReplay>,
    /// How many entries of `steps` differ.
    pub changed: usize,
}

impl ReplayReport {
    /// Whether anything would now differ (a step or turn, or the route).
    pub fn differs(&self) -> bool {
        self.changed > 0 || self.route.as_ref().is_some_and(|route| route.elsewhere)
    }

    /// 0 nothing differs, 1 something does.
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::from_success(!self.differs())
    }
}

/// Replays run `run_id`. An unknown run, a run whose records fail
/// verification, plans or policies that do not load, or a plan id today's
/// plans lack is an [`OpsError`] (exit 2).
pub fn replay(input: ReplayInput<'_>, env: &RuntimeEnv) -> Result<ReplayReport, OpsError> {
    let store = env.store(input.workspace);
    let run_id = crate::ops::show::resolve(store.as_ref(), input.run_id.as_str(), input.workspace)?;
    let (run, _) = read_checked(store.as_ref(), &run_id, input.workspace)?;
    let recorded = run.state.plan.id.clone();
    let (plan, policy, route) = match &run.state.goal {
        Some(goal) => today_by_goal(input, &recorded, goal)?,
        None => {
            let (plan, policy) = today_by_file(input, &run.state.plan.path)?;
            (plan, policy, None)
        }
    };
    if plan.id != recorded {
        return Err(OpsError::Usage(format!(
            "no plan `{recorded}` (the plan run `{run_id}` ran) in `{}`: `{}` is plan `{}`",
            input.plans.display(),
            plan.source.path,
            plan.id
        )));
    }
    let workspace = Workspace::open(input.workspace, &policy.files)
        .map_err(|error| OpsError::Usage(format!("cannot open workspace `{}`: {error}", input.workspace.display())))?;
    let steps = replay_steps(&plan, &policy, &workspace, &run);
    let changed = steps.iter().filter(|step| !step.differences.is_empty()).count();
    Ok(ReplayReport {
        run_id: run.state.run_id.clone(),
        plan: plan.id,
        policy: policy.name,
        goal: run.state.goal.clone(),
        route,
        steps,
        changed,
    })
}

/// A run started with a goal: today's catalog (every plan and policy, as
/// routing needs them), the plan of the recorded id with its policy, and
/// where the goal routes today.
fn today_by_goal(
    input: ReplayInput<'_>,
    recorded: &str,
    goal: &str,
) -> Result<(Plan, Policy, Option<RouteReplay>), OpsError> {
    let mut catalog = load_catalog(input.plans, input.policies, Some(input.workspace))?;
    let decision = Router::new(&catalog.plans).route(goal);
    let routed = decision.plan().map(|index| catalog.plans[index].id.clone());
    let route =
        RouteReplay { elsewhere: routed.as_deref() != Some(recorded), plan: routed, why: decision.explanation() };
    let index = catalog.plans.iter().position(|plan| plan.id == recorded).ok_or_else(|| {
        OpsError::Usage(format!("no plan `{recorded}` (the plan the run ran) in `{}`", input.plans.display()))
    })?;
    let plan = catalog.plans.swap_remove(index);
    let policy = catalog.policies.remove(&plan.policy).ok_or_else(|| {
        OpsError::Usage(format!("plan `{}` names policy `{}`, which was not loaded", plan.id, plan.policy))
    })?;
    Ok((plan, policy, Some(route)))
}

/// A run started with `--plan FILE`: the file of the same name in the
/// given plans folder, with the policy it names today.
fn today_by_file(input: ReplayInput<'_>, recorded_path: &str) -> Result<(Plan, Policy), OpsError> {
    let name = Path::new(recorded_path).file_name().unwrap_or_default();
    let file = input.plans.join(name);
    if !file.is_file() {
        return Err(OpsError::Usage(format!(
            "no plan file `{}` (the run ran `{recorded_path}`) in `{}`",
            name.to_string_lossy(),
            input.plans.display()
        )));
    }
    load_plan_file(&file, input.policies, input.workspace)
}
