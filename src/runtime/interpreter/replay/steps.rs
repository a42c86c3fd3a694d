//! The walk over a recorded run: each step's records in order (the
//! outputs later templates read grow as they did when it ran), a step
//! paused for approval, an agent step in progress, then the steps today's
//! plan adds.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::confine::{ProgramResolver, Workspace};
use crate::model::{Action, Decision, FailureClass, Plan, Policy, Step};
use crate::store::{AuditEvent, LoadedRun, StepRecord, StepRecordStatus};
use crate::tools::action_verdict;

use super::super::gate::approval_required_by;
use super::super::outputs::Outputs;
use super::super::render::render_action;
use super::turns::{details, replay_turns};
use super::{Decided, Difference, FieldChange, StepReplay};
use crate::runtime::event::ApprovalRequested;

/// What a replay reads and decides with.
pub(super) struct Replayer<'a> {
    pub(super) plan: &'a Plan,
    pub(super) policy: &'a Policy,
    pub(super) workspace: &'a Workspace,
    pub(super) resolver: ProgramResolver,
    outputs: Outputs,
}

/// Every step and agent turn of `run`, decided again under `plan` and
/// `policy` (today's) in `workspace`, in the order the run recorded them,
/// then the steps `plan` adds. Executes nothing.
pub fn replay_steps(plan: &Plan, policy: &Policy, workspace: &Workspace, run: &LoadedRun) -> Vec<StepReplay> {
    let mut outputs = Outputs::new(plan, &run.state.run_id);
    outputs.set_run_data(run.state.goal.clone(), run.state.inputs.clone());
    let resolver = ProgramResolver::new(&policy.shell).outside(workspace.root());
    let mut replayer = Replayer { plan, policy, workspace, resolver, outputs };
    let approvals = planned_approvals(&run.audit);
    let mut replays = Vec::new();
    let mut agents_done = BTreeSet::new();
    for group in run.history.chunk_by(|a, b| a.step_id == b.step_id) {
        let first = &group[0];
        if first.kind == "agent" && agents_done.insert(first.step_id.clone()) {
            replays.extend(replayer.agent_step(&first.step_id, run));
        } else if first.kind != "agent" {
            replays.push(replayer.planned(group, approvals.get(first.step_id.as_str()).map(String::as_str)));
        }
        for record in group {
            replayer.outputs.add_record(record);
        }
    }
    if let Some(pending) = run.state.pending_action.as_ref().filter(|_| run.state.agent.is_none()) {
        let old = Decided::Approval { required_by: pending.required_by.clone(), rule: None };
        replays.push(replayer.compare(&pending.step_id, &pending.kind, old, Some(&pending.action)));
    }
    if let Some(agent) = run.state.agent.as_ref().filter(|agent| agents_done.insert(agent.step_id.clone())) {
        replays.extend(replayer.agent_step(&agent.step_id, run));
    }
    replays.extend(replayer.new_steps(&run.plan));
    replays
}

/// The steps that waited for a person's approval, and who required it.
fn planned_approvals(audit: &[AuditEvent]) -> HashMap<&str, String> {
    audit
        .iter()
        .filter(|event| event.event_type == "approval_requested")
        .filter_map(|event| Some((event.step_id.as_deref()?, details::<ApprovalRequested>(event)?.required_by)))
        .collect()
}

impl Replayer<'_> {
    /// A planned step's records (its attempts) against today's step.
    fn planned(&mut self, group: &[StepRecord], approval: Option<&str>) -> StepReplay {
        let last = &group[group.len() - 1];
        let old = recorded_decision(last, approval);
        let action = group.iter().find_map(|record| record.action.as_ref());
        self.compare(&last.step_id, &last.kind, old, action)
    }

    /// A recorded decision (and the action it judged, if one was resolved)
    /// against today's decision on the same step.
    fn compare(&mut self, step_id: &str, kind: &str, old: Decided, recorded: Option<&Value>) -> StepReplay {
        let Some(step) = self.plan.steps.iter().find(|step| step.id == step_id) else {
            return StepReplay::new(step_id, kind, None, old, Decided::Absent);
        };
        if step.action.kind() != kind {
            let mut replay = StepReplay::new(step_id, kind, None, old.clone(), old);
            let change = (kind.to_string(), step.action.kind().to_string());
            replay.differences.push(Difference::DecisionChanged { old: change.0, new: change.1 });
            return replay;
        }
        let (new, rendered) = self.decide(step);
        let mut replay = StepReplay::new(step_id, kind, None, old, new);
        if let (Some(recorded), Some(rendered)) = (recorded, rendered) {
            let fields = changed_fields(recorded, &rendered);
            if !fields.is_empty() {
                replay.differences.push(Difference::RenderedDifferently { fields });
            }
        }
        replay
    }

    /// Today's decision on a planned step, from the outputs recorded
    /// before it, and its rendered action (as the records keep one).
    fn decide(&mut self, step: &Step) -> (Decided, Option<Value>) {
        if let Some(condition) = &step.when {
            match condition.evaluate(&self.outputs) {
                Ok(evaluation) if !evaluation.holds => return (Decided::Skip, None),
                Ok(_) => {}
                Err(reason) => return (Decided::Unresolved { reason }, None),
            }
        }
        let action = match render_action(step, &self.outputs) {
            Ok(action) => action,
            Err(failure) => return (Decided::Unresolved { reason: failure.message }, None),
        };
        let verdict = action_verdict(self.policy, self.workspace, &mut self.resolver, &action);
        let decided = match (verdict.decision, approval_required_by(step, verdict.decision)) {
            (Decision::Forbidden, _) => {
                Decided::Deny { rule: verdict.rule.unwrap_or_else(|| "policy".to_string()), reason: verdict.reason }
            }
            (_, Some(required_by)) => Decided::Approval { required_by: required_by.to_string(), rule: verdict.rule },
            (_, None) => Decided::Allow { rule: verdict.rule },
        };
        (decided, serde_json::to_value(&action).ok())
    }

    /// The steps of today's plan that the recorded plan does not have,
    /// decided on the outputs the whole run recorded.
    fn new_steps(&mut self, recorded_plan: &Value) -> Vec<StepReplay> {
        let recorded: BTreeSet<&str> = recorded_plan["steps"]
            .as_array()
            .map(|steps| steps.iter().filter_map(|step| step["id"].as_str()).collect())
            .unwrap_or_default();
        let plan = self.plan;
        plan.steps
            .iter()
            .filter(|step| !recorded.contains(step.id.as_str()))
            .map(|step| {
                let new = match step.action {
                    // Its turns are decided as the model answers them.
                    Action::Agent(_) => Decided::Allow { rule: None },
                    _ => self.decide(step).0,
                };
                StepReplay::new(&step.id, step.action.kind(), None, Decided::Absent, new)
            })
            .collect()
    }

    /// An agent step: one replay per recorded turn, or the step's own when
    /// today's plan no longer has it as an agent step.
    fn agent_step(&mut self, step_id: &str, run: &LoadedRun) -> Vec<StepReplay> {
        let plan = self.plan;
        let today = plan.steps.iter().find(|step| step.id == step_id);
        match today.map(|step| (step, &step.action)) {
            Some((step, Action::Agent(spec))) => replay_turns(self, step, spec, run),
            _ => {
                let old = Decided::Allow { rule: None };
                vec![self.compare(step_id, "agent", old, None)]
            }
        }
    }
}

/// What a step's last record says was decided (`approval`: who required
/// a person's approval, when the step waited for one).
fn recorded_decision(record: &StepRecord, approval: Option<&str>) -> Decided {
    let rule = record.details.rule().map(str::to_string);
    match (record.status, record.failure_class) {
        (StepRecordStatus::Skipped, _) => Decided::Skip,
        (_, Some(FailureClass::SecurityDenied)) => Decided::Deny {
            rule: rule.unwrap_or_else(|| "policy".to_string()),
            reason: record.error.clone().unwrap_or_default(),
        },
        (_, Some(FailureClass::TemplateError)) if record.action.is_none() => {
            Decided::Unresolved { reason: record.error.clone().unwrap_or_default() }
        }
        _ => match approval {
            Some(required_by) => Decided::Approval { required_by: required_by.to_string(), rule },
            None => Decided::Allow { rule },
        },
    }
}

/// The fields of two rendered actions (JSON objects) that differ.
fn changed_fields(recorded: &Value, rendered: &Value) -> Vec<FieldChange> {
    let empty = serde_json::Map::new();
    let old = recorded.as_object().unwrap_or(&empty);
    let new = rendered.as_object().unwrap_or(&empty);
    let names: BTreeMap<&String, ()> = old.keys().chain(new.keys()).map(|name| (name, ())).collect();
    names
        .into_keys()
        .filter(|name| old.get(*name) != new.get(*name))
        .map(|name| FieldChange {
            field: name.clone(),
            old: old.get(name).cloned().unwrap_or(Value::Null),
            new: new.get(name).cloned().unwrap_or(Value::Null),
        })
        .collect()
}
