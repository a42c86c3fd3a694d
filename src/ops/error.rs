//! Why a use case did not do what was asked, and the exit status of each
//! reason.

use std::path::Path;

use crate::diag::{Diagnostic, SourceMap};
use crate::load::Loader;
use crate::model::InputError;
use crate::ops::ControlError;
use crate::ops::ExitStatus;
use crate::runtime::RunError;
use crate::store::{RunIdError, StoreError};

/// A use case's failure. A run that ends `failed` is not an `OpsError`: it
/// is an outcome with its own exit status.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// Plan or policy files have errors; nothing ran (exit 2).
    #[error("{} error(s) in plan or policy files; nothing ran", error_count(.diagnostics))]
    InvalidFiles { sources: SourceMap, diagnostics: Vec<Diagnostic> },
    /// The catalog (every plan and policy) has errors, so every goal is
    /// refused (exit 2): `summary` names the broken files and the fix.
    #[error("{summary}")]
    BrokenCatalog { sources: SourceMap, diagnostics: Vec<Diagnostic>, summary: String },
    /// The goal routes to no plan, or to two (exit 2).
    #[error("{0}")]
    NoRoute(String),
    /// Neither a plan file nor a goal was given (exit 2).
    #[error("nothing to run: give `--plan FILE` or `--goal TEXT`, or a command (see `planrun --help`)")]
    NothingToRun,
    /// A run could not start (exit 2) or lost its records mid-run (exit 1).
    #[error(transparent)]
    Run(#[from] RunError),
    /// `resume`, `approve`, `reject` or `cancel` was refused or given bad
    /// input.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A bad argument (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The plan's inputs were refused: unknown, missing, or a value that
    /// does not fit (exit 2; nothing ran).
    #[error(transparent)]
    Inputs(#[from] InputError),
    /// A bad run id (exit 2).
    #[error(transparent)]
    InvalidRunId(#[from] RunIdError),
    /// A run's records are missing or fail verification (exit 2).
    #[error(transparent)]
    Records(#[from] StoreError),
    /// The store named by `--store` cannot be used: a malformed location,
    /// an unreachable database, an unusable schema (exit 2; nothing was
    /// written).
    #[error("{0}")]
    StoreUnavailable(String),
}

fn error_count(diagnostics: &[Diagnostic]) -> usize {
    diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count()
}

impl OpsError {
    /// The loader's findings as an error: every diagnostic, in reading order.
    pub fn invalid_files(loader: &Loader) -> OpsError {
        OpsError::InvalidFiles {
            sources: loader.sources().clone(),
            diagnostics: loader.sorted_diagnostics().into_iter().cloned().collect(),
        }
    }

    /// The loader's findings over the whole catalog as an error that names
    /// each broken file (a plan when it is in `plans`, else a policy) and how
    /// to see its errors. A goal the broken file has nothing to do with is
    /// refused too, and the message says why.
    pub fn broken_catalog(loader: &Loader, plans: &Path) -> OpsError {
        let sources = loader.sources();
        let diagnostics: Vec<Diagnostic> = loader.sorted_diagnostics().into_iter().cloned().collect();
        // Files in reading order, each with its error count.
        let mut files: Vec<(String, usize)> = Vec::new();
        let mut elsewhere = 0;
        for diagnostic in diagnostics.iter().filter(|diagnostic| diagnostic.is_error()) {
            match diagnostic.span.and_then(|span| sources.get(span.source)) {
                Some(file) => match files.iter_mut().find(|(name, _)| *name == file.name) {
                    Some((_, count)) => *count += 1,
                    None => files.push((file.name.clone(), 1)),
                },
                None => elsewhere += 1,
            }
        }
        // Source names are display paths (relative to the current folder),
        // so compare canonical paths: `--plans .` and `--plans ./plans/` work.
        let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let plans_dir = canonical(plans);
        let kind = |name: &str| if canonical(Path::new(name)).starts_with(&plans_dir) { "plan" } else { "policy" };
        let refused = "every goal is refused until";
        let why = "because a broken plan or policy could change which plan a goal routes to";
        let summary = match (files.as_slice(), elsewhere) {
            ([(name, count)], 0) => format!(
                "{} `{name}` has {count} error(s) (run `planrun check {name}`); {refused} it is fixed, {why}",
                kind(name)
            ),
            ([], _) => format!("the catalog has {elsewhere} error(s) (run `planrun check`); {refused} it is fixed"),
            _ => {
                let mut named: Vec<String> =
                    files.iter().map(|(name, count)| format!("{} `{name}` ({count})", kind(name))).collect();
                if elsewhere > 0 {
                    named.push(format!("the catalog ({elsewhere})"));
                }
                format!("errors in {} (run `planrun check`); {refused} they are fixed, {why}", named.join(", "))
            }
        };
        OpsError::BrokenCatalog { sources: sources.clone(), diagnostics, summary }
    }

    /// The documented exit status of this failure.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            OpsError::InvalidFiles { .. }
            | OpsError::BrokenCatalog { .. }
            | OpsError::NoRoute(_)
            | OpsError::NothingToRun
            | OpsError::Usage(_)
            | OpsError::Inputs(_)
            | OpsError::InvalidRunId(_)
            | OpsError::StoreUnavailable(_)
            | OpsError::Records(_) => ExitStatus::InvalidInput,
            OpsError::Run(error) if error.nothing_ran() => ExitStatus::InvalidInput,
            OpsError::Run(_) => ExitStatus::Failed,
            OpsError::Control(error) if error.is_bad_input() => ExitStatus::InvalidInput,
            OpsError::Control(_) => ExitStatus::Failed,
        }
    }

    /// The file findings behind this error, to render before its message.
    pub fn findings(&self) -> Option<(&SourceMap, &[Diagnostic])> {
        match self {
            OpsError::InvalidFiles { sources, diagnostics }
            | OpsError::BrokenCatalog { sources, diagnostics, .. }
            | OpsError::Control(ControlError::Files { sources, diagnostics }) => Some((sources, diagnostics)),
            _ => None,
        }
    }
}
