//! [`ControlError`]: why a control command did not do what was asked.

use crate::diag::{Diagnostic, SourceMap};
use crate::runtime::approval::ApprovalInvalid;
use crate::runtime::{RunError, RunFilesError};
use crate::store::StoreError;

/// Why a control command did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The records are missing, unreadable, edited or inconsistent (exit 2
    /// for bad records, 1 for a run locked by another process).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The plan or policy files the run was started with are invalid now
    /// (exit 2).
    #[error("the run's plan or policy files are invalid")]
    Files { sources: SourceMap, diagnostics: Vec<Diagnostic> },
    /// The plan or policy file the run was started with is found neither
    /// where it was nor beside the workspace; names the paths tried (exit 2).
    #[error("{0}")]
    FilesMissing(String),
    /// A start interrupted before its first checkpoint cannot be started
    /// again or recorded cancelled: its log names no plan, or the plan file
    /// is gone or invalid (exit 2). Nothing was written.
    #[error("{0}")]
    Interrupted(String),
    /// Starting an interrupted start again failed: before anything ran
    /// (exit 2) or while keeping its records (exit 1).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The request was understood and refused (exit 1): the run is not
    /// waiting, an approval does not match, the files changed.
    #[error("{0}")]
    Refused(String),
}

impl From<ApprovalInvalid> for ControlError {
    fn from(error: ApprovalInvalid) -> Self {
        ControlError::Refused(error.to_string())
    }
}

impl From<RunFilesError> for ControlError {
    fn from(error: RunFilesError) -> Self {
        match error {
            RunFilesError::Invalid { sources, diagnostics } => ControlError::Files { sources, diagnostics },
            RunFilesError::Missing(message) => ControlError::FilesMissing(message),
            RunFilesError::Changed(message) => ControlError::Refused(message),
        }
    }
}

impl ControlError {
    /// Whether the input itself was bad (exit 2) rather than refused (exit 1).
    pub fn is_bad_input(&self) -> bool {
        match self {
            ControlError::Files { .. } | ControlError::FilesMissing(_) | ControlError::Interrupted(_) => true,
            ControlError::Run(error) => error.nothing_ran(),
            ControlError::Store(error) => error.is_unusable_record(),
            ControlError::Refused(_) => false,
        }
    }
}
