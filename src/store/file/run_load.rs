//! Reading an agent run's folder back, strictly: [`load_run`] (what it
//! returns, [`LoadedRun`], and the checks over the log's bytes are the
//! record format's: `records/run_log.rs`).
//!
//! Two layouts are read:
//!
//! - **the log layout** (this planrun writes it): `audit.jsonl` is the one
//!   durable record; its last *head line* (see `head.rs`) is the run's
//!   checkpoint, and the step records and the plan are in the head lines
//!   too. `history.jsonl` and `plan.json` are views, checked line by line
//!   against the log: a line that differs is tampering; a view that is
//!   behind the log (a power loss before the view reached the disk) is
//!   reported and repaired when the run is next opened for writing.
//!   `state.json`, when present, is the compact head written when the run
//!   paused or ended; it must be the checkpoint of the head line it names,
//!   and a newer head in the log is the head.
//! - **the previous layout** (runs recorded before the log held the
//!   checkpoints): `state.json` after every step, `state_saved` lines
//!   without a checkpoint. Read as before: `state.json` is the head, the
//!   history and the plan are checked against its `history_hash` and
//!   `plan_hash`. Opening such a run for writing continues it in the log
//!   layout: its first head line carries the plan and every step record
//!   before it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::store::records::audit::{LogFiles, verify_audit, verify_checkpointed_log};
use crate::store::records::head::{CHECKPOINT_KEY, split_payload};
use crate::store::records::history::history_chain;
use crate::store::records::run_log::{
    CheckedLog, Heads, Log, LogTexts, check_compact_head, check_log, check_state, read_log,
};
use crate::store::{AuditEvent, EnvelopeError, LoadedRun, Sealer, StepRecord, StoreError};
use crate::strict_json;

/// `<workspace>/runs`.
pub(crate) fn runs_folder(workspace: &Path) -> PathBuf {
    workspace.join("runs")
}

/// The folder a new run is built in until its first checkpoint publishes
/// it (`~` is never part of a run id).
pub(crate) fn creating_folder(workspace: &Path, run_id: &str) -> PathBuf {
    runs_folder(workspace).join(format!("{run_id}~new"))
}

/// Whether the log in `dir` holds a checkpoint line.
pub(crate) fn has_checkpoint(dir: &Path) -> bool {
    fs::read_to_string(dir.join("audit.jsonl")).is_ok_and(|text| text.contains(&format!("\"{CHECKPOINT_KEY}\":")))
}

/// Run `run_id` is not in `runs/`: a start killed before its first
/// checkpoint ([`StoreError::Interrupted`], saying what its folder holds,
/// with the whole lines of its log that verify) or no run at all
/// ([`StoreError::NotFound`]).
pub(crate) fn missing_run(workspace: &Path, run_id: &str, sealer: &Sealer) -> StoreError {
    let creating = creating_folder(workspace, run_id);
    if !creating.is_dir() {
        return StoreError::NotFound { id: run_id.to_string(), path: runs_folder(workspace) };
    }
    let text = fs::read_to_string(creating.join("audit.jsonl")).unwrap_or_default();
    let whole = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
    let torn = if whole.len() < text.len() { ", then a torn line" } else { "" };
    let (events, known) = match verify_audit(whole, sealer) {
        Ok((events, _)) if events.iter().any(|event| event.run_id != run_id) => {
            (Vec::new(), "its log is for another run".to_string())
        }
        Ok((events, _)) if events.is_empty() => (events, format!("its log holds no event{torn}")),
        Ok((events, _)) => {
            let names: Vec<&str> = events.iter().map(|event| event.event_type.as_str()).collect();
            let known = format!("its log holds {}{torn}", names.join(", "));
            (events, known)
        }
        Err(error) => (Vec::new(), format!("its log does not verify: {error}")),
    };
    StoreError::Interrupted { id: run_id.to_string(), path: runs_folder(workspace), known, events }
}

/// A record file of one run folder, read for verification.
struct RunFolder<'a> {
    dir: PathBuf,
    run_id: &'a str,
}

impl RunFolder<'_> {
    fn tampered(&self, reason: String) -> StoreError {
        StoreError::Tampered { id: self.run_id.to_string(), reason }
    }

    /// The text of `name`; `None` when it does not exist.
    fn read_optional(&self, name: &str) -> Result<Option<(PathBuf, String)>, StoreError> {
        let path = self.dir.join(name);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some((path, text))),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(StoreError::Unreadable { id: self.run_id.to_string(), path, source }),
        }
    }

    /// The text of `name`, which must exist.
    fn read(&self, name: &str) -> Result<(PathBuf, String), StoreError> {
        self.read_optional(name)?.ok_or_else(|| self.tampered(format!("`{name}` is missing")))
    }
}

/// Reads and verifies `runs/<run_id>/` (either layout, see the module
/// docs): seals (SHA-256, or HMAC-SHA256 under the key), strict JSON, the
/// state's invariants, the audit log's sequence and hash chain, the
/// history and the plan against the links the checkpoint holds, and that
/// every view agrees with the log. Lines past the checkpoint are a crash
/// tail: counted, not returned. Any failure is [`StoreError::Tampered`] or
/// [`StoreError::Corrupt`] and nothing runs.
pub fn load_run(workspace: &Path, run_id: &str, sealer: &Sealer) -> Result<LoadedRun, StoreError> {
    let mut dir = runs_folder(workspace).join(run_id);
    if !dir.is_dir() {
        // A start killed between its first checkpoint line and the
        // folder's publication: the log has a plan and a head (nothing ran
        // yet), so it is read as the run; opening it publishes it.
        let creating = creating_folder(workspace, run_id);
        if !has_checkpoint(&creating) {
            return Err(missing_run(workspace, run_id, sealer));
        }
        dir = creating;
    }
    let folder = RunFolder { dir, run_id };
    // `state.json` first: a writer writes it after the log lines it names,
    // so a log read after it holds them even while the run goes on.
    let compact = folder.read_optional("state.json")?.map(|(_, text)| text);
    // A key that is missing, or set for a run sealed without one, says so
    // before the log's links (which it makes differ) are checked.
    if let Some(text) = &compact
        && let Err(error @ (EnvelopeError::KeyMissing | EnvelopeError::Unauthenticated)) = sealer.open(text)
    {
        return Err(folder.tampered(format!("`state.json`: {error}")));
    }
    let (_, audit_text) = folder.read("audit.jsonl")?;
    match read_log(&audit_text, run_id, FILES.audit, sealer).map_err(|reason| folder.tampered(reason))? {
        Some(log) => load_logged(&folder, LogTexts { compact: compact.as_deref(), audit: &audit_text }, log, sealer),
        None => match compact {
            Some(state_text) => {
                load_previous_layout(&folder, LogTexts { compact: Some(&state_text), audit: &audit_text }, sealer)
            }
            None => Err(folder.tampered("`state.json` is missing".to_string())),
        },
    }
}

/// The names the file store's records go by, for messages.
const FILES: LogFiles = LogFiles { state: "state.json", audit: "audit.jsonl" };

/// A run in the log layout (see the module docs).
fn load_logged(
    folder: &RunFolder<'_>,
    texts: LogTexts<'_>,
    log: Log,
    sealer: &Sealer,
) -> Result<LoadedRun, StoreError> {
    let tampered = |reason: String| folder.tampered(reason);
    let checked = check_log(folder.run_id, FILES, &folder.dir.join(FILES.audit), log, sealer)?;
    let compact_seq = check_compact_head(folder.run_id, FILES, texts, &checked, sealer)?;
    let CheckedLog { events, tail, state, plan, history, lines, plan_hash, history_hash, .. } = checked;
    let state_behind = (state.status.is_paused() || state.status.is_terminal()) && compact_seq != Some(tail.seq);
    let (history_len, history_behind, discarded_history) = check_history_view(folder, &lines)?;
    let plan_behind = match folder.read_optional("plan.json")? {
        None => true,
        Some((_, text)) if text.is_empty() => true,
        Some((_, text)) if sealer.link(text.as_bytes()) == plan_hash => false,
        Some(_) => {
            return Err(tampered("`plan.json` is not the plan the run stored (its link does not match)".to_string()));
        }
    };
    let discarded_events = tail.past_head;
    let heads = Heads { plan_hash, history_hash, history_len, logged: true, history_behind, plan_behind, state_behind };
    Ok(LoadedRun { state, plan, history, audit: events, audit_tail: tail, discarded_history, discarded_events, heads })
}

/// Checks `history.jsonl` against the covered records (`lines`, as the
/// view writes them): every line it holds must be the record's line; a
/// view that ends early (or with a torn prefix of the next line) is
/// behind. Returns the bytes of the matching lines, how many records it
/// lacks and how many lines it holds past the covered ones (a crash tail).
fn check_history_view(folder: &RunFolder<'_>, lines: &[String]) -> Result<(usize, usize, usize), StoreError> {
    let text = folder.read_optional("history.jsonl")?.map(|(_, text)| text).unwrap_or_default();
    let mut matched = 0;
    let mut matched_len = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let Some(expected) = lines.get(index) else { break };
        match line.strip_suffix('\n') {
            Some(whole) if whole == expected.as_str() => {
                matched += 1;
                matched_len += line.len();
            }
            None if expected.starts_with(line) => break,
            _ => {
                return Err(folder.tampered(format!(
                    "`history.jsonl` line {}: not the step record the log holds (it was changed)",
                    index + 1
                )));
            }
        }
    }
    let past = if matched == lines.len() { text[matched_len..].split_inclusive('\n').count() } else { 0 };
    Ok((matched_len, lines.len() - matched, past))
}

/// A run recorded in the previous layout: `state.json` after every step is
/// the head (as that layout was read).
fn load_previous_layout(folder: &RunFolder<'_>, texts: LogTexts<'_>, sealer: &Sealer) -> Result<LoadedRun, StoreError> {
    let tampered = |reason: String| folder.tampered(reason);
    let LogTexts { compact, audit: audit_text } = texts;
    let state_text = compact.unwrap_or_default();
    let payload = sealer.open(state_text).map_err(|error| tampered(format!("`state.json`: {error}")))?;
    let Value::Object(payload) = payload else {
        return Err(tampered("`state.json`: the payload is not an object".to_string()));
    };
    let (state, plan_hash, history_hash) =
        split_payload(payload).map_err(|reason| tampered(format!("`state.json`: {reason}")))?;
    check_state(folder.run_id, &state, "`state.json`")?;

    let files = FILES;
    let seen = (state.audit_seq, state.audit_hash.as_deref());
    let (audit, audit_tail) =
        verify_checkpointed_log(audit_text, folder.run_id, files, seen, sealer, true).map_err(tampered)?;

    let (plan_path, plan_text) = folder.read("plan.json")?;
    if sealer.link(plan_text.as_bytes()) != plan_hash {
        return Err(tampered("`plan.json` is not the plan the run stored (its link does not match)".to_string()));
    }
    let plan: Value = strict_json::parse(&plan_text).map_err(|error| StoreError::Corrupt {
        path: plan_path,
        line: error.line(),
        message: error.to_string(),
    })?;

    let (history_path, history_text) = folder.read("history.jsonl")?;
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
    let heads = Heads { plan_hash, history_hash, history_len, ..Heads::default() };
    Ok(LoadedRun { state, plan, history, audit, audit_tail, discarded_history, discarded_events, heads })
}

fn parse_lines<T: serde::de::DeserializeOwned>(path: &Path, lines: &[&str]) -> Result<Vec<T>, StoreError> {
    lines
        .iter()
        .enumerate()
        .map(|(index, line)| {
            strict_json::from_str(line).map_err(|error| StoreError::Corrupt {
                path: path.to_path_buf(),
                line: index + 1,
                message: error.to_string(),
            })
        })
        .collect()
}

/// The time a run started, for listing: from `state.json`, or (a run
/// going on in the log layout has none yet) from the first head line.
pub(crate) fn run_started_at(dir: &Path, sealer: &Sealer) -> Option<String> {
    let from_state = fs::read_to_string(dir.join("state.json"))
        .ok()
        .and_then(|text| sealer.open(&text).ok())
        .and_then(|payload| payload.get("started_at").and_then(Value::as_str).map(str::to_string));
    if from_state.is_some() {
        return from_state;
    }
    // The first head line is the third of a new run's log: read up to it,
    // not the whole log.
    let log = io::BufReader::new(fs::File::open(dir.join("audit.jsonl")).ok()?);
    let marker = format!("\"{CHECKPOINT_KEY}\":");
    let line = io::BufRead::lines(log).map_while(Result::ok).find(|line| line.contains(&marker))?;
    let event: AuditEvent = strict_json::from_str(&line).ok()?;
    event.details.get(CHECKPOINT_KEY)?.get("state")?.get("started_at")?.as_str().map(str::to_string)
}
