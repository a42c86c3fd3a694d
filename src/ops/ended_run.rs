//! The outcome of a person ending a run (`reject`, `cancel`).

use crate::ops::ExitStatus;
use crate::store::RunState;

/// A run ended on a person's word; the command did what was asked.
#[derive(Debug)]
pub struct EndedRun {
    pub state: RunState,
}

impl EndedRun {
    pub fn exit_status(&self) -> ExitStatus {
        ExitStatus::Done
    }
}
