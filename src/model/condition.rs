//! Conditions a plan states about its run: `when` (run or skip a step),
//! `expect` (post-conditions on a step's result), `[[verify]]` (completion
//! checks against fresh evidence), plus a step's `risk` and a plan's
//! downward budget overrides.

use regex::Regex;
use serde::{Serialize, Serializer};

/// What an action may change. Defaults by kind: `write_file` and
/// `ticket_close` write, everything else reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    Read,
    Write,
}

impl Risk {
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Read => "read",
            Risk::Write => "write",
        }
    }
}

pub use crate::model::when::{Bound, Check, Condition, ConditionTest, Evaluation, Test};

/// What a step's final failure (after its retries) does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The run ends `failed` (the default).
    #[default]
    Fail,
    /// The failure is recorded (the run's `failed_steps`) and the run goes
    /// on with the next step; later steps may read the failed step's
    /// `status`, `exit_code`, `output_text` and `stderr_text`.
    Continue,
}

impl OnFailure {
    pub fn is_fail(&self) -> bool {
        *self == OnFailure::Fail
    }
}

/// What happens when a `when` condition is false.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFalse {
    /// The step is skipped (status `skipped`) and the run goes on.
    Skip,
    /// The goal already holds: the run ends `done` with
    /// `stop_reason = "already_satisfied"` and no further step runs.
    AlreadySatisfied,
    /// The run ends `failed` with `stop_reason = "condition_failed"` and the
    /// step's rendered `message` as its error; no further step runs.
    Fail,
}

/// A step's `expect`: post-conditions on its result. A failed expectation
/// fails the attempt with `verification_failed`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Expect {
    /// For `shell`: the exit code that counts as success (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// For `shell`: the exit codes that count as success (`exit_codes`);
    /// never set together with `exit_code` (the loader refuses both).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_codes: Option<Vec<i32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_contains: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "optional_regex")]
    pub output_matches: Option<Regex>,
    /// For `http`: the response statuses that count as success (default
    /// any 2xx).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Vec<u16>>,
}

impl Expect {
    /// The exit codes that count as success, when the step names any.
    pub fn accepted_exit_codes(&self) -> Option<Vec<i32>> {
        match (&self.exit_codes, self.exit_code) {
            (Some(codes), _) => Some(codes.clone()),
            (None, Some(code)) => Some(vec![code]),
            (None, None) => None,
        }
    }
}

fn optional_regex<S: Serializer>(regex: &Option<Regex>, serializer: S) -> Result<S::Ok, S::Error> {
    match regex {
        Some(regex) => serializer.serialize_str(regex.as_str()),
        None => serializer.serialize_none(),
    }
}

/// One `[[verify]]` check: completion evidence gathered fresh after the last
/// step, never taken from a step's own claim.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VerifyCheck {
    /// A workspace file exists and (optionally) contains a text.
    File {
        path: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        contains: Option<String>,
    },
    /// A fresh `ticket_lookup` shows the ticket with this status.
    TicketStatus { ticket_id: String, equals: String },
    /// The idempotency receipt of `step` exists and matches the intent the
    /// step recorded.
    Receipt { step: String },
}

/// A plan's `[budget]`: limits that may only lower the policy's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BudgetOverride {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_consecutive_failures: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_timeout_secs: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_run_secs: Option<u64>,
}

impl BudgetOverride {
    pub fn is_empty(&self) -> bool {
        *self == BudgetOverride::default()
    }
}
