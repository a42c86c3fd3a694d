//! Loading what a use case runs from: the whole catalog (`--goal`, the
//! service) or one plan file with the policy it names (`--plan`).

use std::path::Path;

use crate::load::{Catalog, Loader};
use crate::model::{Plan, Policy};
use crate::ops::OpsError;

/// Loads and validates every plan and policy; any error refuses the whole
/// catalog (a broken plan could otherwise change which plan a goal routes
/// to).
pub fn load_catalog(plans: &Path, policies: &Path) -> Result<Catalog, OpsError> {
    let mut loader = Loader::new();
    let catalog = loader.load_catalog(plans, policies);
    if loader.has_errors() {
        return Err(OpsError::invalid_files(&loader));
    }
    Ok(catalog)
}

/// Loads one plan file and the policy it names from `policies`.
pub fn load_plan_file(plan: &Path, policies: &Path) -> Result<(Plan, Policy), OpsError> {
    let mut loader = Loader::new();
    match loader.load_plan_with_policy(plan, policies) {
        Some(loaded) if !loader.has_errors() => Ok(loaded),
        _ => Err(OpsError::invalid_files(&loader)),
    }
}
