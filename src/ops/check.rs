//! Validate plan and policy files (`planrun check`): every finding of every
//! file in one pass, and the cross-file checks when the whole catalog is
//! read.

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Severity, SourceMap};
use crate::load::Loader;
use crate::ops::ExitStatus;

/// What to check.
pub struct CheckInput<'a> {
    /// Files or folders; empty means the whole catalog in `plans` and
    /// `policies` (and the service policy in `policies/service/`), with the
    /// cross-file checks (routing, policy references).
    pub paths: &'a [PathBuf],
    pub plans: &'a Path,
    pub policies: &'a Path,
}

/// A file that loaded: its id (plan) or name (policy), and its path.
#[derive(Debug, Clone)]
pub struct CheckedFile {
    pub name: String,
    pub path: String,
}

/// Every finding, in reading order, with the sources to render them.
#[derive(Debug)]
pub struct CheckOutcome {
    pub sources: SourceMap,
    pub diagnostics: Vec<Diagnostic>,
    pub plans: Vec<CheckedFile>,
    pub policies: Vec<CheckedFile>,
}

impl CheckOutcome {
    /// How many findings have `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics.iter().filter(|diagnostic| diagnostic.severity == severity).count()
    }

    /// 2 when any finding is an error, 1 when the worst is a warning, 0
    /// otherwise (notes do not count).
    pub fn exit_status(&self) -> ExitStatus {
        if self.count(Severity::Error) > 0 {
            ExitStatus::InvalidInput
        } else if self.count(Severity::Warning) > 0 {
            ExitStatus::Failed
        } else {
            ExitStatus::Done
        }
    }
}

pub fn check(input: CheckInput<'_>) -> CheckOutcome {
    let mut loader = Loader::new();
    let catalog = if input.paths.is_empty() {
        let catalog = loader.load_catalog(input.plans, input.policies);
        if let Some(path) = Loader::service_policy_file(input.policies) {
            loader.load_service_policy(&path);
        }
        catalog
    } else {
        loader.load_paths_with_policies(input.paths, Some(input.policies))
    };
    CheckOutcome {
        diagnostics: loader.sorted_diagnostics().into_iter().cloned().collect(),
        sources: loader.sources().clone(),
        plans: catalog
            .plans
            .iter()
            .map(|plan| CheckedFile { name: plan.id.clone(), path: plan.source.path.clone() })
            .collect(),
        policies: catalog
            .policies
            .values()
            .map(|policy| CheckedFile { name: policy.name.clone(), path: policy.source.path.clone() })
            .collect(),
    }
}
