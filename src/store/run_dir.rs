//! A run's folder: creating it (never over an existing run), checkpointing,
//! verifying it strictly and reading it back.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::store::{
    AuditEvent, AuditLog, AuditTail, HistoryLog, RunState, Sealer, StepRecord, StepRecordStatus, verify_audit,
    write_atomic,
};

/// What can go wrong with run records.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run `{id}` already exists in `{}`: a run is never overwritten; pick another `--run-id`", path.display())]
    RunExists { id: String, path: PathBuf },
    #[error("no run `{id}` in `{}`", path.display())]
    NotFound { id: String, path: PathBuf },
    #[error("run `{id}` is in use by another planrun process")]
    Locked { id: String },
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` line {line} is not a valid record: {message}", path.display())]
    Corrupt { path: PathBuf, line: usize, message: String },
    /// The checkpoint or the log failed verification: edited, torn or
    /// inconsistent. Nothing runs from such a run.
    #[error("run `{id}` failed verification: {reason}")]
    Tampered { id: String, reason: String },
}

fn io_error<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> StoreError + 'p {
    move |source| StoreError::Io { action, path: path.to_path_buf(), source }
}

/// An open run folder, locked for this process.
pub struct RunDir {
    pub path: PathBuf,
    pub audit: AuditLog,
    pub history: HistoryLog,
    state_path: PathBuf,
    state_buffer: Vec<u8>,
    sealer: Sealer,
    /// Held for the life of the `RunDir`: an exclusive `flock`, released by
    /// the kernel when the process ends (even by a crash).
    _lock: File,
}

fn lock(path: &Path, run_id: &str) -> Result<File, StoreError> {
    let lock_path = path.join(".lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_error("create", &lock_path))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        .map_err(|_| StoreError::Locked { id: run_id.to_string() })?;
    Ok(file)
}

impl RunDir {
    /// Creates `<workspace>/runs/<run_id>/`. Fails with
    /// [`StoreError::RunExists`] when the folder exists: the check and the
    /// creation are one `mkdir`, so two processes cannot both win.
    pub fn create(workspace: &Path, run_id: &str, sealer: Sealer) -> Result<RunDir, StoreError> {
        let runs = workspace.join("runs");
        fs::create_dir_all(&runs).map_err(io_error("create", &runs))?;
        let path = runs.join(run_id);
        if let Err(error) = fs::create_dir(&path) {
            return Err(if error.kind() == io::ErrorKind::AlreadyExists {
                StoreError::RunExists { id: run_id.to_string(), path }
            } else {
                StoreError::Io { action: "create", path, source: error }
            });
        }
        let lock = lock(&path, run_id)?;
        let open = |name: &str| {
            let file_path = path.join(name);
            OpenOptions::new().append(true).create_new(true).open(&file_path).map_err(io_error("create", &file_path))
        };
        let audit = AuditLog::new(open("audit.jsonl")?);
        let history = HistoryLog::new(open("history.jsonl")?);
        let state_path = path.join("state.json");
        Ok(RunDir { path, audit, history, state_path, state_buffer: Vec::with_capacity(2048), sealer, _lock: lock })
    }

    /// Opens an existing run to continue it: verifies it strictly (see
    /// [`load_run`]), locks it, and drops history lines written after the
    /// last checkpoint (an attempt the checkpoint does not cover did not
    /// happen as far as the run is concerned; the audit log keeps the trace
    /// of it, and keyed writes are reconciled through their receipts).
    pub fn open(workspace: &Path, run_id: &str, sealer: Sealer) -> Result<(RunDir, LoadedRun), StoreError> {
        let path = workspace.join("runs").join(run_id);
        if !path.is_dir() {
            return Err(StoreError::NotFound { id: run_id.to_string(), path: workspace.join("runs") });
        }
        let lock = lock(&path, run_id)?;
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
        let append = |name: &str| {
            let file_path = path.join(name);
            OpenOptions::new().append(true).open(&file_path).map_err(io_error("open", &file_path))
        };
        let audit = AuditLog::resume(append("audit.jsonl")?, &loaded.audit_tail);
        let history = HistoryLog::new(append("history.jsonl")?);
        let state_path = path.join("state.json");
        let dir =
            RunDir { path, audit, history, state_path, state_buffer: Vec::with_capacity(2048), sealer, _lock: lock };
        Ok((dir, loaded))
    }

    /// Writes `plan.json` once, at the start of the run.
    pub fn write_plan(&self, plan: &Value) -> Result<(), StoreError> {
        let path = self.path.join("plan.json");
        let mut bytes = serde_json::to_vec_pretty(plan).map_err(|error| StoreError::Io {
            action: "serialize",
            path: path.clone(),
            source: error.into(),
        })?;
        bytes.push(b'\n');
        write_atomic(&path, &bytes).map_err(io_error("write", &path))
    }

    /// The durable checkpoint: makes the logs durable, then replaces
    /// `state.json` (sealed in its integrity envelope) atomically. The
    /// state never claims more than the logs hold.
    pub fn checkpoint(&mut self, state: &RunState) -> Result<(), StoreError> {
        self.history.sync().map_err(io_error("sync", &self.path))?;
        self.audit.sync().map_err(io_error("sync", &self.path))?;
        let serialize_error = |path: &Path, message: String| StoreError::Io {
            action: "serialize",
            path: path.to_path_buf(),
            source: io::Error::other(message),
        };
        let payload =
            serde_json::to_value(state).map_err(|error| serialize_error(&self.state_path, error.to_string()))?;
        let envelope =
            self.sealer.seal(payload).map_err(|error| serialize_error(&self.state_path, error.to_string()))?;
        self.state_buffer.clear();
        serde_json::to_writer_pretty(&mut self.state_buffer, &envelope)
            .map_err(|error| serialize_error(&self.state_path, error.to_string()))?;
        self.state_buffer.push(b'\n');
        write_atomic(&self.state_path, &self.state_buffer).map_err(io_error("write", &self.state_path))
    }
}

/// Everything a run left on disk, verified.
pub struct LoadedRun {
    pub state: RunState,
    pub plan: Value,
    pub history: Vec<StepRecord>,
    pub audit: Vec<AuditEvent>,
    pub audit_tail: AuditTail,
    /// History lines past the checkpoint that [`RunDir::open`] dropped.
    pub discarded_history: usize,
}

/// Reads and verifies `runs/<run_id>/`: the envelope's digest (or HMAC),
/// strict JSON (no duplicate keys, no floats, no unknown fields), the state's
/// invariants, the audit log's sequence and hash chain, and that the state
/// and the log agree (`audit_seq` and `audit_hash`). Any failure is
/// [`StoreError::Tampered`] or [`StoreError::Corrupt`] and nothing runs.
pub fn load_run(workspace: &Path, run_id: &str, sealer: &Sealer) -> Result<LoadedRun, StoreError> {
    let dir = workspace.join("runs").join(run_id);
    if !dir.is_dir() {
        return Err(StoreError::NotFound { id: run_id.to_string(), path: workspace.join("runs") });
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
    let (audit, audit_tail) = verify_audit(&audit_text).map_err(|error| tampered(format!("`audit.jsonl`: {error}")))?;
    if let Some(event) = audit.iter().find(|event| event.run_id != run_id) {
        return Err(tampered(format!("`audit.jsonl` line {} is for run `{}`", event.seq, event.run_id)));
    }
    if state.audit_seq > audit_tail.seq {
        return Err(tampered(format!(
            "`state.json` has seen audit line {} but `audit.jsonl` ends at line {}",
            state.audit_seq, audit_tail.seq
        )));
    }
    let seen_hash = state.audit_seq.checked_sub(1).and_then(|index| audit_tail.hashes.get(index as usize));
    if seen_hash != state.audit_hash.as_ref() {
        return Err(tampered(format!("`state.json` and `audit.jsonl` disagree about audit line {}", state.audit_seq)));
    }

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
