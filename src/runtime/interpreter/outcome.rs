//! Tool outcomes the interpreter makes itself, without calling a tool: a
//! template that cannot be resolved, a failed `expect`, a receipt conflict;
//! and [`Attempted`], an attempt's outcome with the key it ran under.

use crate::model::{FailureClass, KeyedFacts, StepDetails, ToolFacts};
use crate::tools::{ToolFailure, ToolOutcome};

/// A failure with no output of its own.
pub(super) fn failure(class: FailureClass, message: String) -> ToolFailure {
    ToolFailure { class, message, output_text: String::new() }
}

impl ToolOutcome {
    /// A failure with no facts for the records.
    pub(super) fn err(failure: ToolFailure) -> Self {
        ToolOutcome { result: Err(failure), facts: ToolFacts::None, stderr_text: None }
    }
}

/// An attempt's outcome, and the key it ran under when the step is keyed
/// (its facts follow the tool's in the record).
pub(super) struct Attempted {
    pub(super) outcome: ToolOutcome,
    pub(super) keyed: Option<KeyedFacts>,
}

impl Attempted {
    /// The outcome of a step that is not keyed.
    pub(super) fn unkeyed(outcome: ToolOutcome) -> Self {
        Attempted { outcome, keyed: None }
    }

    /// A keyed step's failure before (or instead of) its effect.
    pub(super) fn keyed_failure(failure: ToolFailure, keyed: KeyedFacts) -> Self {
        Attempted { outcome: ToolOutcome::err(failure), keyed: Some(keyed) }
    }

    /// The step record's `details`, split from the outcome.
    pub(super) fn split(self) -> (ToolOutcome, StepDetails) {
        let Attempted { mut outcome, keyed } = self;
        let tool = std::mem::take(&mut outcome.facts);
        (outcome, StepDetails::Attempt { tool, keyed })
    }
}
