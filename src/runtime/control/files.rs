//! The plan and policy files a run started with, loaded again for a
//! control command that needs the plan (`resume` to continue, `approve` to
//! check the frozen action against it).

use std::path::Path;

use crate::load::Loader;
use crate::model::{Plan, Policy};
use crate::runtime::control::error::ControlError;
use crate::store::RunState;

/// Loads the plan and policy a run started with, from the paths it
/// recorded, and refuses files whose digest changed unless allowed.
pub(super) fn load_files(state: &RunState, allow_changed: bool) -> Result<(Plan, Policy), ControlError> {
    let mut loader = Loader::new();
    let plan = loader.load_plan(Path::new(&state.plan.path));
    let policy = loader.load_policy(Path::new(&state.plan.policy_path));
    let (Some(plan), Some(policy)) = (plan, policy) else {
        let (sources, diagnostics) = (loader.sources().clone(), loader.diagnostics().to_vec());
        return Err(ControlError::Files { sources, diagnostics });
    };
    let mut changed = Vec::new();
    if plan.source.sha256 != state.plan.sha256 {
        changed.push(format!("plan `{}`", state.plan.path));
    }
    if policy.source.sha256 != state.plan.policy_sha256 {
        changed.push(format!("policy `{}`", state.plan.policy_path));
    }
    if !changed.is_empty() && !allow_changed {
        return Err(ControlError::Refused(format!(
            "{} changed since run `{}` started; resuming would run steps that were not part of it (pass `--allow-changed-files` to continue anyway)",
            changed.join(" and "),
            state.run_id
        )));
    }
    if plan.id != state.plan.id || plan.steps.len() != state.plan.step_count {
        return Err(ControlError::Refused(format!(
            "`{}` is no longer the plan `{}` with {} steps that the run started",
            state.plan.path, state.plan.id, state.plan.step_count
        )));
    }
    Ok((plan, policy))
}
