//! Explain which plan a goal routes to, and why (`planrun route`).

use std::path::Path;

use crate::load::Catalog;
use crate::ops::{ExitStatus, OpsError, load_catalog};
use crate::router::{RouteDecision, Router};

/// The decision over the whole catalog, with the catalog it was made on.
#[derive(Debug)]
pub struct Routed {
    pub catalog: Catalog,
    pub decision: RouteDecision,
}

impl Routed {
    /// 0 when a plan was chosen, 2 when the goal is ambiguous or routes
    /// nowhere.
    pub fn exit_status(&self) -> ExitStatus {
        if self.decision.plan().is_some() { ExitStatus::Done } else { ExitStatus::InvalidInput }
    }
}

pub fn route(goal: &str, plans: &Path, policies: &Path) -> Result<Routed, OpsError> {
    let catalog = load_catalog(plans, policies, None)?;
    let decision = Router::new(&catalog.plans).route(goal);
    Ok(Routed { catalog, decision })
}
