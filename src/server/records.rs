//! Bridge and controller records in `<workspace>/bridge/runs/<id>/`.
//!
//! A record folder is created with `create_dir`, which fails when the folder
//! exists, so two requests can never share (or clobber) one. The state file
//! (`state.json` for bridge runs, `controller_state.json` for controller
//! runs) is replaced atomically; the audit log (`audit.jsonl`,
//! `controller_audit.jsonl`) is appended one line per event, never rewritten.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::store::write_atomic;

/// The folder holding every bridge and controller record folder.
pub fn records_root(workspace: &Path) -> PathBuf {
    workspace.join("bridge").join("runs")
}

/// An I/O failure on a record file, naming the path.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} `{}`: {source}", path.display())]
pub struct RecordError {
    pub action: &'static str,
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl RecordError {
    fn new<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RecordError + 'a {
        move |source| RecordError { action, path: path.to_path_buf(), source }
    }

    /// Whether the folder already existed (the id is taken).
    pub fn is_taken(&self) -> bool {
        self.source.kind() == io::ErrorKind::AlreadyExists
    }
}

/// One line of an audit log. Field order is the file's column order.
#[derive(Debug, Serialize)]
struct AuditLine<'a> {
    seq: u64,
    ts: &'a str,
    run_id: &'a str,
    event_type: &'a str,
    status: Option<&'a str>,
    details: &'a Map<String, Value>,
}

/// An open record folder: its state file and its audit log.
pub struct RecordDir {
    pub path: PathBuf,
    run_id: String,
    state_name: &'static str,
    audit_path: PathBuf,
    audit: File,
    seq: u64,
}

impl RecordDir {
    /// Creates `<root>/<run_id>/` (failing when it exists) with an empty
    /// audit log named `audit_name`.
    pub fn create(
        root: &Path,
        run_id: &str,
        state_name: &'static str,
        audit_name: &'static str,
    ) -> Result<RecordDir, RecordError> {
        fs::create_dir_all(root).map_err(RecordError::new("create", root))?;
        let path = root.join(run_id);
        fs::create_dir(&path).map_err(RecordError::new("create", &path))?;
        let audit_path = path.join(audit_name);
        let audit = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&audit_path)
            .map_err(RecordError::new("create", &audit_path))?;
        Ok(RecordDir { path, run_id: run_id.to_string(), state_name, audit_path, audit, seq: 0 })
    }

    /// Opens the existing record folder `<root>/<run_id>/` to append to its
    /// audit log, numbering on from the log's last line. The caller must be
    /// the folder's only writer (see [`crate::server::approvals`]).
    pub fn open(
        root: &Path,
        run_id: &str,
        state_name: &'static str,
        audit_name: &'static str,
    ) -> Result<RecordDir, RecordError> {
        let path = root.join(run_id);
        let audit_path = path.join(audit_name);
        let text = fs::read_to_string(&audit_path).map_err(RecordError::new("read", &audit_path))?;
        let seq = match text.lines().rev().find(|line| !line.trim().is_empty()) {
            None => 0,
            Some(line) => serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|event| event.get("seq").and_then(Value::as_u64))
                .ok_or_else(|| RecordError {
                    action: "parse",
                    path: audit_path.clone(),
                    source: io::Error::new(io::ErrorKind::InvalidData, "the last line has no `seq`"),
                })?,
        };
        let audit = OpenOptions::new().append(true).open(&audit_path).map_err(RecordError::new("open", &audit_path))?;
        Ok(RecordDir { path, run_id: run_id.to_string(), state_name, audit_path, audit, seq })
    }

    /// Appends one event to the audit log.
    pub fn event(
        &mut self,
        ts: &str,
        event_type: &str,
        status: Option<&str>,
        details: Map<String, Value>,
    ) -> Result<(), RecordError> {
        let line = AuditLine { seq: self.seq + 1, ts, run_id: &self.run_id, event_type, status, details: &details };
        let mut bytes = serde_json::to_vec(&line).map_err(|error| RecordError {
            action: "encode",
            path: self.audit_path.clone(),
            source: io::Error::other(error),
        })?;
        bytes.push(b'\n');
        self.audit.write_all(&bytes).map_err(RecordError::new("append to", &self.audit_path))?;
        self.seq += 1;
        Ok(())
    }

    /// Replaces the state file with `state`, pretty-printed.
    pub fn save<T: Serialize>(&self, state: &T) -> Result<(), RecordError> {
        let path = self.path.join(self.state_name);
        let mut bytes = serde_json::to_vec_pretty(state).map_err(|error| RecordError {
            action: "encode",
            path: path.clone(),
            source: io::Error::other(error),
        })?;
        bytes.push(b'\n');
        self.audit.sync_data().map_err(RecordError::new("sync", &self.audit_path))?;
        write_atomic(&path, &bytes).map_err(RecordError::new("write", &path))
    }
}

/// Reads a state file of a record folder; `Ok(None)` when it does not exist.
pub fn read_state(root: &Path, run_id: &str, state_name: &str) -> Result<Option<Value>, RecordError> {
    let path = root.join(run_id).join(state_name);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|error| RecordError {
            action: "parse",
            path,
            source: io::Error::new(io::ErrorKind::InvalidData, error),
        }),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RecordError { action: "read", path, source }),
    }
}

/// Reads a state file into `T`; `Ok(None)` when it does not exist.
pub fn read_state_as<T: DeserializeOwned>(
    root: &Path,
    run_id: &str,
    state_name: &str,
) -> Result<Option<T>, RecordError> {
    let Some(value) = read_state(root, run_id, state_name)? else {
        return Ok(None);
    };
    serde_json::from_value(value).map(Some).map_err(|error| RecordError {
        action: "parse",
        path: root.join(run_id).join(state_name),
        source: io::Error::new(io::ErrorKind::InvalidData, error),
    })
}

/// Builds the `details` object of an event from `(key, value)` pairs.
pub fn details<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(key, value)| (key.to_string(), value)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_folder_is_never_created_twice() {
        let temp = tempfile::tempdir().expect("temp dir");
        let root = records_root(temp.path());
        let mut first = RecordDir::create(&root, "br-0001", "state.json", "audit.jsonl").expect("create");
        first.event("t0", "run_created", Some("created"), details([("goal", json!("g"))])).expect("event");
        first.event("t1", "run_finished", Some("done"), Map::new()).expect("event");
        first.save(&json!({"status": "done"})).expect("save");
        let second = RecordDir::create(&root, "br-0001", "state.json", "audit.jsonl");
        assert!(second.as_ref().err().is_some_and(RecordError::is_taken));
        let audit = fs::read_to_string(root.join("br-0001/audit.jsonl")).expect("audit");
        assert_eq!(
            audit,
            "{\"seq\":1,\"ts\":\"t0\",\"run_id\":\"br-0001\",\"event_type\":\"run_created\",\"status\":\"created\",\"details\":{\"goal\":\"g\"}}\n\
             {\"seq\":2,\"ts\":\"t1\",\"run_id\":\"br-0001\",\"event_type\":\"run_finished\",\"status\":\"done\",\"details\":{}}\n"
        );
        let state = read_state(&root, "br-0001", "state.json").expect("read");
        assert_eq!(state, Some(json!({"status": "done"})));
        assert!(read_state(&root, "br-0002", "state.json").expect("read").is_none());
        drop(first);
        let mut reopened = RecordDir::open(&root, "br-0001", "state.json", "audit.jsonl").expect("open");
        reopened.event("t2", "run_resumed", Some("running"), Map::new()).expect("event");
        let audit = fs::read_to_string(root.join("br-0001/audit.jsonl")).expect("audit");
        assert!(audit.ends_with(
            "{\"seq\":3,\"ts\":\"t2\",\"run_id\":\"br-0001\",\"event_type\":\"run_resumed\",\"status\":\"running\",\"details\":{}}\n"
        ));
        assert!(RecordDir::open(&root, "br-0404", "state.json", "audit.jsonl").is_err());
    }
}
