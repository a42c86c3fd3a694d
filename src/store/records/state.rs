//! `state.json`: the compact checkpoint, inside an integrity envelope.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{EvidenceDetail, EvidenceKind, RunStatus, StopReason};

/// The checkpoint written after every step. Its size does not depend on how
/// many steps have run: the plan is referenced (and stored once in
/// `plan.json`), the history lives in `history.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunState {
    pub run_id: String,
    /// The goal text that routed to the plan; `null` for `--plan` runs.
    pub goal: Option<String>,
    /// The plan's inputs as the run was given them (defaults applied);
    /// absent when the plan declares none.
    #[serde(default, skip_serializing_if = "crate::model::InputValues::is_empty")]
    pub inputs: crate::model::InputValues,
    pub plan: PlanRef,
    pub status: RunStatus,
    /// Why the run stopped: `finish_step`, `end_of_plan`, `step_failed`,
    /// `budget_exhausted`, `already_satisfied`, `verification_failed`,
    /// `tool_result_uncertain`, `rejected`; `null` while running or waiting.
    pub stop_reason: Option<StopReason>,
    /// The step being executed (or last executed while the run goes on);
    /// `null` once the run has ended.
    pub current_step_id: Option<String>,
    pub cursor: Cursor,
    pub counters: Counters,
    /// The message of the failure that ended the run, if any.
    pub error: Option<String>,
    /// Steps whose last attempt failed while the step said
    /// `on_failure = "continue"`, in the order they failed: a run may end
    /// `done` with failed steps. Left out when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_steps: Vec<String>,
    /// The frozen action a person must approve; set exactly while the
    /// status is `waiting_approval`.
    pub pending_action: Option<PendingAction>,
    /// The approval granted for `pending_action`, until it is used.
    pub approval: Option<Approval>,
    /// Completion evidence: receipts, recoveries, verifier checks.
    pub evidence: Vec<Evidence>,
    /// Set when a write's outcome could not be known: what to check by hand.
    pub reconciliation: Option<Reconciliation>,
    /// One more per checkpoint.
    pub state_version: u64,
    /// `seq` of the last audit line written before this checkpoint …
    pub audit_seq: u64,
    /// … and the SHA-256 of that line, so state and log vouch for each other.
    pub audit_hash: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
    /// The agent step in progress: its recorded model answers and their
    /// observations; absent when no agent step is under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<super::agent::AgentProgress>,
}

/// Which plan and policy the run executes, with digests of their files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRef {
    pub id: String,
    pub path: String,
    pub sha256: String,
    pub policy: String,
    pub policy_path: String,
    pub policy_sha256: String,
    pub step_count: usize,
    /// The plan file as an absolute path, as the run was started (`path`
    /// is as it was given, often relative to the folder the run was started
    /// in): `resume` and `approve` find the files from any folder. Absent in
    /// records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_file: Option<String>,
    /// The policy file as an absolute path (see `plan_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_file: Option<String>,
}

/// Where the run goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Cursor {
    /// Index of the next step to run (equal to the step count at the end).
    pub next_step: usize,
    /// Attempts already made on that step.
    pub attempts: u32,
}

/// Budget counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    /// Distinct steps started (retries not counted).
    pub steps: u64,
    /// Tool invocations: every attempt of a step other than `finish`, every
    /// receipt look-up during recovery, every verifier look-up.
    pub tool_calls: u64,
    /// Failed attempts since the last success.
    pub consecutive_failures: u64,
    /// Lines in `history.jsonl` covered by this checkpoint.
    pub history_records: u64,
}

/// An action frozen for approval: exactly what will run once approved. On
/// resume it is executed from here, never re-derived from the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingAction {
    pub step_id: String,
    pub kind: String,
    /// The resolved action (templates rendered).
    pub action: Value,
    pub risk: String,
    pub idempotency_key: Option<String>,
    /// What the action targets (`ticket:ticket-7`, `file:report.txt`, `program:git`).
    pub scope: String,
    /// SHA-256 of the canonical JSON of `{action, idempotency_key, kind, risk, scope}`.
    pub fingerprint: String,
    /// The `state_version` of the checkpoint that froze the action.
    pub state_version: u64,
    /// Why approval is needed: `step` (`approval = "required"`) or the policy rule.
    pub required_by: String,
    pub requested_at: String,
    /// For an agent step's action: where each argument's value was seen
    /// before the model proposed it (the model's answer is untrusted, and
    /// so is what it quotes). Not part of the fingerprint; absent for
    /// planned steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<ArgumentSource>,
}

/// Where an argument of a frozen agent action came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgumentSource {
    /// The argument's name (`ticket_id`, `path`, `args[0]` …).
    pub argument: String,
    pub value: String,
    /// `goal` (the step's goal, trusted), `observation turn N (tool:NAME,
    /// untrusted)`, or `model` (no earlier text holds it: the model wrote it).
    pub source: String,
}

/// A person's approval, bound to one frozen action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    pub fingerprint: String,
    pub state_version: u64,
    pub scope: String,
    pub approved_by: Option<String>,
    pub approved_at: String,
    pub expires_at: String,
}

/// A piece of completion evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// `receipt`, `recovered_from_receipt`, `reused_receipt`, `reconciled`,
    /// `verify`, `already_satisfied`.
    pub kind: EvidenceKind,
    pub step_id: Option<String>,
    pub passed: bool,
    pub detail: EvidenceDetail,
}

/// What to check by hand after an uncertain write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reconciliation {
    pub step_id: String,
    pub idempotency_key: Option<String>,
    pub intent_digest: String,
    pub action: Value,
    pub reason: String,
    pub instructions: String,
    pub recorded_at: String,
}

impl RunState {
    /// A run that has just started: `running`, nothing done yet, no
    /// checkpoint taken (`state_version` 0), started and updated at `now`.
    pub fn started(run_id: String, goal: Option<String>, plan: PlanRef, now: String) -> RunState {
        RunState {
            run_id,
            goal,
            inputs: crate::model::InputValues::new(),
            plan,
            status: RunStatus::Running,
            stop_reason: None,
            current_step_id: None,
            cursor: Cursor::default(),
            counters: Counters::default(),
            error: None,
            failed_steps: Vec::new(),
            pending_action: None,
            approval: None,
            evidence: Vec::new(),
            reconciliation: None,
            state_version: 0,
            audit_seq: 0,
            audit_hash: None,
            started_at: now.clone(),
            updated_at: now,
            finished_at: None,
            agent: None,
        }
    }

    /// Checks the combinations a valid checkpoint can have. A checkpoint
    /// that breaks one was edited or corrupted.
    pub fn check_invariants(&self) -> Result<(), String> {
        let waiting = self.status == RunStatus::WaitingApproval;
        if waiting != self.pending_action.is_some() {
            return Err(if waiting {
                "status `waiting_approval` without `pending_action`".to_string()
            } else {
                format!("`pending_action` while the status is `{}`", self.status)
            });
        }
        let asking = self.agent.as_ref().is_some_and(|agent| agent.question.is_some());
        if (self.status == RunStatus::WaitingInput) != asking {
            return Err(if asking {
                format!("an agent question while the status is `{}`", self.status)
            } else {
                "status `waiting_input` without an agent question".to_string()
            });
        }
        if self.agent.as_ref().is_some_and(|agent| Some(&agent.step_id) != self.current_step_id.as_ref()) {
            return Err("an agent record for another step than the current one".to_string());
        }
        if self.approval.is_some() && !waiting {
            return Err(format!("an `approval` while the status is `{}`", self.status));
        }
        if let (Some(pending), Some(approval)) = (&self.pending_action, &self.approval)
            && pending.state_version > self.state_version
        {
            return Err(format!(
                "the pending action claims state version {} but the checkpoint is version {} (approval for {})",
                pending.state_version, self.state_version, approval.state_version
            ));
        }
        if self.status.is_terminal() {
            if self.current_step_id.is_some() {
                return Err("an ended run with a `current_step_id`".to_string());
            }
            if self.stop_reason.is_none() || self.finished_at.is_none() {
                return Err("an ended run without `stop_reason` or `finished_at`".to_string());
            }
            if self.status == RunStatus::Done && self.error.is_some() {
                return Err("a `done` run with an `error`".to_string());
            }
            if self.status == RunStatus::Done && self.evidence.iter().any(|evidence| !evidence.passed) {
                return Err("a `done` run with failed completion evidence".to_string());
            }
        } else if self.stop_reason.is_some() || self.finished_at.is_some() {
            return Err(format!("a `{}` run with `stop_reason` or `finished_at`", self.status));
        }
        if self.cursor.next_step > self.plan.step_count {
            return Err(format!("cursor at step {} of a {}-step plan", self.cursor.next_step, self.plan.step_count));
        }
        if self.reconciliation.is_some() && self.status != RunStatus::Failed {
            return Err("a reconciliation record on a run that did not fail".to_string());
        }
        Ok(())
    }
}
