//! Failure classes: why a step attempt failed, which decides whether it is retried.

use serde::{Deserialize, Serialize};

/// Why a step attempt failed. The names are part of the record format, so runs stay
/// comparable across implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The policy refused the action (shell allowlist, file confinement).
    SecurityDenied,
    /// A `{{ … }}` reference could not be resolved. Never retried.
    TemplateError,
    /// A file tool failed for a reason other than policy (missing file, too large).
    FileError,
    /// A process exited non-zero, timed out or could not be started.
    ExecutionError,
    /// Anything else.
    UnknownError,
    /// A read tool returned a result of the wrong shape or for the wrong
    /// target; nothing may be built on it.
    InvalidToolResult,
    /// An idempotency key was reused with a different intent.
    IdempotencyConflict,
    /// A write whose outcome cannot be known; a reconciliation record says
    /// what to check. Never retried blindly.
    ToolResultUncertain,
    /// An `expect` post-condition or a plan's `[[verify]]` check failed.
    VerificationFailed,
    /// The tool's target does not exist (a ticket the ticket system does not
    /// know). Unlike `file_error` (a file may appear, a read may be cut
    /// short) the answer is definite and nothing was applied: a second
    /// attempt asks the same question and gets the same answer.
    NotFound,
}

impl FailureClass {
    /// Every class, in declaration order (used by the policy loader and docs).
    pub const ALL: [FailureClass; 10] = [
        FailureClass::SecurityDenied,
        FailureClass::TemplateError,
        FailureClass::FileError,
        FailureClass::ExecutionError,
        FailureClass::UnknownError,
        FailureClass::InvalidToolResult,
        FailureClass::IdempotencyConflict,
        FailureClass::ToolResultUncertain,
        FailureClass::VerificationFailed,
        FailureClass::NotFound,
    ];

    /// The classes whose max attempts a policy's `[retry]` table sets.
    pub const CONFIGURABLE: [FailureClass; 5] = [
        FailureClass::SecurityDenied,
        FailureClass::TemplateError,
        FailureClass::FileError,
        FailureClass::ExecutionError,
        FailureClass::UnknownError,
    ];

    /// The snake_case name used in files and records.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::SecurityDenied => "security_denied",
            FailureClass::TemplateError => "template_error",
            FailureClass::FileError => "file_error",
            FailureClass::ExecutionError => "execution_error",
            FailureClass::UnknownError => "unknown_error",
            FailureClass::InvalidToolResult => "invalid_tool_result",
            FailureClass::IdempotencyConflict => "idempotency_conflict",
            FailureClass::ToolResultUncertain => "tool_result_uncertain",
            FailureClass::VerificationFailed => "verification_failed",
            FailureClass::NotFound => "not_found",
        }
    }

    /// Parses the snake_case name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|class| class.as_str() == name)
    }

    /// Whether a failure of this class may ever be retried, whatever the policy
    /// says. Security denials and template errors are deterministic: a second
    /// attempt cannot succeed. Conflicts, uncertain writes, invalid results
    /// and failed verification need a person, not another attempt; a target
    /// that does not exist does not appear by asking again.
    pub fn is_retryable(self) -> bool {
        matches!(self, FailureClass::FileError | FailureClass::ExecutionError | FailureClass::UnknownError)
    }

    /// Whether a step with `on_failure = "continue"` may go on after a
    /// failure of this class. A security denial, an idempotency conflict and
    /// an uncertain write always end the run: each needs a person (a
    /// policy or plan to fix, a record to reconcile), never a next step.
    pub fn may_continue(self) -> bool {
        !matches!(
            self,
            FailureClass::SecurityDenied | FailureClass::IdempotencyConflict | FailureClass::ToolResultUncertain
        )
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
