//! The one exit status every use case returns (README, "Exit codes").
//!
//! The command line turns it into the process exit code; the HTTP service
//! reports the same numbers for the agent runs it starts. No other module
//! chooses an exit number.

use std::process::ExitCode;

use crate::model::RunStatus;

/// How a use case ended, as the documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// 0: the run ended `done`; a command did what was asked.
    Done,
    /// 1: the run ended `failed`, `rejected` or `cancelled` (a denied step
    /// included); a request was refused; `check` found warnings.
    Failed,
    /// 2: invalid input (a bad plan, policy, argument, run id or record).
    /// Nothing ran.
    InvalidInput,
    /// 3: the run paused waiting for approval.
    WaitingApproval,
    /// 4: the run paused waiting for a person's answer (an agent step asked).
    WaitingInput,
}

impl ExitStatus {
    /// The exit status of a run that ended (or paused) with `status`.
    pub fn for_run(status: RunStatus) -> ExitStatus {
        match status {
            RunStatus::Done => ExitStatus::Done,
            RunStatus::WaitingApproval => ExitStatus::WaitingApproval,
            RunStatus::WaitingInput => ExitStatus::WaitingInput,
            RunStatus::Failed | RunStatus::Rejected | RunStatus::Cancelled | RunStatus::Running => ExitStatus::Failed,
        }
    }

    /// `Done` when `ok`, else `Failed`.
    pub fn from_success(ok: bool) -> ExitStatus {
        if ok { ExitStatus::Done } else { ExitStatus::Failed }
    }

    /// The documented number.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Done => 0,
            ExitStatus::Failed => 1,
            ExitStatus::InvalidInput => 2,
            ExitStatus::WaitingApproval => 3,
            ExitStatus::WaitingInput => 4,
        }
    }
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        ExitCode::from(status.code())
    }
}

impl From<ExitStatus> for i32 {
    fn from(status: ExitStatus) -> i32 {
        i32::from(status.code())
    }
}
