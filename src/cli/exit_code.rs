//! The documented exit codes (README, "Exit codes").

use std::process::ExitCode;

use crate::model::RunStatus;

/// The run ended `done`; a command did what was asked.
pub const DONE: u8 = 0;
/// The run ended `failed` (a denied step included); `check` found warnings.
pub const RUN_FAILED: u8 = 1;
/// Invalid input: a bad plan, policy, argument or run id. Nothing ran.
pub const INVALID_INPUT: u8 = 2;
/// The run paused waiting for approval (reserved for approval gates).
pub const WAITING_APPROVAL: u8 = 3;

/// The exit code of a run that ended (or paused) with `status`; the HTTP
/// service reports the same codes for its agent runs.
pub fn for_status(status: RunStatus) -> u8 {
    match status {
        RunStatus::Done => DONE,
        RunStatus::WaitingApproval => WAITING_APPROVAL,
        RunStatus::Failed | RunStatus::Rejected | RunStatus::Cancelled | RunStatus::Running => RUN_FAILED,
    }
}

pub(crate) fn code(value: u8) -> ExitCode {
    ExitCode::from(value)
}
