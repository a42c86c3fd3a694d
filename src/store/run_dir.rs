//! A run's folder: creating it (never over an existing run), checkpointing,
//! and reading it back.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::store::{AuditLog, HistoryLog, RunState, StepRecord, write_atomic};

/// What can go wrong with run records.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("run `{id}` already exists in `{}`: a run is never overwritten; pick another `--run-id`", path.display())]
    RunExists { id: String, path: PathBuf },
    #[error("no run `{id}` in `{}`", path.display())]
    NotFound { id: String, path: PathBuf },
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` line {line} is not a valid record: {message}", path.display())]
    Corrupt { path: PathBuf, line: usize, message: String },
}

fn io_error<'p>(action: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> StoreError + 'p {
    move |source| StoreError::Io { action, path: path.to_path_buf(), source }
}

/// An open run folder.
pub struct RunDir {
    pub path: PathBuf,
    pub audit: AuditLog,
    pub history: HistoryLog,
    state_path: PathBuf,
    state_buffer: Vec<u8>,
}

impl RunDir {
    /// Creates `<workspace>/runs/<run_id>/`. Fails with
    /// [`StoreError::RunExists`] when the folder exists: the check and the
    /// creation are one `mkdir`, so two processes cannot both win.
    pub fn create(workspace: &Path, run_id: &str) -> Result<RunDir, StoreError> {
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
        let open = |name: &str| {
            let file_path = path.join(name);
            OpenOptions::new().append(true).create_new(true).open(&file_path).map_err(io_error("create", &file_path))
        };
        let audit = AuditLog::new(open("audit.jsonl")?);
        let history = HistoryLog::new(open("history.jsonl")?);
        let state_path = path.join("state.json");
        Ok(RunDir { path, audit, history, state_path, state_buffer: Vec::with_capacity(2048) })
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
    /// `state.json` atomically. The state never claims more than the logs
    /// hold.
    pub fn checkpoint(&mut self, state: &RunState) -> Result<(), StoreError> {
        self.history.sync().map_err(io_error("sync", &self.path))?;
        self.audit.sync().map_err(io_error("sync", &self.path))?;
        self.state_buffer.clear();
        serde_json::to_writer_pretty(&mut self.state_buffer, state).map_err(|error| StoreError::Io {
            action: "serialize",
            path: self.state_path.clone(),
            source: error.into(),
        })?;
        self.state_buffer.push(b'\n');
        write_atomic(&self.state_path, &self.state_buffer).map_err(io_error("write", &self.state_path))
    }
}

/// Everything a run left on disk.
pub struct RunRecords {
    pub state: RunState,
    pub plan: Value,
    pub history: Vec<StepRecord>,
    pub audit: Vec<Value>,
}

/// Reads `runs/<run_id>/`, strictly: a line that does not parse is an error
/// naming the file and line.
pub fn read_run(workspace: &Path, run_id: &str) -> Result<RunRecords, StoreError> {
    let dir = workspace.join("runs").join(run_id);
    if !dir.is_dir() {
        return Err(StoreError::NotFound { id: run_id.to_string(), path: workspace.join("runs") });
    }
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read_to_string(&path).map_err(io_error("read", &path)).map(|text| (path, text))
    };
    let (state_path, state_text) = read("state.json")?;
    let state: RunState = serde_json::from_str(&state_text).map_err(|error| StoreError::Corrupt {
        path: state_path.clone(),
        line: error.line(),
        message: error.to_string(),
    })?;
    let (plan_path, plan_text) = read("plan.json")?;
    let plan: Value = serde_json::from_str(&plan_text).map_err(|error| StoreError::Corrupt {
        path: plan_path,
        line: error.line(),
        message: error.to_string(),
    })?;
    let (history_path, history_text) = read("history.jsonl")?;
    let history = parse_lines::<StepRecord>(&history_path, &history_text)?;
    let (audit_path, audit_text) = read("audit.jsonl")?;
    let audit = parse_lines::<Value>(&audit_path, &audit_text)?;
    Ok(RunRecords { state, plan, history, audit })
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
/// step's `status` and `attempts`, and the whole `history`.
pub fn full_state(records: &RunRecords) -> Value {
    let mut attempts: HashMap<&str, (u32, &str)> = HashMap::new();
    for record in &records.history {
        let status = match record.status {
            crate::store::StepRecordStatus::Done => "done",
            crate::store::StepRecordStatus::Failed => "failed",
        };
        attempts.insert(record.step_id.as_str(), (record.attempt, status));
    }
    let mut plan = records.plan.clone();
    if let Some(steps) = plan.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps {
            let id = step.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
            let (count, status) = attempts.get(id.as_str()).copied().unwrap_or((0, "pending"));
            let running = records.state.current_step_id.as_deref() == Some(id.as_str())
                && !records.state.status.is_terminal()
                && status == "pending";
            if let Some(object) = step.as_object_mut() {
                object.insert("status".into(), json!(if running { "running" } else { status }));
                object.insert("attempts".into(), json!(count));
            }
        }
    }
    let state = &records.state;
    let mut out = Map::new();
    out.insert("run_id".into(), json!(state.run_id));
    out.insert("goal".into(), json!(state.goal));
    out.insert("plan".into(), plan);
    out.insert("plan_ref".into(), json!(state.plan));
    out.insert("history".into(), json!(records.history));
    out.insert("status".into(), json!(state.status));
    out.insert("stop_reason".into(), json!(state.stop_reason));
    out.insert("current_step_id".into(), json!(state.current_step_id));
    out.insert("error".into(), json!(state.error));
    out.insert("counters".into(), json!(state.counters));
    out.insert("state_version".into(), json!(state.state_version));
    out.insert("started_at".into(), json!(state.started_at));
    out.insert("updated_at".into(), json!(state.updated_at));
    out.insert("finished_at".into(), json!(state.finished_at));
    Value::Object(out)
}
