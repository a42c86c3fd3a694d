//! Loading what a use case runs from: the whole catalog (`--goal`, the
//! service) or one plan file with the policy it names (`--plan`).

use std::path::Path;

use crate::load::{Catalog, Loader};
use crate::model::{Plan, Policy};
use crate::ops::OpsError;

/// Loads and validates every plan and policy; any error refuses the whole
/// catalog (a broken plan could otherwise change which plan a goal routes
/// to), with an error that names the broken files. With the `workspace`
/// runs will act in, a policy whose search path reaches into it is an error.
pub fn load_catalog(plans: &Path, policies: &Path, workspace: Option<&Path>) -> Result<Catalog, OpsError> {
    let mut loader = loader_for(workspace);
    load_catalog_with(&mut loader, plans, policies)
}

/// A loader that judges policies against `workspace` when it is known.
fn loader_for(workspace: Option<&Path>) -> Loader {
    match workspace {
        Some(workspace) => Loader::new().in_workspace(workspace),
        None => Loader::new(),
    }
}

/// [`load_catalog`] into `loader`, which keeps every finding (warnings
/// too) for the caller.
pub(crate) fn load_catalog_with(loader: &mut Loader, plans: &Path, policies: &Path) -> Result<Catalog, OpsError> {
    let catalog = loader.load_catalog(plans, policies);
    if loader.has_errors() {
        return Err(OpsError::broken_catalog(loader, plans));
    }
    Ok(catalog)
}

/// Loads one plan file and the policy it names from `policies`, the policy
/// judged against the `workspace` the run will act in.
pub fn load_plan_file(plan: &Path, policies: &Path, workspace: &Path) -> Result<(Plan, Policy), OpsError> {
    load_plan_file_with(plan, policies, workspace).map(|(_, files)| files)
}

/// [`load_plan_file`], with the loader that read the files (it holds
/// their texts).
pub(crate) fn load_plan_file_with(
    plan: &Path,
    policies: &Path,
    workspace: &Path,
) -> Result<(Loader, (Plan, Policy)), OpsError> {
    let mut loader = Loader::new().in_workspace(workspace);
    match loader.load_plan_with_policy(plan, policies) {
        Some(loaded) if !loader.has_errors() => Ok((loader, loaded)),
        _ => Err(OpsError::invalid_files(&loader)),
    }
}
