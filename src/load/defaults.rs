//! The default of every key of plan and policy files that a file may leave
//! out, where the validators apply it: read by them and shown in each key's
//! description by `keys.rs` (and so in `planrun schema`), written once here.
//! The service policy's and scenarios' defaults are the model's
//! ([`crate::model::ServicePolicy::default`], [`crate::model::DEFAULT_CLOCK`]).

use crate::model::{Budget, Decision, FailureClass};

/// Default `shell.search_path`.
pub const DEFAULT_SEARCH_PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];
/// Default `files.deny`.
pub const DEFAULT_FILES_DENY: &[&str] = &["runs/**"];
/// Default `files.max_read_bytes`, `files.max_write_bytes` and
/// `budget.max_output_bytes`.
pub(crate) const DEFAULT_MAX_BYTES: u64 = 1_048_576;
/// Default `decision` of a `[[shell.allow]]` rule.
pub(crate) const DEFAULT_DECISION: Decision = Decision::Allow;
/// Default `id` of the `[[shell.allow]]` rule at `index` (`shell.allow[0]`).
pub(crate) fn default_rule_id(index: &str) -> String {
    format!("shell.allow[{index}]")
}

/// Default `retry.cap`.
pub(crate) const DEFAULT_RETRY_CAP: u64 = 2;
/// The `[budget]` of a policy that leaves it (or a key of it) out: no
/// whole-run deadline.
pub(crate) const DEFAULT_BUDGET: Budget = Budget {
    max_steps: 32,
    max_tool_calls: 32,
    max_consecutive_failures: 3,
    step_timeout_secs: 30,
    max_output_bytes: DEFAULT_MAX_BYTES,
    max_run_secs: None,
};

/// Default `retry.<class>`: the attempts a step that failed with `class` gets.
pub(crate) const fn default_attempts(class: FailureClass) -> u32 {
    match class {
        FailureClass::FileError | FailureClass::ExecutionError => 2,
        _ => 1,
    }
}

/// Default `failures` of a `flaky` step.
pub(crate) const DEFAULT_FLAKY_FAILURES: u32 = 1;
/// Default `output` of a `flaky` step.
pub(crate) const DEFAULT_FLAKY_OUTPUT: &str = "ok";
