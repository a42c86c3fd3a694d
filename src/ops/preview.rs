//! Preview what a run would do (`planrun plan`): load, route, then compute
//! the preview from the plan and policy alone, executing and creating
//! nothing.

use std::path::Path;

use crate::diag::to_json;
use crate::load::Loader;
use crate::ops::OpsError;
use crate::preview::Preview;
use crate::router::Router;

/// What to preview.
pub enum PreviewTarget<'a> {
    /// One plan file and the folder of policies it may name.
    PlanFile { plan: &'a Path, policies: &'a Path },
    /// The plan a goal routes to over the catalog in `plans` and `policies`.
    Goal { goal: &'a str, plans: &'a Path, policies: &'a Path },
}

/// The preview of the target, with the plan file's own warnings. Showing a
/// preview is a command that did what was asked (exit 0), whatever it
/// predicts.
pub fn preview(target: PreviewTarget<'_>) -> Result<Preview, OpsError> {
    let mut loader = Loader::new();
    let invalid = |loader: &Loader| OpsError::invalid_files(loader);
    let (plan, policy, route) = match target {
        PreviewTarget::PlanFile { plan, policies } => match loader.load_plan_with_policy(plan, policies) {
            Some((plan, policy)) if !loader.has_errors() => (plan, policy, None),
            _ => return Err(invalid(&loader)),
        },
        PreviewTarget::Goal { goal, plans, policies } => {
            let mut catalog = loader.load_catalog(plans, policies);
            if loader.has_errors() {
                return Err(invalid(&loader));
            }
            let decision = Router::new(&catalog.plans).route(goal);
            let Some(index) = decision.plan() else {
                return Err(OpsError::NoRoute(decision.explanation()));
            };
            let plan = catalog.plans.swap_remove(index);
            let Some(policy) = catalog.policies.remove(&plan.policy) else {
                return Err(OpsError::NoRoute(format!(
                    "plan `{}` names policy `{}`, which was not loaded",
                    plan.id, plan.policy
                )));
            };
            (plan, policy, Some(decision))
        }
    };
    let mut preview = Preview::new(&plan, &policy, route);
    let prefix = format!("{}:", plan.source.path);
    preview.findings = loader
        .sorted_diagnostics()
        .into_iter()
        .filter(|diagnostic| diagnostic.span.is_some_and(|span| loader.sources().location(span).starts_with(&prefix)))
        .map(|diagnostic| to_json(loader.sources(), diagnostic))
        .collect();
    Ok(preview)
}
