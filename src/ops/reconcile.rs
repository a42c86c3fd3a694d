//! Settle a `tool_result_uncertain` run: a person says whether the write
//! was applied; the run is `running` again and `resume` continues it.

use std::path::Path;

use crate::ops::{ExitStatus, OpsError};
use crate::runtime::RuntimeEnv;
use crate::store::RunState;

/// What `reconcile` was told.
pub struct ReconcileInput<'a> {
    pub workspace: &'a Path,
    pub run_id: &'a str,
    /// The person's word: was the uncertain write applied?
    pub applied: bool,
    pub settled_by: Option<String>,
}

/// The settled run, `running` again, waiting for `resume`.
#[derive(Debug)]
pub struct Reconciled {
    pub state: RunState,
    pub applied: bool,
}

impl Reconciled {
    /// The command did what was asked.
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::Done
    }
}

pub fn reconcile(input: ReconcileInput<'_>, env: &RuntimeEnv) -> Result<Reconciled, OpsError> {
    let state = crate::runtime::reconcile(input.workspace, input.run_id, input.applied, input.settled_by, env)?;
    Ok(Reconciled { state, applied: input.applied })
}
