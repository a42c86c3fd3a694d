//! What a tool call reports: its result ([`ToolSuccess`] or
//! [`ToolFailure`]) with the facts for the records ([`ToolOutcome`]), and
//! what an effect says about a keyed action it may already have applied
//! ([`Vouch`]).

use serde_json::Value;

use crate::model::{Decision, FailureClass, FileFacts, ToolFacts};
use crate::tools::FileError;

/// What a successful tool call produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolSuccess {
    pub output_text: String,
    pub output_json: Option<Value>,
}

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    pub class: FailureClass,
    /// Lowercase, no final period; names the path or program involved.
    pub message: String,
    /// What the tool printed before failing (a shell step's stdout, or the
    /// output an `expect` check refused), kept in the attempt's record and
    /// so that an `expect.exit_code` can accept a non-zero exit; usually
    /// empty.
    pub output_text: String,
}

/// A tool call's result plus facts for the records (resolved program,
/// matched rule, exit code, byte counts). `facts` never hold step output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub result: Result<ToolSuccess, ToolFailure>,
    pub facts: ToolFacts,
    /// The end of what a program that ran wrote to stderr (see
    /// `STDERR_TAIL_BYTES`), whether it succeeded or failed;
    /// `None` for tools that have no stderr.
    pub stderr_text: Option<String>,
}

/// What an effect itself says about a keyed action it may already have
/// applied: the answer a recovery asks for before anything else, instead of
/// trusting the runtime's own note.
#[derive(Debug, Clone, PartialEq)]
pub enum Vouch {
    /// Applied, with the result the effect kept (or, for a file, the
    /// result the write reports).
    Applied(ToolSuccess),
    /// Definitely not applied: running it now is the first time.
    NotApplied,
    /// The key was applied for another intent.
    Conflict(String),
    /// The effect cannot tell (unreadable, malformed, or changed since).
    CannotAnswer(String),
    /// The effect cannot tell, and its receiver de-duplicates by key (an
    /// `http` request's `Idempotency-Key`): send it again under the same key.
    SendAgainUnderKey,
}

impl ToolOutcome {
    pub(crate) fn success(output_text: String, output_json: Option<Value>, facts: ToolFacts) -> Self {
        ToolOutcome { result: Ok(ToolSuccess { output_text, output_json }), facts, stderr_text: None }
    }

    pub(super) fn failure(class: FailureClass, message: String, facts: ToolFacts) -> Self {
        let failure = ToolFailure { class, message, output_text: String::new() };
        ToolOutcome { result: Err(failure), facts, stderr_text: None }
    }

    pub(super) fn from_result(result: Result<ToolSuccess, ToolFailure>) -> Self {
        ToolOutcome { result, facts: ToolFacts::None, stderr_text: None }
    }

    pub(super) fn file_failure(err: FileError, mut facts: FileFacts) -> Self {
        if let FileError::Denied(denied) = &err {
            facts.decision = Some(Decision::Forbidden);
            facts.rule = Some(denied.rule.clone());
            let message = format!("{denied} (rule `{}`)", denied.rule);
            return ToolOutcome::failure(FailureClass::SecurityDenied, message, ToolFacts::File(facts));
        }
        ToolOutcome::failure(err.class(), err.to_string(), ToolFacts::File(facts))
    }
}
