//! An agent run's log read back, over its bytes, whatever keeps it: the
//! file store reads `audit.jsonl` (see `file/run_load.rs`), the PostgreSQL
//! store its `audit_events` rows, which hold the same lines. [`read_log`]
//! verifies the lines and finds the head lines, [`check_log`] checks the
//! checkpoints they carry, [`check_compact_head`] the compact head (the
//! file store's `state.json`, the PostgreSQL store's `runs.state`);
//! [`LoadedRun`] is what a verified run is, and [`full_state`] the full
//! state `show --json` prints.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Map, Value, json};

use crate::store::records::audit::{LogFiles, check_seal, verify_audit};
use crate::store::records::head::{CHECKPOINT_KEY, HeadPayload, full_payload, plan_bytes, split_payload};
use crate::store::records::history::history_chain;
use crate::store::{AuditEvent, AuditTail, RunState, Sealer, StepRecord, StepRecordStatus, StoreError};

/// Everything a run left on disk, verified.
pub struct LoadedRun {
    pub state: RunState,
    pub plan: Value,
    /// The history the checkpoint covers.
    pub history: Vec<StepRecord>,
    /// The audit events the checkpoint covers (a head line's checkpoint
    /// is not repeated in its `details`: it is `state`, `history`, `plan`).
    pub audit: Vec<AuditEvent>,
    pub audit_tail: AuditTail,
    /// History lines past the checkpoint (a crash tail: not returned,
    /// never trusted; opening the run for writing drops them).
    pub discarded_history: usize,
    /// Audit lines past the checkpoint, likewise.
    pub discarded_events: u64,
    pub(crate) heads: Heads,
}

/// The parts of the checkpoint that vouch for the plan copy and the
/// history, where the covered history ends, and how far the views are
/// behind the log.
#[derive(Debug, Clone, Default)]
pub(crate) struct Heads {
    pub plan_hash: String,
    pub history_hash: Option<String>,
    /// Bytes of `history.jsonl` that hold covered records.
    pub history_len: usize,
    /// Whether the run is in the log layout (its checkpoints are head
    /// lines); `false` for a run recorded in the previous layout.
    pub logged: bool,
    /// Covered step records `history.jsonl` does not hold yet.
    pub history_behind: usize,
    /// Whether `plan.json` is missing or empty (the log holds the plan).
    pub plan_behind: bool,
    /// Whether the run has paused or ended at its last head but
    /// `state.json` is missing, empty or older (a power cut).
    pub state_behind: bool,
}

impl LoadedRun {
    /// The views (`history.jsonl`, `plan.json`) that are behind the log,
    /// in words; empty when they are up to date. Opening the run for
    /// writing repairs them.
    pub fn views_behind(&self) -> Vec<String> {
        let mut behind = Vec::new();
        if self.heads.history_behind > 0 {
            behind.push(format!("`history.jsonl` lacks {} step records the log holds", self.heads.history_behind));
        }
        if self.heads.plan_behind {
            behind.push("`plan.json` is missing (the log holds the plan)".to_string());
        }
        if self.heads.state_behind {
            behind.push("`state.json` is older than the log's last checkpoint".to_string());
        }
        behind
    }
}

/// A run's log verified up to its last head line.
pub(crate) struct Log {
    pub events: Vec<AuditEvent>,
    pub tail: AuditTail,
    /// Index in `events` of every head line, in order.
    heads: Vec<usize>,
    /// Whole lines in the log, and whether a torn one follows them.
    whole_lines: u64,
    torn: bool,
}

/// Verifies every whole line of an agent run's log `text` (sequence,
/// chain, run id; a torn last line is what a crash mid-write leaves) and
/// finds its head lines; `log` names it in the reasons. `None` when the log
/// has no head line (the previous layout, or a run killed before its first
/// checkpoint). Lines past the last head are the crash tail, counted in
/// [`AuditTail::past_head`]. The file store and the PostgreSQL store
/// (whose rows are the same lines) both read their logs with it.
pub(crate) fn read_log(text: &str, run_id: &str, log: &str, sealer: &Sealer) -> Result<Option<Log>, String> {
    let whole = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
    let torn = u64::from(whole.len() < text.len());
    let (mut events, mut tail) = verify_audit(whole, sealer).map_err(|error| format!("`{log}`: {error}"))?;
    if let Some(event) = events.iter().find(|event| event.run_id != run_id) {
        return Err(format!("`{log}` line {} is for run `{}`", event.seq, event.run_id));
    }
    let mut heads = Vec::new();
    for (index, event) in events.iter().enumerate() {
        match (event.details.contains_key(CHECKPOINT_KEY), event.seal.is_some()) {
            (true, true) => heads.push(index),
            (false, false) => {}
            _ => return Err(format!("`{log}` line {} is a checkpoint without its seal", event.seq)),
        }
    }
    let Some(&last) = heads.last() else {
        return Ok(None);
    };
    let whole_lines = events.len() as u64;
    let lines: Vec<&str> = whole.split_terminator('\n').collect();
    if check_seal(lines[last], sealer) != Some(true) {
        return Err(format!(
            "`{log}` line {}: the checkpoint's seal does not match the line (it was changed)",
            last + 1
        ));
    }
    let head_len: usize = lines[..=last].iter().map(|line| line.len() + 1).sum();
    tail.past_head = (events.len() - last - 1) as u64 + torn;
    events.truncate(last + 1);
    tail.seq = events[last].seq;
    tail.hashes.truncate(last + 1);
    tail.hash = tail.hashes.last().cloned();
    tail.head_len = head_len;
    Ok(Some(Log { events, tail, heads, whole_lines, torn: torn == 1 }))
}

/// A run's stored texts, as read: its compact head (`state.json`,
/// `runs.state`; `None` when there is none) and its log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogTexts<'a> {
    pub compact: Option<&'a str>,
    pub audit: &'a str,
}

/// A log whose head lines were checked ([`check_log`]): the run as its
/// last head says it is.
pub(crate) struct CheckedLog {
    /// The events up to the last head (the head lines without their
    /// `checkpoint`).
    pub events: Vec<AuditEvent>,
    pub tail: AuditTail,
    heads: Vec<usize>,
    payloads: Vec<HeadPayload>,
    whole_lines: u64,
    torn: bool,
    pub state: RunState,
    pub plan: Value,
    pub history: Vec<StepRecord>,
    /// The step records as the history view writes them, one line each.
    pub lines: Vec<String>,
    pub plan_hash: String,
    pub history_hash: Option<String>,
}

/// Checks the head lines of `log` (the run's log at `log_path`, named by
/// `files` in the reasons): every checkpoint parses, only the first carries
/// the plan, the last is a possible state of run `run_id`, and the step
/// records and the plan in the log are the ones its links vouch for.
pub(crate) fn check_log(
    run_id: &str,
    files: LogFiles,
    log_path: &Path,
    log: Log,
    sealer: &Sealer,
) -> Result<CheckedLog, StoreError> {
    let tampered = |reason: String| StoreError::Tampered { id: run_id.to_string(), reason };
    let name = files.audit;
    let Log { mut events, tail, heads, whole_lines, torn } = log;
    let mut payloads = Vec::with_capacity(heads.len());
    for &index in &heads {
        let event = &mut events[index];
        let checkpoint = event.details.shift_remove(CHECKPOINT_KEY).unwrap_or(Value::Null);
        let payload: HeadPayload = serde_json::from_value(checkpoint)
            .map_err(|error| tampered(format!("`{name}` line {}: checkpoint: {error}", event.seq)))?;
        if payload.plan.is_some() != payloads.is_empty() {
            return Err(tampered(format!(
                "`{name}` line {}: only the first checkpoint of a log carries the plan",
                event.seq
            )));
        }
        payloads.push(payload);
    }
    let plan = payloads[0].plan.clone().unwrap_or(Value::Null);
    let history: Vec<StepRecord> = payloads.iter().flat_map(|payload| payload.history.iter().cloned()).collect();
    let last = payloads.last().map(|payload| payload.state.clone()).unwrap_or_default();
    let head_hash = tail.hash.clone().unwrap_or_default();
    let payload = full_payload(&last, tail.seq, &head_hash);
    let (state, plan_hash, history_hash) =
        split_payload(payload).map_err(|reason| tampered(format!("the checkpoint in `{name}`: {reason}")))?;
    check_state(run_id, &state, &format!("the checkpoint in `{name}`"))?;

    let lines: Vec<String> = history.iter().map(serde_json::to_string).collect::<Result<_, _>>().map_err(|error| {
        StoreError::Corrupt { path: log_path.to_path_buf(), line: tail.seq as usize, message: error.to_string() }
    })?;
    if state.counters.history_records != history.len() as u64
        || history_chain(sealer, lines.iter().map(String::as_str)) != history_hash
    {
        return Err(tampered(format!(
            "the step records in `{name}` are not the ones its checkpoint covers (the history chain does not match)"
        )));
    }
    let plan_text = plan_bytes(&plan).map_err(|error| tampered(format!("the plan in `{name}`: {error}")))?;
    if sealer.link(&plan_text) != plan_hash {
        return Err(tampered(format!("the plan in `{name}` is not the one its checkpoint links")));
    }
    Ok(CheckedLog {
        events,
        tail,
        heads,
        payloads,
        whole_lines,
        torn,
        state,
        plan,
        history,
        lines,
        plan_hash,
        history_hash,
    })
}

/// The run id and the invariants of a checkpoint of run `run_id` read from
/// `source`.
pub(crate) fn check_state(run_id: &str, state: &RunState, source: &str) -> Result<(), StoreError> {
    let tampered = |reason: String| StoreError::Tampered { id: run_id.to_string(), reason };
    if state.run_id != run_id {
        return Err(tampered(format!("{source} is for run `{}`", state.run_id)));
    }
    state.check_invariants().map_err(|reason| tampered(format!("{source}: impossible state: {reason}")))
}

/// The compact head (`state.json`, written when the run paused or ended;
/// the PostgreSQL store's `runs.state`, written by every checkpoint) must
/// be the checkpoint of the head line it names (a newer head in the log is
/// the head). Missing or empty (lost in a power cut: it is written without
/// a sync) it is not needed. One from the previous layout is older than
/// every head line. Returns the `audit_seq` it names, if any.
pub(crate) fn check_compact_head(
    run_id: &str,
    files: LogFiles,
    texts: LogTexts<'_>,
    log: &CheckedLog,
    sealer: &Sealer,
) -> Result<Option<u64>, StoreError> {
    let tampered = |reason: String| StoreError::Tampered { id: run_id.to_string(), reason };
    let LogTexts { compact, audit: audit_text } = texts;
    let LogFiles { state: name, audit: log_name } = files;
    let CheckedLog { events, heads, payloads, tail, whole_lines, torn, .. } = log;
    let Some(text) = compact.filter(|text| !text.is_empty()) else {
        return Ok(None);
    };
    let payload = sealer.open(text).map_err(|error| tampered(format!("`{name}`: {error}")))?;
    let Value::Object(payload) = payload else {
        return Err(tampered(format!("`{name}`: the payload is not an object")));
    };
    // As strict as the head it copies: fields, invariants, run id.
    let (state, _, _) =
        split_payload(payload.clone()).map_err(|reason| tampered(format!("`{name}` payload: {reason}")))?;
    check_state(run_id, &state, &format!("`{name}`"))?;
    let seen = state.audit_seq;
    if seen > tail.seq {
        let torn = if *torn { ", then a torn line (the process was interrupted mid-write)" } else { "" };
        return Err(tampered(format!(
            "`{name}` has seen audit line {seen} but `{log_name}` ends at line {whole_lines}{torn}, its last checkpoint at line {}",
            tail.seq
        )));
    }
    let first_head = events[heads[0]].seq;
    if seen < first_head {
        // From the previous layout: the run went on in the log since. Its
        // seal and its link to the line it names still have to hold.
        let line_hash = seen.checked_sub(1).and_then(|index| tail.hashes.get(index as usize));
        if payload.get("audit_hash").and_then(Value::as_str) != line_hash.map(String::as_str) {
            return Err(tampered(format!("`{name}` and `{log_name}` disagree about audit line {seen}")));
        }
        return Ok(Some(seen));
    }
    let Some(position) = heads.iter().position(|&index| events[index].seq == seen) else {
        return Err(tampered(format!("`{name}` names audit line {seen}, which is not a checkpoint")));
    };
    let line = audit_text.split_terminator('\n').nth(seen as usize - 1).unwrap_or_default();
    let expected = full_payload(&payloads[position].state, seen, &sealer.link(line.as_bytes()));
    if expected != payload {
        return Err(tampered(format!(
            "`{name}` is not the checkpoint at audit line {seen} (it was changed or re-sealed)"
        )));
    }
    Ok(Some(seen))
}

/// Joins a run's files into the full state: `plan.steps` with each
/// step's `status` and `attempts`, and the whole `history` (up to the
/// checkpoint).
pub fn full_state(run: &LoadedRun) -> Value {
    let state = &run.state;
    let covered = &run.history;
    let mut attempts: HashMap<&str, (u32, &str)> = HashMap::new();
    for record in covered {
        let status = match record.status {
            StepRecordStatus::Done => "done",
            StepRecordStatus::Failed => "failed",
            StepRecordStatus::Skipped => "skipped",
        };
        attempts.insert(record.step_id.as_str(), (record.attempt, status));
    }
    let mut plan = run.plan.clone();
    if let Some(steps) = plan.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps {
            let id = step.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
            let (count, status) = attempts.get(id.as_str()).copied().unwrap_or((0, "pending"));
            let current = state.current_step_id.as_deref() == Some(id.as_str()) && status == "pending";
            let status = match state.status {
                crate::model::RunStatus::Running if current => "running",
                crate::model::RunStatus::WaitingApproval if current => "waiting_approval",
                crate::model::RunStatus::WaitingInput if current => "waiting_input",
                _ => status,
            };
            if let Some(object) = step.as_object_mut() {
                object.insert("status".into(), json!(status));
                object.insert("attempts".into(), json!(count));
            }
        }
    }
    let mut out = Map::new();
    out.insert("run_id".into(), json!(state.run_id));
    out.insert("goal".into(), json!(state.goal));
    out.insert("plan".into(), plan);
    out.insert("plan_ref".into(), json!(state.plan));
    out.insert("history".into(), json!(covered));
    out.insert("status".into(), json!(state.status));
    out.insert("stop_reason".into(), json!(state.stop_reason));
    out.insert("current_step_id".into(), json!(state.current_step_id));
    out.insert("error".into(), json!(state.error));
    out.insert("pending_action".into(), json!(state.pending_action));
    out.insert("approval".into(), json!(state.approval));
    out.insert("evidence".into(), json!(state.evidence));
    out.insert("reconciliation".into(), json!(state.reconciliation));
    out.insert("counters".into(), json!(state.counters));
    out.insert("state_version".into(), json!(state.state_version));
    out.insert("started_at".into(), json!(state.started_at));
    out.insert("updated_at".into(), json!(state.updated_at));
    out.insert("finished_at".into(), json!(state.finished_at));
    Value::Object(out)
}
