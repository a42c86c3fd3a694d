//! [`Outputs`]: the step outputs later templates may read.
//!
//! Only the last completed step's output and the outputs of steps that some
//! `steps.<id>` reference names are kept (the names are computed once from
//! the plan), so memory does not grow with the number of steps run.

use std::collections::{HashMap, HashSet};

use crate::model::{InputValues, Plan, StepDetails};
use crate::runtime::RunSecrets;
use crate::store::{StepRecord, StepRecordStatus};
use crate::template::{RefTarget, RenderContext, StepOutput, StepState};

/// Outputs later templates may read.
pub(super) struct Outputs {
    run_id: String,
    /// The goal the run was started with (`{{ run.goal }}`).
    goal: Option<String>,
    /// The run's inputs (`{{ inputs.NAME }}`), as recorded.
    inputs: InputValues,
    last: Option<StepOutput>,
    named: HashMap<String, StepOutput>,
    /// Step ids that some `steps.<id>` reference names.
    referenced: HashSet<String>,
    /// The run's secret values (only step `env` templates name them).
    secrets: RunSecrets,
}

impl Outputs {
    /// A new run: nothing has run yet.
    pub(super) fn new(plan: &Plan, run_id: &str) -> Self {
        Outputs {
            run_id: run_id.to_string(),
            goal: None,
            inputs: InputValues::new(),
            last: None,
            named: HashMap::new(),
            referenced: referenced_steps(plan),
            secrets: RunSecrets::default(),
        }
    }

    /// The run's goal and inputs, as its state records them.
    pub(super) fn set_run_data(&mut self, goal: Option<String>, inputs: InputValues) {
        self.goal = goal;
        self.inputs = inputs;
    }

    /// A resumed run: the outputs of the completed steps in its history.
    pub(super) fn restored(plan: &Plan, run_id: &str, history: &[StepRecord]) -> Self {
        let mut outputs = Outputs::new(plan, run_id);
        for record in history {
            outputs.add_record(record);
        }
        outputs
    }

    /// Keeps what one history record makes readable: a completed attempt's
    /// output (a skipped step leaves none).
    pub(super) fn add_record(&mut self, record: &StepRecord) {
        let exit_code = match &record.details {
            StepDetails::Attempt { tool, .. } => tool.exit_code(),
            _ => None,
        };
        let status = match record.status {
            StepRecordStatus::Done => StepState::Done,
            StepRecordStatus::Failed => StepState::Failed,
            StepRecordStatus::Skipped => return,
        };
        let output = StepOutput {
            output_text: record.output_text.clone(),
            output_json: record.output_json.clone(),
            stderr_text: record.stderr_text.clone().unwrap_or_default(),
            status,
            exit_code,
        };
        // A failed attempt is readable by name only (a later attempt
        // of the same step replaces it); `last` stays the last step
        // that succeeded.
        match status {
            StepState::Failed => self.record_failed(&record.step_id, output),
            _ => self.record(&record.step_id, output),
        }
    }

    pub(super) fn set_secrets(&mut self, secrets: RunSecrets) {
        self.secrets = secrets;
    }

    /// Keeps a completed step's output: always as `last`, by name only when
    /// some template names the step.
    /// The value of secret `name`, when the run reads it.
    pub(super) fn secret_value(&self, name: &str) -> Option<&str> {
        self.secrets.value(name)
    }

    pub(super) fn record(&mut self, step_id: &str, output: StepOutput) {
        if self.referenced.contains(step_id) {
            self.named.insert(step_id.to_string(), output.clone());
        }
        self.last = Some(output);
    }
}

impl Outputs {
    /// Keeps a failed attempt's output, by name only: `last` is the last
    /// step that succeeded, never a failed one.
    pub(super) fn record_failed(&mut self, step_id: &str, output: StepOutput) {
        if self.referenced.contains(step_id) {
            self.named.insert(step_id.to_string(), output);
        }
    }
}

impl RenderContext for Outputs {
    fn run_id(&self) -> &str {
        &self.run_id
    }
    fn last(&self) -> Option<&StepOutput> {
        self.last.as_ref()
    }
    fn step(&self, id: &str) -> Option<&StepOutput> {
        self.named.get(id)
    }
    fn goal(&self) -> Option<&str> {
        self.goal.as_deref()
    }
    fn input(&self, name: &str) -> Option<&serde_json::Value> {
        self.inputs.get(name)
    }
    fn secret(&self, name: &str) -> Option<&str> {
        self.secrets.value(name)
    }
}

fn referenced_steps(plan: &Plan) -> HashSet<String> {
    plan.steps
        .iter()
        .flat_map(|step| step.templates())
        .flat_map(|template| template.references())
        .filter_map(|reference| match &reference.target {
            RefTarget::Step { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect()
}
