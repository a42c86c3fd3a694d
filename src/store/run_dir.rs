//! A run's folder: creating it (never over an existing run), checkpointing
//! with compare-and-set, verifying it strictly and reading it back. A
//! [`RunDir`] is the [`FileStore`](crate::store::FileStore)'s
//! [`RunHandle`].

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::store::audit::{LogFiles, verify_checkpointed_log};
use crate::store::error::{io_error, serialize_error};
use crate::store::{
    AuditEvent, AuditLog, AuditTail, HistoryLog, Lease, NewEvent, RunHandle, RunState, Sealer, StepRecord,
    StepRecordStatus, StoreError, write_atomic,
};

/// An open run folder, locked for this process.
pub struct RunDir {
    path: PathBuf,
    audit: AuditLog,
    history: HistoryLog,
    run_id: String,
    state_path: PathBuf,
    state_buffer: Vec<u8>,
    sealer: Sealer,
    /// The `state_version` of the checkpoint on disk. The lease makes this
    /// process the folder's only writer, so the copy kept here is the
    /// stored value and the compare-and-set needs no read-back.
    stored_version: u64,
    /// Held for the life of the `RunDir`.
    _lease: Lease,
}

/// `<workspace>/runs`.
pub(crate) fn runs_folder(workspace: &Path) -> PathBuf {
    workspace.join("runs")
}

/// Creates `folder` with one `mkdir`, so the check and the creation are
/// one step and two processes cannot both win; [`StoreError::RunExists`]
/// when it exists.
pub(crate) fn create_folder(parent: &Path, id: &str) -> Result<PathBuf, StoreError> {
    fs::create_dir_all(parent).map_err(io_error("create", parent))?;
    let path = parent.join(id);
    match fs::create_dir(&path) {
        Ok(()) => Ok(path),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            Err(StoreError::RunExists { id: id.to_string(), path })
        }
        Err(error) => Err(StoreError::Io { action: "create", path, source: error }),
    }
}

/// Creates `<folder>/<name>` for appending; it must not exist.
pub(crate) fn create_log(folder: &Path, name: &str) -> Result<fs::File, StoreError> {
    let path = folder.join(name);
    OpenOptions::new().append(true).create_new(true).open(&path).map_err(io_error("create", &path))
}

/// Opens the existing `<folder>/<name>` for appending.
pub(crate) fn append_log(folder: &Path, name: &str) -> Result<fs::File, StoreError> {
    let path = folder.join(name);
    OpenOptions::new().append(true).open(&path).map_err(io_error("open", &path))
}

/// Seals `payload` in its envelope into `buffer`, pretty-printed, and
/// replaces `path` with it atomically.
pub(crate) fn write_sealed(
    sealer: &Sealer,
    path: &Path,
    payload: Value,
    buffer: &mut Vec<u8>,
) -> Result<(), StoreError> {
    let envelope = sealer.seal(payload).map_err(|error| serialize_error(path, error))?;
    buffer.clear();
    serde_json::to_writer_pretty(&mut *buffer, &envelope).map_err(|error| serialize_error(path, error))?;
    buffer.push(b'\n');
    write_atomic(path, buffer).map_err(io_error("write", path))
}

/// Appends `event` to `audit` for `id`, naming `path` on failure.
pub(crate) fn append_event(
    audit: &mut AuditLog,
    id: &str,
    event: NewEvent<'_>,
    path: &Path,
) -> Result<u64, StoreError> {
    audit
        .append(event.ts, id, event.event_type, event.step_id, event.status, event.details)
        .map_err(io_error("append to", path))
}

/// Refuses a checkpoint whose expected version is not the stored one.
pub(crate) fn compare_version(id: &str, stored: u64, expected: u64) -> Result<(), StoreError> {
    if stored == expected {
        Ok(())
    } else {
        Err(StoreError::VersionConflict { id: id.to_string(), expected, found: stored })
    }
}

impl RunDir {
    /// Creates `<workspace>/runs/<run_id>/`. Fails with
    /// [`StoreError::RunExists`] when the folder exists.
    pub fn create(workspace: &Path, run_id: &str, sealer: Sealer) -> Result<RunDir, StoreError> {
        let path = create_folder(&runs_folder(workspace), run_id)?;
        let lease = Lease::take(&path, run_id)?;
        let audit = AuditLog::new(create_log(&path, "audit.jsonl")?);
        let history = HistoryLog::new(create_log(&path, "history.jsonl")?);
        Ok(RunDir::assemble(path, run_id, audit, history, sealer, 0, lease))
    }

    fn assemble(
        path: PathBuf,
        run_id: &str,
        audit: AuditLog,
        history: HistoryLog,
        sealer: Sealer,
        stored_version: u64,
        lease: Lease,
    ) -> RunDir {
        let state_path = path.join("state.json");
        RunDir {
            path,
            audit,
            history,
            run_id: run_id.to_string(),
            state_path,
            state_buffer: Vec::with_capacity(2048),
            sealer,
            stored_version,
            _lease: lease,
        }
    }

    /// Opens an existing run to continue it: verifies it strictly (see
    /// [`load_run`]), locks it, and drops history lines written after the
    /// last checkpoint (an attempt the checkpoint does not cover did not
    /// happen as far as the run is concerned; the audit log keeps the trace
    /// of it, and keyed writes are reconciled through their receipts).
    pub fn open(workspace: &Path, run_id: &str, sealer: Sealer) -> Result<(RunDir, LoadedRun), StoreError> {
        let path = runs_folder(workspace).join(run_id);
        if !path.is_dir() {
            return Err(StoreError::NotFound { id: run_id.to_string(), path: runs_folder(workspace) });
        }
        let lease = Lease::take(&path, run_id)?;
        let mut loaded = load_run(workspace, run_id, &sealer)?;
        let history_path = path.join("history.jsonl");
        let keep = usize::try_from(loaded.state.counters.history_records).unwrap_or(usize::MAX);
        if loaded.history.len() > keep {
            loaded.discarded_history = loaded.history.len() - keep;
            loaded.history.truncate(keep);
            let text = fs::read_to_string(&history_path).map_err(io_error("read", &history_path))?;
            let cut: usize = text.split_inclusive('\n').take(keep).map(str::len).sum();
            let file = OpenOptions::new().write(true).open(&history_path).map_err(io_error("open", &history_path))?;
            file.set_len(cut as u64).map_err(io_error("truncate", &history_path))?;
            file.sync_all().map_err(io_error("sync", &history_path))?;
        }
        let audit = AuditLog::resume(append_log(&path, "audit.jsonl")?, &loaded.audit_tail);
        let history = HistoryLog::new(append_log(&path, "history.jsonl")?);
        let version = loaded.state.state_version;
        Ok((RunDir::assemble(path, run_id, audit, history, sealer, version, lease), loaded))
    }

    /// Writes `plan.json` once, at the start of the run.
    pub fn write_plan(&self, plan: &Value) -> Result<(), StoreError> {
        let path = self.path.join("plan.json");
        let mut bytes = serde_json::to_vec_pretty(plan).map_err(|error| serialize_error(&path, error))?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes).map_err(io_error("write", &path))
    }

    /// The durable checkpoint: makes the logs durable, then replaces
    /// `state.json` (sealed in its integrity envelope) atomically, if the
    /// stored `state_version` is `expected`. The state never claims more
    /// than the logs hold.
    pub fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        compare_version(&self.run_id, self.stored_version, expected)?;
        self.history.sync().map_err(io_error("sync", &self.path))?;
        self.audit.sync().map_err(io_error("sync", &self.path))?;
        let payload = serde_json::to_value(state).map_err(|error| serialize_error(&self.state_path, error))?;
        write_sealed(&self.sealer, &self.state_path, payload, &mut self.state_buffer)?;
        self.stored_version = state.state_version;
        Ok(())
    }
}

impl RunHandle for RunDir {
    fn run_id(&self) -> &str {
        &self.run_id
    }

    fn location(&self) -> &Path {
        &self.path
    }

    fn audit_seq(&self) -> u64 {
        self.audit.seq()
    }

    fn audit_hash(&self) -> Option<&str> {
        self.audit.last_hash()
    }

    fn stored_version(&self) -> u64 {
        self.stored_version
    }

    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError> {
        append_event(&mut self.audit, &self.run_id, event, &self.path.join("audit.jsonl"))
    }

    fn append_history(&mut self, record: &StepRecord) -> Result<(), StoreError> {
        self.history.append(record).map_err(io_error("append to", &self.path.join("history.jsonl")))
    }

    fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError> {
        RunDir::write_plan(self, plan)
    }

    fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        RunDir::checkpoint(self, state, expected)
    }
}

/// Everything a run left on disk, verified.
pub struct LoadedRun {
    pub state: RunState,
    pub plan: Value,
    pub history: Vec<StepRecord>,
    pub audit: Vec<AuditEvent>,
    pub audit_tail: AuditTail,
    /// History lines past the checkpoint that opening the run for writing
    /// ([`RunStore::open_run`](crate::store::RunStore::open_run)) dropped.
    pub discarded_history: usize,
}

/// Reads and verifies `runs/<run_id>/`: the envelope's digest (or HMAC),
/// strict JSON (no duplicate keys, no floats, no unknown fields), the state's
/// invariants, the audit log's sequence and hash chain, and that the state
/// and the log agree (`audit_seq` and `audit_hash`). Any failure is
/// [`StoreError::Tampered`] or [`StoreError::Corrupt`] and nothing runs.
pub fn load_run(workspace: &Path, run_id: &str, sealer: &Sealer) -> Result<LoadedRun, StoreError> {
    let dir = runs_folder(workspace).join(run_id);
    if !dir.is_dir() {
        return Err(StoreError::NotFound { id: run_id.to_string(), path: runs_folder(workspace) });
    }
    let tampered = |reason: String| StoreError::Tampered { id: run_id.to_string(), reason };
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read_to_string(&path).map_err(io_error("read", &path)).map(|text| (path, text))
    };
    let (_, state_text) = read("state.json")?;
    let payload = sealer.open(&state_text).map_err(|error| tampered(format!("`state.json`: {error}")))?;
    let state: RunState =
        serde_json::from_value(payload).map_err(|error| tampered(format!("`state.json` payload: {error}")))?;
    if state.run_id != run_id {
        return Err(tampered(format!("`state.json` is for run `{}`", state.run_id)));
    }
    state.check_invariants().map_err(|reason| tampered(format!("`state.json`: impossible state: {reason}")))?;

    let (_, audit_text) = read("audit.jsonl")?;
    let files = LogFiles { state: "state.json", audit: "audit.jsonl" };
    let (audit, audit_tail) =
        verify_checkpointed_log(&audit_text, run_id, files, state.audit_seq, state.audit_hash.as_deref())
            .map_err(tampered)?;

    let (plan_path, plan_text) = read("plan.json")?;
    let plan: Value = serde_json::from_str(&plan_text).map_err(|error| StoreError::Corrupt {
        path: plan_path,
        line: error.line(),
        message: error.to_string(),
    })?;
    let (history_path, history_text) = read("history.jsonl")?;
    if !history_text.is_empty() && !history_text.ends_with('\n') {
        return Err(tampered("`history.jsonl`: the last line is torn (no newline)".to_string()));
    }
    let history = parse_lines::<StepRecord>(&history_path, &history_text)?;
    if (history.len() as u64) < state.counters.history_records {
        return Err(tampered(format!(
            "`state.json` counts {} history records but `history.jsonl` has {}",
            state.counters.history_records,
            history.len()
        )));
    }
    Ok(LoadedRun { state, plan, history, audit, audit_tail, discarded_history: 0 })
}

fn parse_lines<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<Vec<T>, StoreError> {
    text.lines()
        .enumerate()
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|error| StoreError::Corrupt {
                path: path.to_path_buf(),
                line: index + 1,
                message: error.to_string(),
            })
        })
        .collect()
}

/// Joins a run's files into the seed-shaped state: `plan.steps` with each
/// step's `status` and `attempts`, and the whole `history` (up to the
/// checkpoint).
pub fn full_state(run: &LoadedRun) -> Value {
    let state = &run.state;
    let covered = &run.history[..run.history.len().min(state.counters.history_records as usize)];
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
