//! The documented exit codes (README, "Exit codes").

use std::process::ExitCode;

/// The run ended `done`; a command did what was asked.
pub const DONE: u8 = 0;
/// The run ended `failed` (a denied step included); `check` found warnings.
pub const RUN_FAILED: u8 = 1;
/// Invalid input: a bad plan, policy, argument or run id. Nothing ran.
pub const INVALID_INPUT: u8 = 2;
/// The run paused waiting for approval (reserved for approval gates).
pub const WAITING_APPROVAL: u8 = 3;

pub(crate) fn code(value: u8) -> ExitCode {
    ExitCode::from(value)
}
