//! Tool outcomes the interpreter makes itself, without calling a tool: a
//! template that cannot be resolved, a failed `expect`, a receipt conflict.

use serde_json::{Map, Value};

use crate::model::FailureClass;
use crate::tools::{ToolFailure, ToolOutcome};

/// A failure with no output of its own.
pub(super) fn failure(class: FailureClass, message: String) -> ToolFailure {
    ToolFailure { class, message, output_text: String::new() }
}

impl ToolOutcome {
    /// A failure with no facts for the records.
    pub(super) fn err(failure: ToolFailure) -> Self {
        ToolOutcome { result: Err(failure), details: Map::new(), stderr_text: None }
    }

    /// A failure with the facts gathered before it (for example the
    /// idempotency key and intent digest).
    pub(super) fn err_with(failure: ToolFailure, details: Map<String, Value>) -> Self {
        ToolOutcome { result: Err(failure), details, stderr_text: None }
    }
}
