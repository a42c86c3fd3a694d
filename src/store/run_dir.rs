//! A run's folder: creating it (never over an existing run), checkpointing
//! with compare-and-set, verifying it strictly and reading it back. A
//! [`RunDir`] is the [`FileStore`](crate::store::FileStore)'s
//! [`RunHandle`].
//!
//! A new run is built in `runs/<id>~new/` (`~` is never part of a run id,
//! so the folder is never listed or opened as a run) and renamed to
//! `runs/<id>/` (without replacing anything) by its first checkpoint. So
//! `runs/<id>/` always holds a checkpoint: a run killed before its first
//! one left nothing that claims the id, ran nothing, and the id can be used
//! again (the stale folder is removed when it is).
//!
//! The checkpoint is the sealed head of every record of the run: besides
//! the audit line it has seen (`audit_seq`, `audit_hash`) the store adds
//! `plan_hash` (the link of `plan.json`'s bytes) and `history_hash` (the
//! history chain's link after the lines it covers) to its payload, and
//! strips them again on reading.
//!
//! Durability ([`Durability`]): per write (the command line) a checkpoint
//! `fdatasync`s the logs, `fsync`s the new `state.json` and the folder.
//! Under group commit (the service) each of those syncs is a barrier shared
//! with concurrent runs: one after the logs and the new `state.json` are
//! written (before it is renamed into place), one after the renames, so a
//! checkpoint is as durable as the command line's when it returns.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::store::atomic::replace_unsynced;
use crate::store::audit::{LogFiles, verify_checkpointed_log};
use crate::store::error::{io_error, serialize_error};
use crate::store::history::history_chain;
use crate::store::{
    AuditEvent, AuditLog, AuditTail, Durability, HistoryLog, Lease, NewEvent, RunHandle, RunState, Sealer, StepRecord,
    StepRecordStatus, StoreError, write_atomic,
};

/// The fields the store adds to a run's checkpoint payload.
const HEAD_FIELDS: [&str; 2] = ["plan_hash", "history_hash"];

/// An open run folder, locked for this process.
pub struct RunDir {
    /// Where the folder is now: `runs/<id>~new` until the first checkpoint
    /// renames it to `runs/<id>`.
    path: PathBuf,
    /// `runs/<id>`.
    final_path: PathBuf,
    /// The link of `plan.json`'s bytes, once written.
    plan_hash: Option<String>,
    audit: AuditLog,
    history: HistoryLog,
    run_id: String,
    state_path: PathBuf,
    state_buffer: Vec<u8>,
    sealer: Sealer,
    durability: Durability,
    /// The `state_version` of the checkpoint on disk. The lease makes this
    /// process the folder's only writer, so the copy kept here is the
    /// stored value and the compare-and-set needs no read-back.
    stored_version: u64,
    /// Held for the life of the `RunDir`.
    _lease: Lease,
}

/// The folder a new run is built in until its first checkpoint.
fn creating_folder_name(run_id: &str) -> String {
    format!("{run_id}~new")
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

/// Seals `payload` into `buffer` and replaces `path` with it atomically:
/// durably on its own, or (group commit) after a shared barrier that makes
/// the new file whole before it is renamed into place.
fn write_sealed(
    sealer: &Sealer,
    path: &Path,
    payload: Value,
    buffer: &mut Vec<u8>,
    durability: &Durability,
) -> Result<(), StoreError> {
    sealer.seal_into(path, payload, buffer)?;
    let written = match durability {
        Durability::PerWrite => write_atomic(path, buffer),
        Durability::Group(commit) => replace_unsynced(path, buffer, || commit.barrier()),
    };
    written.map_err(io_error("write", path))
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
    pub fn create(
        workspace: &Path,
        run_id: &str,
        sealer: Sealer,
        durability: Durability,
    ) -> Result<RunDir, StoreError> {
        let runs = runs_folder(workspace);
        let final_path = runs.join(run_id);
        let exists = || StoreError::RunExists { id: run_id.to_string(), path: runs.clone() };
        if final_path.exists() {
            return Err(exists());
        }
        let name = creating_folder_name(run_id);
        let stale = runs.join(&name);
        if stale.is_dir() {
            // Another process creating the same id holds the lock: the id
            // is taken. A folder nobody holds is what a process killed
            // before its first checkpoint left: nothing ran from it.
            let lease = Lease::take(&stale, run_id).map_err(|_| exists())?;
            fs::remove_dir_all(&stale).map_err(io_error("remove", &stale))?;
            drop(lease);
        }
        let path = create_folder(&runs, &name).map_err(|_| exists())?;
        // Between the `mkdir` and the lock another creator may take the
        // folder for a stale one and remove it: it is theirs then.
        let lease = Lease::take(&path, run_id).map_err(|_| exists())?;
        let audit = AuditLog::new(create_log(&path, "audit.jsonl")?, sealer.clone());
        let history = HistoryLog::new(create_log(&path, "history.jsonl")?, None, sealer.clone());
        Ok(RunDir::assemble(path, final_path, run_id, (audit, history, None), (sealer, durability), 0, lease))
    }

    fn assemble(
        path: PathBuf,
        final_path: PathBuf,
        run_id: &str,
        (audit, history, plan_hash): (AuditLog, HistoryLog, Option<String>),
        (sealer, durability): (Sealer, Durability),
        stored_version: u64,
        lease: Lease,
    ) -> RunDir {
        let state_path = path.join("state.json");
        RunDir {
            path,
            final_path,
            plan_hash,
            audit,
            history,
            run_id: run_id.to_string(),
            state_path,
            state_buffer: Vec::with_capacity(2048),
            sealer,
            durability,
            stored_version,
            _lease: lease,
        }
    }

    /// Opens an existing run to continue it: verifies it strictly (see
    /// [`load_run`]), locks it, and drops history lines written after the
    /// last checkpoint (an attempt the checkpoint does not cover did not
    /// happen as far as the run is concerned; the audit log keeps the trace
    /// of it, and keyed writes are reconciled through their receipts).
    pub fn open(
        workspace: &Path,
        run_id: &str,
        sealer: Sealer,
        durability: Durability,
    ) -> Result<(RunDir, LoadedRun), StoreError> {
        let path = runs_folder(workspace).join(run_id);
        if !path.is_dir() {
            return Err(StoreError::NotFound { id: run_id.to_string(), path: runs_folder(workspace) });
        }
        let lease = Lease::take(&path, run_id)?;
        let loaded = load_run(workspace, run_id, &sealer)?;
        // What lies past the head is a crash tail: cut it off, so that the
        // logs continue from the head and no later checkpoint vouches for it.
        truncate_to(&path.join("history.jsonl"), loaded.heads.history_len)?;
        truncate_to(&path.join("audit.jsonl"), loaded.audit_tail.head_len)?;
        let audit = AuditLog::resume(append_log(&path, "audit.jsonl")?, &loaded.audit_tail, sealer.clone());
        let history =
            HistoryLog::new(append_log(&path, "history.jsonl")?, loaded.heads.history_hash.clone(), sealer.clone());
        let version = loaded.state.state_version;
        let logs = (audit, history, Some(loaded.heads.plan_hash.clone()));
        Ok((RunDir::assemble(path.clone(), path, run_id, logs, (sealer, durability), version, lease), loaded))
    }

    /// Writes `plan.json` once, at the start of the run.
    pub fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError> {
        let path = self.path.join("plan.json");
        let mut bytes = serde_json::to_vec_pretty(plan).map_err(|error| serialize_error(&path, error))?;
        bytes.push(b'\n');
        // Under group commit the first checkpoint's barrier makes the plan
        // copy durable before the checkpoint that vouches for it is visible.
        let written = match &self.durability {
            Durability::PerWrite => write_atomic(&path, &bytes),
            Durability::Group(_) => replace_unsynced(&path, &bytes, || Ok(())),
        };
        written.map_err(io_error("write", &path))?;
        self.plan_hash = Some(self.sealer.link(&bytes));
        Ok(())
    }

    /// The durable checkpoint: makes the logs durable, then replaces
    /// `state.json` (sealed in its integrity envelope) atomically, if the
    /// stored `state_version` is `expected`. The state never claims more
    /// than the logs hold.
    pub fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        compare_version(&self.run_id, self.stored_version, expected)?;
        let Some(plan_hash) = self.plan_hash.clone() else {
            return Err(serialize_error(&self.state_path, "a run's first checkpoint comes after its plan is stored"));
        };
        if let Durability::PerWrite = self.durability {
            self.history.sync().map_err(io_error("sync", &self.path))?;
            self.audit.sync().map_err(io_error("sync", &self.path))?;
        }
        let mut payload = serde_json::to_value(state).map_err(|error| serialize_error(&self.state_path, error))?;
        if let Value::Object(object) = &mut payload {
            object.insert("plan_hash".into(), json!(plan_hash));
            object.insert("history_hash".into(), json!(self.history.hash()));
        }
        write_sealed(&self.sealer, &self.state_path, payload, &mut self.state_buffer, &self.durability)?;
        if self.path != self.final_path {
            self.publish()?;
        }
        if let Durability::Group(commit) = &self.durability {
            commit.barrier().map_err(io_error("sync", &self.path))?;
        }
        self.stored_version = state.state_version;
        Ok(())
    }

    /// Renames the folder a new run was built in to `runs/<id>/`, never
    /// over an existing folder ([`StoreError::RunExists`]), and makes the
    /// rename durable.
    fn publish(&mut self) -> Result<(), StoreError> {
        let runs = self.final_path.parent().unwrap_or_else(|| Path::new("."));
        let exists = |error: rustix::io::Errno| {
            if error == rustix::io::Errno::EXIST || error == rustix::io::Errno::NOTEMPTY {
                StoreError::RunExists { id: self.run_id.clone(), path: runs.to_path_buf() }
            } else {
                StoreError::Io { action: "publish", path: self.final_path.clone(), source: error.into() }
            }
        };
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            &self.path,
            rustix::fs::CWD,
            &self.final_path,
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(exists)?;
        if let Durability::PerWrite = self.durability {
            fs::File::open(runs).and_then(|folder| folder.sync_all()).map_err(io_error("sync", runs))?;
        }
        self.path = self.final_path.clone();
        self.state_path = self.path.join("state.json");
        Ok(())
    }
}

/// Cuts `path` to its first `len` bytes (a crash tail past the head), if
/// it is longer, and makes that durable.
fn truncate_to(path: &Path, len: usize) -> Result<(), StoreError> {
    let file = OpenOptions::new().write(true).open(path).map_err(io_error("open", path))?;
    let size = file.metadata().map_err(io_error("read", path))?.len();
    if size > len as u64 {
        file.set_len(len as u64).map_err(io_error("truncate", path))?;
        file.sync_all().map_err(io_error("sync", path))?;
    }
    Ok(())
}

impl RunHandle for RunDir {
    fn run_id(&self) -> &str {
        &self.run_id
    }

    fn location(&self) -> &Path {
        // Where the run will be once it has a checkpoint (and is from then
        // on): the folder it is built in is not for messages.
        &self.final_path
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
    /// The history the checkpoint covers.
    pub history: Vec<StepRecord>,
    /// The audit events the checkpoint covers.
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
/// history, and where the covered history ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Heads {
    pub plan_hash: String,
    pub history_hash: Option<String>,
    /// Bytes of `history.jsonl` the checkpoint covers.
    pub history_len: usize,
}

/// Reads and verifies `runs/<run_id>/`: the envelope's digest (or HMAC),
/// strict JSON (no duplicate keys, no floats, no unknown fields), the state's
/// invariants, the audit log's sequence and hash chain up to the line the
/// checkpoint covers, the history chain up to the record it covers, the plan
/// copy's link, and that the state and the logs agree. Lines past the
/// checkpoint are a crash tail: counted, not returned. Any failure is
/// [`StoreError::Tampered`] or [`StoreError::Corrupt`] and nothing runs.
pub fn load_run(workspace: &Path, run_id: &str, sealer: &Sealer) -> Result<LoadedRun, StoreError> {
    let dir = runs_folder(workspace).join(run_id);
    if !dir.is_dir() {
        return Err(StoreError::NotFound { id: run_id.to_string(), path: runs_folder(workspace) });
    }
    let tampered = |reason: String| StoreError::Tampered { id: run_id.to_string(), reason };
    let read = |name: &str| {
        let path = dir.join(name);
        match fs::read_to_string(&path) {
            Ok(text) => Ok((path, text)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Err(tampered(format!("`{name}` is missing"))),
            Err(source) => Err(StoreError::Unreadable { id: run_id.to_string(), path, source }),
        }
    };
    let (_, state_text) = read("state.json")?;
    let payload = sealer.open(&state_text).map_err(|error| tampered(format!("`state.json`: {error}")))?;
    let Value::Object(mut payload) = payload else {
        return Err(tampered("`state.json`: the payload is not an object".to_string()));
    };
    let plan_hash = payload.remove(HEAD_FIELDS[0]);
    let history_hash = payload.remove(HEAD_FIELDS[1]);
    let (Some(Value::String(plan_hash)), Some(history_hash @ (Value::Null | Value::String(_)))) =
        (plan_hash, history_hash)
    else {
        return Err(tampered("`state.json`: `plan_hash` or `history_hash` is missing or invalid".to_string()));
    };
    let history_hash = history_hash.as_str().map(str::to_string);
    let state: RunState = serde_json::from_value(Value::Object(payload))
        .map_err(|error| tampered(format!("`state.json` payload: {error}")))?;
    if state.run_id != run_id {
        return Err(tampered(format!("`state.json` is for run `{}`", state.run_id)));
    }
    state.check_invariants().map_err(|reason| tampered(format!("`state.json`: impossible state: {reason}")))?;

    let (_, audit_text) = read("audit.jsonl")?;
    let files = LogFiles { state: "state.json", audit: "audit.jsonl" };
    let seen = (state.audit_seq, state.audit_hash.as_deref());
    let (audit, audit_tail) =
        verify_checkpointed_log(&audit_text, run_id, files, seen, sealer, true).map_err(tampered)?;

    let (plan_path, plan_text) = read("plan.json")?;
    if sealer.link(plan_text.as_bytes()) != plan_hash {
        return Err(tampered("`plan.json` is not the plan the run stored (its link does not match)".to_string()));
    }
    let plan: Value = serde_json::from_str(&plan_text).map_err(|error| StoreError::Corrupt {
        path: plan_path,
        line: error.line(),
        message: error.to_string(),
    })?;

    let (history_path, history_text) = read("history.jsonl")?;
    let covered_count = usize::try_from(state.counters.history_records).unwrap_or(usize::MAX);
    let covered: Vec<&str> = history_text.split_inclusive('\n').take(covered_count).collect();
    if covered.len() < covered_count || covered.last().is_some_and(|line| !line.ends_with('\n')) {
        return Err(tampered(format!(
            "`state.json` covers {covered_count} history records but `history.jsonl` holds fewer whole lines"
        )));
    }
    let lines: Vec<&str> = covered.iter().map(|line| line.trim_end_matches('\n')).collect();
    if history_chain(sealer, lines.iter().copied()) != history_hash {
        return Err(tampered(
            "`history.jsonl`: the records the checkpoint covers were changed (the history chain does not match)"
                .to_string(),
        ));
    }
    let history_len: usize = covered.iter().map(|line| line.len()).sum();
    let history = parse_lines::<StepRecord>(&history_path, &lines)?;
    let discarded_history = history_text[history_len..].split_inclusive('\n').count();
    let discarded_events = audit_tail.past_head;
    let heads = Heads { plan_hash, history_hash, history_len };
    Ok(LoadedRun { state, plan, history, audit, audit_tail, discarded_history, discarded_events, heads })
}

fn parse_lines<T: serde::de::DeserializeOwned>(path: &Path, lines: &[&str]) -> Result<Vec<T>, StoreError> {
    lines
        .iter()
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
