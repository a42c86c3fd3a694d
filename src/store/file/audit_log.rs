//! `audit.jsonl` as the file store writes it: [`AuditLog`] appends each
//! event's line (the record format's, `records/audit.rs`) with one `write`.

use std::fs::File;
use std::io::{self, Write};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::store::records::audit::{EventColumns, LineRef, write_line};
use crate::store::{AuditTail, Sealer};

/// The open log. Each event is written with one `write` call as soon as it
/// happens; [`AuditLog::sync`] makes everything written so far durable and
/// runs before every checkpoint.
pub struct AuditLog {
    file: File,
    seq: u64,
    last_hash: Option<String>,
    line: Vec<u8>,
    sealer: Sealer,
}

impl AuditLog {
    pub(crate) fn new(file: File, sealer: Sealer) -> Self {
        AuditLog { file, seq: 0, last_hash: None, line: Vec::with_capacity(512), sealer }
    }

    /// Continues a verified log.
    pub(crate) fn resume(file: File, tail: &AuditTail, sealer: Sealer) -> Self {
        AuditLog { file, seq: tail.seq, last_hash: tail.hash.clone(), line: Vec::with_capacity(512), sealer }
    }

    /// `seq` of the last event written (0 before the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Hash of the last line written.
    pub fn last_hash(&self) -> Option<&str> {
        self.last_hash.as_deref()
    }

    /// Appends an event and returns its `seq`.
    pub fn append(
        &mut self,
        ts: String,
        run_id: &str,
        event_type: &str,
        step_id: Option<&str>,
        status: Option<&str>,
        details: Map<String, Value>,
    ) -> io::Result<u64> {
        self.append_line(&ts, run_id, EventColumns { event_type, step_id, status }, &details, false)
    }

    /// Appends a head line: an event that ends with its own `seal`.
    pub(crate) fn append_sealed(
        &mut self,
        ts: &str,
        run_id: &str,
        columns: EventColumns<'_>,
        details: &impl Serialize,
    ) -> io::Result<u64> {
        self.append_line(ts, run_id, columns, details, true)
    }

    fn append_line(
        &mut self,
        ts: &str,
        run_id: &str,
        columns: EventColumns<'_>,
        details: &impl Serialize,
        sealed: bool,
    ) -> io::Result<u64> {
        let EventColumns { event_type, step_id, status } = columns;
        let event = LineRef {
            seq: self.seq + 1,
            ts,
            run_id,
            event_type,
            step_id,
            status,
            details,
            prev_hash: self.last_hash.as_deref(),
        };
        write_line(&mut self.line, &event, sealed, &self.sealer)?;
        let hash = self.sealer.link(&self.line);
        self.line.push(b'\n');
        self.file.write_all(&self.line)?;
        self.seq += 1;
        self.last_hash = Some(hash);
        Ok(self.seq)
    }

    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::audit::{AuditError, check_seal, verify_audit, verify_head};

    fn columns<'a>(event_type: &'a str, status: Option<&'a str>) -> EventColumns<'a> {
        EventColumns { event_type, step_id: None, status }
    }

    fn log_text() -> String {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.jsonl");
        let file = std::fs::OpenOptions::new().append(true).create(true).open(&path).expect("open");
        let mut log = AuditLog::new(file, Sealer::plain());
        for event in ["run_started", "state_saved", "run_finished"] {
            log.append("2026-01-01T00:00:00Z".into(), "r", event, None, Some("ok"), Map::new()).expect("append");
        }
        std::fs::read_to_string(&path).expect("read")
    }

    #[test]
    fn an_intact_log_verifies_and_its_tail_is_the_last_line() {
        let text = log_text();
        let (events, tail) = verify_audit(&text, &Sealer::plain()).expect("valid log");
        assert_eq!(events.len(), 3);
        assert_eq!(tail.seq, 3);
        let last = text.lines().last().unwrap_or("").as_bytes();
        assert_eq!(tail.hash.as_deref(), Some(crate::digest::sha256_hex(last).as_str()));
        assert_eq!(events[0].prev_hash, None);
    }

    #[test]
    fn a_keyed_chain_is_refused_without_its_key_and_a_tail_past_the_head_is_ignored() {
        let text = log_text();
        assert!(matches!(verify_audit(&text, &Sealer::keyed(b"k".to_vec())), Err(AuditError::Chain { line: 2 })));
        let lines: Vec<&str> = text.lines().collect();
        let torn = format!("{text}{{torn");
        let (events, verified) = verify_head(&torn, 2, &Sealer::plain()).expect("head verifies");
        let head_len = lines[0].len() + lines[1].len() + 2;
        assert_eq!((events.len(), verified.seq, verified.past_head, verified.head_len), (2, 2, 2, head_len));
        let forged = format!("{text}{{\"forged\": true}}\n");
        assert!(matches!(verify_head(&forged, 3, &Sealer::plain()), Err(AuditError::Invalid { line: 4, .. })));
        let dropped = format!("{}\n{}\n", lines[0], lines[2]);
        assert!(matches!(verify_head(&dropped, 1, &Sealer::plain()), Err(AuditError::Sequence { line: 2, .. })));
        assert!(verify_head(&text, 4, &Sealer::plain()).is_err(), "a head past the log is refused");
    }

    #[test]
    fn a_sealed_line_vouches_for_itself() {
        for sealer in [Sealer::plain(), Sealer::keyed(b"k".to_vec())] {
            let dir = tempfile::tempdir().expect("temp dir");
            let path = dir.path().join("audit.jsonl");
            let file = std::fs::OpenOptions::new().append(true).create(true).open(&path).expect("open");
            let mut log = AuditLog::new(file, sealer.clone());
            log.append("t".into(), "r", "run_started", None, None, Map::new()).expect("append");
            log.append_sealed("t", "r", columns("state_saved", Some("ok")), &Map::new()).expect("head");
            let text = std::fs::read_to_string(&path).expect("read");
            let (events, tail) = verify_audit(&text, &sealer).expect("valid log");
            assert!(events[1].seal.is_some() && events[0].seal.is_none());
            let head = text.lines().nth(1).expect("head");
            assert_eq!(tail.hash.as_deref(), Some(sealer.link(head.as_bytes()).as_str()));
            assert_eq!(check_seal(head, &sealer), Some(true), "{sealer:?}");
            assert_eq!(check_seal(text.lines().next().expect("line"), &sealer), None);
            assert_eq!(check_seal(&head.replace("\"ok\"", "\"OK\""), &sealer), Some(false), "{sealer:?}");
        }
        let keyed = Sealer::keyed(b"k".to_vec());
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.jsonl");
        let file = std::fs::OpenOptions::new().append(true).create(true).open(&path).expect("open");
        let mut log = AuditLog::new(file, Sealer::plain());
        log.append_sealed("t", "r", columns("state_saved", None), &Map::new()).expect("head");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(check_seal(text.trim_end(), &keyed), Some(false), "a plain seal is not a keyed one");
    }

    #[test]
    fn edits_removals_reorderings_and_torn_lines_are_detected() {
        let text = log_text();
        let verify_audit = |text: &str| verify_audit(text, &Sealer::plain());
        let lines: Vec<&str> = text.lines().collect();
        let edited = text.replace("state_saved", "state_SAVED");
        assert!(matches!(verify_audit(&edited), Err(AuditError::Chain { line: 3 })));
        let removed = format!("{}\n{}\n", lines[0], lines[2]);
        assert!(matches!(verify_audit(&removed), Err(AuditError::Sequence { line: 2, .. })));
        let torn = &text[..text.len() - 5];
        assert!(matches!(verify_audit(torn), Err(AuditError::TornLine { line: 3 })));
        let garbage = format!("{text}{{not json\n");
        assert!(matches!(verify_audit(&garbage), Err(AuditError::Invalid { line: 4, .. })));
    }
}
