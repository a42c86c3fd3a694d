//! Tools: what actually touches the world. The interpreter hands a tool a
//! fully resolved action (templates already rendered); the tool asks the
//! policy, then acts, and reports a [`ToolOutcome`].
//!
//! Adding a step kind: add a variant to `model::Action` and to
//! [`ResolvedAction`], validate its keys in `spec`, and implement it here.

mod files;
mod shell;
mod workspace;

use std::time::Duration;

use serde_json::{Map, Value};

use crate::model::{FailureClass, Policy};

pub use files::{read_file, write_file};
pub use shell::{ProgramResolver, run_shell};
pub use workspace::{PathDenied, Workspace};

/// An action with every template rendered: exactly what will run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ResolvedAction {
    Shell { argv: Vec<String> },
    WriteFile { path: String, content: String },
    ReadFile { path: String },
    Finish { message: Option<String> },
    Flaky { failures: u32, output: String },
}

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
}

/// A tool call's result plus facts for the records (resolved program,
/// matched rule, exit code, byte counts). `details` never holds step output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub result: Result<ToolSuccess, ToolFailure>,
    pub details: Map<String, Value>,
}

/// Per-run tool state: the workspace handle, the policy and the cache of
/// resolved programs (each program is resolved once per run).
pub struct Tools<'a> {
    pub workspace: &'a Workspace,
    pub policy: &'a Policy,
    pub resolver: ProgramResolver,
}

impl<'a> Tools<'a> {
    pub fn new(workspace: &'a Workspace, policy: &'a Policy) -> Self {
        Tools {
            workspace,
            policy,
            resolver: ProgramResolver::new(&policy.shell),
        }
    }

    /// Runs one attempt of an action. `attempt` is 1-based.
    pub fn execute(
        &mut self,
        action: &ResolvedAction,
        attempt: u32,
        timeout: Duration,
    ) -> ToolOutcome {
        let _ = (action, attempt, timeout);
        unimplemented!("tools are implemented in a later commit")
    }
}
