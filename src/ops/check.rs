//! Validate plan and policy files (`planrun check`): every finding of every
//! file in one pass, and the cross-file checks: over the whole catalog when
//! no paths are given, else between the given plans and the rest of the
//! catalog (what routing will see once the files are in place).
//! Each plan's scenario file (`<plan>.scenarios.toml` beside it) is
//! validated too; a plan without one gets the note `no-scenario`, since
//! nothing pins its behaviour (`planrun test`).

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, Severity, SourceMap};
use crate::load::{CheckedFile, FileKind, Loader, is_scenario_file, scenario_files_for};
use crate::ops::ExitStatus;

/// What to check.
pub struct CheckInput<'a> {
    /// Files or folders; empty means the whole catalog in `plans` and
    /// `policies` (and the service policy in `policies/service/`), with the
    /// cross-file checks (routing, policy references). Given plans are also
    /// checked against the other plans in `plans` (routing clashes).
    pub paths: &'a [PathBuf],
    pub plans: &'a Path,
    pub policies: &'a Path,
    /// The workspace runs will act in: a policy whose `shell.search_path`
    /// reaches into it is an error (`search-path-in-workspace`).
    pub workspace: &'a Path,
}

/// Every finding, in reading order, with the sources to render them.
#[derive(Debug)]
pub struct CheckOutcome {
    pub sources: SourceMap,
    pub diagnostics: Vec<Diagnostic>,
    /// Every file checked, in reading order, those with errors included:
    /// plans, policies, the service policy, scenario files, and given files
    /// that could not be read as any of them.
    pub files: Vec<CheckedFile>,
}

impl CheckOutcome {
    /// How many findings have `severity`.
    pub fn count(&self, severity: Severity) -> usize {
        self.diagnostics.iter().filter(|diagnostic| diagnostic.severity == severity).count()
    }

    /// The files checked of `kind`.
    pub fn files_of(&self, kind: FileKind) -> impl Iterator<Item = &CheckedFile> {
        self.files.iter().filter(move |file| file.kind == kind)
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
    let mut loader = Loader::new().in_workspace(input.workspace);
    let (scenario_paths, paths): (Vec<PathBuf>, Vec<PathBuf>) =
        input.paths.iter().cloned().partition(|path| is_scenario_file(path));
    let catalog = if input.paths.is_empty() {
        let catalog = loader.load_catalog(input.plans, input.policies);
        if let Some(path) = Loader::service_policy_file(input.policies) {
            loader.load_service_policy(&path);
        }
        catalog
    } else {
        loader.load_paths_in_catalog(&paths, input.plans, input.policies)
    };
    let mut scenario_files = scenario_paths;
    let mut missing = Vec::new();
    for plan in &catalog.plans {
        let beside = scenario_files_for(Path::new(&plan.source.path));
        match beside.iter().find(|path| path.is_file()) {
            Some(found) if !scenario_files.contains(found) => scenario_files.push(found.clone()),
            Some(_) => {}
            None => missing.push(no_scenario(&plan.id, &beside[0])),
        }
    }
    for path in &scenario_files {
        loader.load_scenarios(path);
    }
    let mut diagnostics: Vec<Diagnostic> = loader.sorted_diagnostics().into_iter().cloned().collect();
    diagnostics.extend(missing);
    CheckOutcome { diagnostics, sources: loader.sources().clone(), files: loader.checked_files().to_vec() }
}

/// The note for a plan with no scenario file beside it.
fn no_scenario(plan: &str, expected: &Path) -> Diagnostic {
    Diagnostic::note("no-scenario", format!("plan `{plan}` has no scenario: `planrun test` does not pin its behaviour"))
        .with_help(format!(
            "declare one in `{}` (docs/authoring-and-review.md), then run `planrun test --review`",
            expected.display()
        ))
}
