//! Progress reporting: the interpreter tells a [`Progress`] what happens as
//! it happens; the CLI prints it, tests and `--quiet` ignore it.

use crate::model::{Plan, Policy, Step};
use crate::store::{RunRecords, RunState, StepRecord};

/// Receives run progress. Every method has an empty default.
pub trait Progress {
    fn run_started(&mut self, _run_id: &str, _plan: &Plan, _policy: &Policy, _records: &RunRecords) {}
    /// `resume` starts again a run whose start was interrupted before its
    /// first checkpoint, from the plan file its log names.
    fn restarting(&mut self, _run_id: &str, _plan_path: &str) {}
    fn step_finished(&mut self, _index: usize, _total: usize, _step: &Step, _record: &StepRecord) {}
    /// A failed step waits `wait` before attempt `next_attempt` of `max_attempts`.
    fn retry_waiting(&mut self, _step: &Step, _next_attempt: u32, _max_attempts: u32, _wait: std::time::Duration) {}
    /// An agent step's `write_file` action wrote `path` (relative to the
    /// workspace). A planned `write_file` step is seen in its record.
    fn file_written(&mut self, _path: &str) {}
    fn run_finished(&mut self, _state: &RunState, _records: &RunRecords) {}
    /// The run stopped at an approval gate (`waiting_approval`).
    fn run_paused(&mut self, _state: &RunState, _records: &RunRecords) {}
}

/// Reports nothing.
pub struct NoProgress;

impl Progress for NoProgress {}
