//! `audit.jsonl`: the append-only, hash-chained event log.
//!
//! Every line carries `prev_hash`, the link of the previous line's bytes
//! (without its newline; `null` on the first line): SHA-256, or
//! HMAC-SHA256 under `PLANRUN_HMAC_KEY` ([`Sealer::link`]), so a removed,
//! reordered or edited line breaks the chain, and with the key nobody
//! without it can write a line that continues the chain. The checkpoint (the
//! sealed head) records the `seq` and link of the last line it covers and is
//! written after that line; an agent run's lines past the head are a crash
//! tail ([`verify_head`]): counted, never trusted.
//!
//! An agent run's log is its one durable record: a checkpoint is a *head
//! line* (see `run_dir.rs`) whose details carry the checkpoint, and which
//! ends with its own `seal` (the link of the line written without it), so
//! that the last line of the log, which no later `prev_hash` protects yet,
//! cannot be edited without the key either ([`check_seal`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::store::Sealer;

/// One line of `audit.jsonl`. Field order is the file's column order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    /// 1-based, one more per line, never reused.
    pub seq: u64,
    pub ts: String,
    pub run_id: String,
    pub event_type: String,
    pub step_id: Option<String>,
    pub status: Option<String>,
    pub details: Map<String, Value>,
    /// Link (SHA-256 or HMAC) of the previous line; `null` on the first line.
    pub prev_hash: Option<String>,
    /// On a head line only: the link of the line's bytes without this
    /// field (the last field, so the line without it is the line with
    /// `,"seal":"…"` cut out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
}

/// An [`AuditEvent`] as its line is written, borrowed: the same fields in
/// the same order (no `seal`: [`write_line`] splices it in), with any
/// `details` that serialize as a map (a head line's borrow the checkpoint
/// they carry: `head.rs`).
/// The columns of an event besides its details: `event_type`, `step_id`,
/// `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventColumns<'a> {
    pub event_type: &'a str,
    pub step_id: Option<&'a str>,
    pub status: Option<&'a str>,
}

#[derive(Serialize)]
pub(crate) struct LineRef<'a, D: Serialize> {
    pub seq: u64,
    pub ts: &'a str,
    pub run_id: &'a str,
    pub event_type: &'a str,
    pub step_id: Option<&'a str>,
    pub status: Option<&'a str>,
    pub details: D,
    pub prev_hash: Option<&'a str>,
}

/// `,"seal":"` + 64 hex digits + `"}`: how a sealed line ends.
const SEAL_MARK: &str = ",\"seal\":\"";
const SEAL_SUFFIX_LEN: usize = SEAL_MARK.len() + 64 + 2;

/// Whether `line` (without its newline) ends with a seal that is the link
/// of the line without it. `None` when the line carries no seal.
pub(crate) fn check_seal(line: &str, sealer: &Sealer) -> Option<bool> {
    let start = line.len().checked_sub(SEAL_SUFFIX_LEN)?;
    let suffix = line.get(start..)?;
    let hex = suffix.strip_prefix(SEAL_MARK)?.strip_suffix("\"}")?;
    if hex.len() != 64 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    let mut unsealed = line.as_bytes()[..start].to_vec();
    unsealed.push(b'}');
    let expected = sealer.link(&unsealed);
    Some(expected.len() == hex.len() && expected.bytes().zip(hex.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0)
}

/// Writes `event` as its log line (without the newline) into `line`,
/// ending with its own `seal` when `sealed` (a head line). The file store's
/// log and the PostgreSQL store's rows hold these same bytes.
pub(crate) fn write_line(
    line: &mut Vec<u8>,
    event: &impl Serialize,
    sealed: bool,
    sealer: &Sealer,
) -> serde_json::Result<()> {
    line.clear();
    serde_json::to_writer(&mut *line, event)?;
    if sealed {
        // The seal is the line's last field: the link of the line
        // without it, spliced in before the closing brace.
        let seal = sealer.link(line);
        line.pop();
        line.extend_from_slice(SEAL_MARK.as_bytes());
        line.extend_from_slice(seal.as_bytes());
        line.extend_from_slice(b"\"}");
    }
    Ok(())
}

/// Why an audit log was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    #[error("line {line} is torn (the file does not end with a newline): the process was interrupted mid-write")]
    TornLine { line: usize },
    #[error("line {line} is not a valid audit event: {message}")]
    Invalid { line: usize, message: String },
    #[error("line {line} has `seq` {found}, expected {expected}")]
    Sequence { line: usize, found: u64, expected: u64 },
    #[error("line {line} breaks the hash chain: its `prev_hash` is not the hash of line {}", line - 1)]
    Chain { line: usize },
    #[error("the checkpoint covers line {head} but the log ends at line {last}")]
    EndsBefore { head: u64, last: u64 },
}

/// What a verified log ends with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditTail {
    /// `seq` of the last line (0 for an empty log).
    pub seq: u64,
    /// Hash of the last line (`None` for an empty log).
    pub hash: Option<String>,
    /// Hash of every line, by `seq - 1`, so a checkpoint's `audit_seq` can
    /// be checked against its `audit_hash`.
    pub hashes: Vec<String>,
    /// Lines past the checkpoint's head (a crash tail): not verified, not
    /// returned, never trusted. Always 0 for [`verify_audit`].
    pub past_head: u64,
    /// Bytes of the file up to and including the head line.
    pub head_len: usize,
}

/// Verifies a whole log: every line parses, `seq` counts 1, 2, 3, … and the
/// hash chain is unbroken; a last line without its newline is torn.
pub fn verify_audit(text: &str, sealer: &Sealer) -> Result<(Vec<AuditEvent>, AuditTail), AuditError> {
    let line_count = text.split_terminator('\n').count();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(AuditError::TornLine { line: line_count });
    }
    verify_lines(text, sealer)
}

/// Verifies lines `1..=head` of an agent run's log strictly (as
/// [`verify_audit`]); what follows is the crash tail, counted in
/// [`AuditTail::past_head`] and never returned. A crash leaves a tail that
/// continues the chain (its last line may be torn); a tail whose whole
/// lines break it was edited or forged and is refused. Under a key nobody
/// without it can append a line that continues the chain.
pub fn verify_head(text: &str, head: u64, sealer: &Sealer) -> Result<(Vec<AuditEvent>, AuditTail), AuditError> {
    let head_len: usize =
        text.split_inclusive('\n').take(usize::try_from(head).unwrap_or(usize::MAX)).map(str::len).sum();
    let (covered, rest) = text.split_at(head_len);
    let whole = covered.split_terminator('\n').count() as u64;
    if !covered.is_empty() && !covered.ends_with('\n') {
        return Err(AuditError::TornLine { line: whole as usize });
    }
    if whole < head {
        return Err(AuditError::EndsBefore { head, last: whole });
    }
    let (events, mut tail) = verify_lines(covered, sealer)?;
    // A torn last line is what a crash mid-write leaves; the whole lines
    // before it must continue the chain.
    let whole_tail = &rest[..rest.rfind('\n').map_or(0, |end| end + 1)];
    continue_chain(whole_tail, sealer, tail.clone(), whole as usize + 1, &mut Vec::new())?;
    tail.past_head = rest.split_inclusive('\n').count() as u64;
    Ok((events, tail))
}

fn verify_lines(text: &str, sealer: &Sealer) -> Result<(Vec<AuditEvent>, AuditTail), AuditError> {
    let mut events = Vec::new();
    let start = AuditTail { head_len: text.len(), ..AuditTail::default() };
    let tail = continue_chain(text, sealer, start, 1, &mut events)?;
    Ok((events, tail))
}

/// Verifies the lines of `text` as the continuation of a chain that ends
/// at `tail`, the first of them being line `first`; pushes their events.
fn continue_chain(
    text: &str,
    sealer: &Sealer,
    mut tail: AuditTail,
    first: usize,
    events: &mut Vec<AuditEvent>,
) -> Result<AuditTail, AuditError> {
    for (index, line) in text.split_terminator('\n').enumerate() {
        let number = index + first;
        let event: AuditEvent = crate::strict_json::from_str(line)
            .map_err(|error| AuditError::Invalid { line: number, message: error.to_string() })?;
        let expected = tail.seq + 1;
        if event.seq != expected {
            return Err(AuditError::Sequence { line: number, found: event.seq, expected });
        }
        if event.prev_hash != tail.hash {
            return Err(AuditError::Chain { line: number });
        }
        let hash = sealer.link(line.as_bytes());
        tail.seq = event.seq;
        tail.hashes.push(hash.clone());
        tail.hash = Some(hash);
        events.push(event);
    }
    Ok(tail)
}

/// The file names a checkpoint and its log go by, for messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogFiles {
    pub state: &'static str,
    pub audit: &'static str,
}

/// Verifies the log of `id` (see [`verify_audit`]), that every line is for
/// `id`, and that a checkpoint which has seen line `seen_seq` with hash
/// `seen_hash` agrees with it: the checkpoint never claims more than the
/// log holds, and the line it names is the line the log has. The error is
/// the reason, for [`crate::store::StoreError::Tampered`].
pub(crate) fn verify_checkpointed_log(
    text: &str,
    id: &str,
    files: LogFiles,
    seen: (u64, Option<&str>),
    sealer: &Sealer,
    head_only: bool,
) -> Result<(Vec<AuditEvent>, AuditTail), String> {
    let LogFiles { state, audit: log } = files;
    let (seen_seq, seen_hash) = seen;
    let verified = if head_only { verify_head(text, seen_seq, sealer) } else { verify_audit(text, sealer) };
    let (audit, tail) = verified.map_err(|error| match error {
        AuditError::EndsBefore { head, last } => {
            format!("`{state}` has seen audit line {head} but `{log}` ends at line {last}")
        }
        error => format!("`{log}`: {error}"),
    })?;
    if let Some(event) = audit.iter().find(|event| event.run_id != id) {
        return Err(format!("`{log}` line {} is for run `{}`", event.seq, event.run_id));
    }
    if seen_seq > tail.seq {
        return Err(format!("`{state}` has seen audit line {seen_seq} but `{log}` ends at line {}", tail.seq));
    }
    let line_hash = seen_seq.checked_sub(1).and_then(|index| tail.hashes.get(index as usize)).map(String::as_str);
    if line_hash != seen_hash {
        return Err(format!("`{state}` and `{log}` disagree about audit line {seen_seq}"));
    }
    Ok((audit, tail))
}
