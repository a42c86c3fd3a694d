//! Why a use case did not do what was asked, and the exit status of each
//! reason.

use crate::diag::{Diagnostic, SourceMap};
use crate::load::Loader;
use crate::ops::ExitStatus;
use crate::runtime::{ControlError, RunError};
use crate::store::{RunIdError, StoreError};

/// A use case's failure. A run that ends `failed` is not an `OpsError`: it
/// is an outcome with its own exit status.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// Plan or policy files have errors; nothing ran (exit 2).
    #[error("{} error(s) in plan or policy files; nothing ran", error_count(.diagnostics))]
    InvalidFiles { sources: SourceMap, diagnostics: Vec<Diagnostic> },
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
    /// A bad run id (exit 2).
    #[error(transparent)]
    InvalidRunId(#[from] RunIdError),
    /// A run's records are missing or fail verification (exit 2).
    #[error(transparent)]
    Records(#[from] StoreError),
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

    /// The documented exit status of this failure.
    pub fn exit_status(&self) -> ExitStatus {
        match self {
            OpsError::InvalidFiles { .. }
            | OpsError::NoRoute(_)
            | OpsError::NothingToRun
            | OpsError::Usage(_)
            | OpsError::InvalidRunId(_)
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
            | OpsError::Control(ControlError::Files { sources, diagnostics }) => Some((sources, diagnostics)),
            _ => None,
        }
    }
}
