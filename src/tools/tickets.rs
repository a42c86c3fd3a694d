//! The demo ticket system: `ticket_lookup` and
//! `ticket_close` over `<workspace>/tickets.json`.
//!
//! ```json
//! {"tickets": {"ticket-7": {"status": "open", "customer_note": "…", "close_count": 0}}}
//! ```
//!
//! `customer_note` is text a customer wrote: untrusted. A look-up returns it
//! only inside `output_json` (marked in `untrusted_fields`), never in
//! `output_text`, and nothing in the runtime lets it choose a tool or a
//! target. `close_count` counts closes really applied: the evidence that
//! idempotency held.
//!
//! Two optional top-level fields, omitted when absent (a file without them
//! is the demo's documented format, byte for byte):
//!
//! - `"fail_next_lookups": N` — fault injection for tests: each of the next
//!   N look-ups (`ticket_lookup` steps and `ticket_status` verify checks)
//!   fails with `execution_error`, which the retry policy retries, and
//!   decrements N in the same atomic write of the file; the field goes when
//!   it reaches 0. Anything but a non-negative integer is an
//!   `invalid_tool_result`.
//! - `"receipts": {"<idempotency key>": {"intent_digest": "…", "result":
//!   {"output_text": "…", "output_json": {…}}}}` — the receipts the ticket
//!   system itself vouches for. [`close_with_receipt`] writes the close and
//!   its receipt in ONE atomic replacement of the file, so no crash can leave
//!   one without the other; a second call with the same key and intent
//!   returns the kept result without closing again, another intent is an
//!   `idempotency_conflict`. [`receipt_for`] is the query a recovery asks
//!   after a crash ("was key K applied, and with which result?"); it
//!   validates the receipt's shape before handing it out. The runtime's
//!   keyed closes go through [`close_with_receipt`], and its recovery asks
//!   [`receipt_for`] before its own note in `.planrun/receipts/`.
//!
//! A look-up or close of a ticket that does not exist is `not_found`: the
//! answer is definite, so it is never retried.
//!
//! Many runs may use one workspace's ticket system at once (the service's
//! concurrent runs, several workers on one machine): each look-up and
//! close reads, changes and replaces the whole file, so each holds an
//! exclusive `flock` on the workspace folder from its read to its write
//! (`Exclusive`); without it two closes of different tickets could each
//! write the file the other had not seen, and one close would be lost.

use serde_json::{Map, Value, json};

use crate::confine::Workspace;
use crate::model::FailureClass;
use crate::strict_json;
use crate::tools::{FileError, ToolFailure, ToolSuccess, WriteSync, read_file, write_file};

/// The file the ticket tools use, relative to the workspace.
pub const TICKETS_FILE: &str = "tickets.json";

/// The fault-injection field of [`TICKETS_FILE`] (see the module docs).
pub const FAIL_NEXT_LOOKUPS: &str = "fail_next_lookups";

/// The receipts field of [`TICKETS_FILE`] (see the module docs).
pub const RECEIPTS: &str = "receipts";

/// A receipt the ticket system keeps for a keyed close.
#[derive(Debug, Clone, PartialEq)]
pub struct TicketReceipt {
    pub key: String,
    /// The caller's digest of what the keyed step intended.
    pub intent_digest: String,
    /// `{"output_text": …, "output_json": …}` of the close, as it returned.
    pub result: Value,
}

/// One ticket, validated: exact fields, expected primitive types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub status: String,
    pub customer_note: String,
    pub close_count: u64,
}

/// The ticket system held by one caller: an exclusive `flock` on a fresh
/// descriptor of the workspace folder (a lock is per open file, so each
/// caller opens its own), released when dropped. Readers that only read
/// need none: the file is replaced atomically.
struct Exclusive {
    _folder: std::fs::File,
}

impl Exclusive {
    fn take(workspace: &Workspace) -> Result<Exclusive, ToolFailure> {
        let unavailable = |error: std::io::Error| ToolFailure {
            class: FailureClass::ExecutionError,
            message: format!("ticket system unavailable: cannot lock the workspace folder: {error}"),
            output_text: String::new(),
        };
        // The folder opened for reading (the workspace's own handle is a
        // path descriptor, which cannot be locked).
        let folder = std::fs::File::open(workspace.root()).map_err(unavailable)?;
        rustix::fs::flock(&folder, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|error| unavailable(error.into()))?;
        Ok(Exclusive { _folder: folder })
    }
}

fn invalid(message: String) -> ToolFailure {
    ToolFailure { class: FailureClass::InvalidToolResult, message, output_text: String::new() }
}

fn load(workspace: &Workspace, max_bytes: u64) -> Result<Map<String, Value>, ToolFailure> {
    let text = read_file(workspace, TICKETS_FILE, max_bytes).map_err(|error| ToolFailure {
        class: error.class(),
        message: format!("ticket system unavailable: {error}"),
        output_text: String::new(),
    })?;
    match strict_json::parse(&text) {
        Ok(Value::Object(root)) => Ok(root),
        Ok(_) => Err(invalid(format!("`{TICKETS_FILE}` is not an object"))),
        Err(error) => Err(invalid(format!("`{TICKETS_FILE}` is not strict JSON: {error}"))),
    }
}

/// Replaces the whole file in one atomic write (temp file, fsync, rename):
/// whatever `root` holds is all applied or none of it is.
fn save(workspace: &Workspace, root: Map<String, Value>, max_bytes: u64) -> Result<(), FileError> {
    let mut text = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
    text.push('\n');
    write_file(workspace, TICKETS_FILE, &text, max_bytes, WriteSync::Own).map(|_| ())
}

/// Spends one injected look-up failure, if any are left: the decremented
/// count is written back before the failure is reported.
fn injected_failure(workspace: &Workspace, root: &mut Map<String, Value>, max_bytes: u64) -> Result<(), ToolFailure> {
    let Some(value) = root.get(FAIL_NEXT_LOOKUPS) else {
        return Ok(());
    };
    let Some(left) = value.as_u64() else {
        return Err(invalid(format!("`{FAIL_NEXT_LOOKUPS}` in `{TICKETS_FILE}` must be a non-negative integer")));
    };
    if left == 0 {
        return Ok(());
    }
    let remaining = left - 1;
    if remaining == 0 {
        // `shift_remove` keeps the other fields in file order.
        root.shift_remove(FAIL_NEXT_LOOKUPS);
    } else {
        root.insert(FAIL_NEXT_LOOKUPS.to_string(), json!(remaining));
    }
    let saved = save(workspace, std::mem::take(root), max_bytes);
    let note = match saved {
        Ok(()) => format!("{remaining} more injected"),
        Err(error) => format!("the count could not be decremented: {error}"),
    };
    Err(ToolFailure {
        class: FailureClass::ExecutionError,
        message: format!("ticket system unavailable: injected transient failure (`{FAIL_NEXT_LOOKUPS}`; {note})"),
        output_text: String::new(),
    })
}

fn ticket_of(root: &Map<String, Value>, ticket_id: &str) -> Result<Ticket, ToolFailure> {
    let Some(Value::Object(tickets)) = root.get("tickets") else {
        return Err(invalid(format!("`{TICKETS_FILE}` has no `tickets` object")));
    };
    let Some(value) = tickets.get(ticket_id) else {
        return Err(ToolFailure {
            class: FailureClass::NotFound,
            message: format!("ticket `{ticket_id}` does not exist"),
            output_text: String::new(),
        });
    };
    parse_ticket(ticket_id, value)
}

/// Validates a ticket record: exactly `status`, `customer_note`,
/// `close_count`, with the expected types. Anything else is an invalid tool
/// result that nothing may be built on.
pub fn parse_ticket(ticket_id: &str, value: &Value) -> Result<Ticket, ToolFailure> {
    let Value::Object(fields) = value else {
        return Err(invalid(format!("ticket `{ticket_id}` is not an object")));
    };
    let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
    keys.sort_unstable();
    if keys != ["close_count", "customer_note", "status"] {
        return Err(invalid(format!(
            "ticket `{ticket_id}` has fields {keys:?}; expected exactly `status`, `customer_note`, `close_count`"
        )));
    }
    match (&fields["status"], &fields["customer_note"], fields["close_count"].as_u64()) {
        (Value::String(status), Value::String(note), Some(close_count)) => {
            Ok(Ticket { status: status.clone(), customer_note: note.clone(), close_count })
        }
        _ => Err(invalid(format!("ticket `{ticket_id}` has a field of the wrong type"))),
    }
}

/// `ticket_lookup`: the ticket's fields as structured output.
pub fn lookup(workspace: &Workspace, ticket_id: &str, max_bytes: u64) -> Result<ToolSuccess, ToolFailure> {
    // A look-up may write (an injected failure counts down).
    let _held = Exclusive::take(workspace)?;
    let mut root = load(workspace, max_bytes)?;
    injected_failure(workspace, &mut root, max_bytes)?;
    let ticket = ticket_of(&root, ticket_id)?;
    Ok(ToolSuccess {
        output_text: format!("{ticket_id}: {} (closed {} time(s))", ticket.status, ticket.close_count),
        output_json: Some(json!({
            "ticket_id": ticket_id,
            "status": ticket.status,
            "customer_note": ticket.customer_note,
            "close_count": ticket.close_count,
            "untrusted_fields": ["customer_note"],
        })),
    })
}

/// `ticket_close`: marks the ticket closed and counts the close. The
/// runtime's idempotency receipts make sure this runs once per key.
pub fn close(workspace: &Workspace, ticket_id: &str, max_bytes: u64) -> Result<ToolSuccess, ToolFailure> {
    close_keeping(workspace, ticket_id, None, max_bytes)
}

/// `ticket_close` with an idempotency key: the close and the receipt
/// `{key, intent_digest, result}` are one atomic write of the file. The same
/// key and intent again returns the kept result and closes nothing; the same
/// key with another intent is an `idempotency_conflict`.
pub fn close_with_receipt(
    workspace: &Workspace,
    ticket_id: &str,
    key: &str,
    intent_digest: &str,
    max_bytes: u64,
) -> Result<ToolSuccess, ToolFailure> {
    close_keeping(workspace, ticket_id, Some((key, intent_digest)), max_bytes)
}

/// The receipt the ticket system keeps for `key`, if any, validated
/// (exactly `intent_digest` and `result`, with the result's shape). The
/// query a recovery asks after a crash: the receipt exists exactly when the
/// close was applied.
pub fn receipt_for(workspace: &Workspace, key: &str, max_bytes: u64) -> Result<Option<TicketReceipt>, ToolFailure> {
    let root = load(workspace, max_bytes)?;
    kept_receipt(&root, key)
}

fn kept_receipt(root: &Map<String, Value>, key: &str) -> Result<Option<TicketReceipt>, ToolFailure> {
    let Some(receipts) = root.get(RECEIPTS) else {
        return Ok(None);
    };
    let Value::Object(receipts) = receipts else {
        return Err(invalid(format!("`{RECEIPTS}` in `{TICKETS_FILE}` is not an object")));
    };
    let Some(receipt) = receipts.get(key) else {
        return Ok(None);
    };
    let bad = || invalid(format!("the receipt for key `{key}` in `{TICKETS_FILE}` is malformed"));
    let Value::Object(fields) = receipt else {
        return Err(bad());
    };
    let mut names: Vec<&str> = fields.keys().map(String::as_str).collect();
    names.sort_unstable();
    if names != ["intent_digest", "result"] {
        return Err(bad());
    }
    let (Value::String(intent_digest), Value::Object(result)) = (&fields["intent_digest"], &fields["result"]) else {
        return Err(bad());
    };
    let result_shape = result.len() == 2
        && result.get("output_text").is_some_and(Value::is_string)
        && result.get("output_json").is_some_and(|value| value.is_object() || value.is_null());
    if !result_shape {
        return Err(bad());
    }
    Ok(Some(TicketReceipt {
        key: key.to_string(),
        intent_digest: intent_digest.clone(),
        result: Value::Object(result.clone()),
    }))
}

fn close_keeping(
    workspace: &Workspace,
    ticket_id: &str,
    keyed: Option<(&str, &str)>,
    max_bytes: u64,
) -> Result<ToolSuccess, ToolFailure> {
    let _held = Exclusive::take(workspace)?;
    let mut root = load(workspace, max_bytes)?;
    if let Some((key, intent_digest)) = keyed
        && let Some(kept) = kept_receipt(&root, key)?
    {
        if kept.intent_digest != intent_digest {
            return Err(ToolFailure {
                class: FailureClass::IdempotencyConflict,
                message: format!("the ticket system already applied key `{key}` for another intent"),
                output_text: String::new(),
            });
        }
        return Ok(ToolSuccess {
            output_text: kept.result["output_text"].as_str().unwrap_or_default().to_string(),
            output_json: Some(kept.result["output_json"].clone()).filter(|value| !value.is_null()),
        });
    }
    let ticket = ticket_of(&root, ticket_id)?;
    let close_count = ticket.close_count + 1;
    if let Some(Value::Object(tickets)) = root.get_mut("tickets") {
        tickets.insert(
            ticket_id.to_string(),
            json!({"status": "closed", "customer_note": ticket.customer_note, "close_count": close_count}),
        );
    }
    let success = ToolSuccess {
        output_text: format!("{ticket_id}: closed (closed {close_count} time(s))"),
        output_json: Some(json!({"ticket_id": ticket_id, "status": "closed", "close_count": close_count})),
    };
    if let Some((key, intent_digest)) = keyed {
        let receipt = json!({
            "intent_digest": intent_digest,
            "result": {"output_text": success.output_text, "output_json": success.output_json},
        });
        match root.entry(RECEIPTS).or_insert_with(|| Value::Object(Map::new())) {
            Value::Object(receipts) => {
                receipts.insert(key.to_string(), receipt);
            }
            _ => return Err(invalid(format!("`{RECEIPTS}` in `{TICKETS_FILE}` is not an object"))),
        }
    }
    save(workspace, root, max_bytes).map_err(|error| ToolFailure {
        class: FailureClass::ToolResultUncertain,
        message: format!("closing `{ticket_id}`: writing `{TICKETS_FILE}` failed, the close may or may not have been applied: {error}"),
        output_text: String::new(),
    })?;
    Ok(success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FilePolicy;

    const MAX: u64 = 1 << 20;

    /// A workspace whose `tickets.json` holds `ticket-7` (open) plus the
    /// top-level fields of `extra`.
    fn store(extra: Value) -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let mut root = json!({"tickets": {"ticket-7": {"status": "open", "customer_note": "hi", "close_count": 0}}});
        if let (Value::Object(root), Value::Object(extra)) = (&mut root, extra) {
            root.extend(extra);
        }
        std::fs::write(tmp.path().join(TICKETS_FILE), serde_json::to_string_pretty(&root).expect("JSON"))
            .expect("write");
        let policy = FilePolicy { deny: Vec::new(), max_read_bytes: MAX, max_write_bytes: MAX };
        let workspace = Workspace::open(tmp.path(), &policy).expect("open");
        (tmp, workspace)
    }

    /// Closes of different tickets by concurrent callers (each with its
    /// own workspace handle, as separate processes have) all stick: none
    /// is lost to another's rewrite of the file.
    #[test]
    fn concurrent_closes_of_different_tickets_are_all_kept() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ids: Vec<String> = (0..8).map(|i| format!("ticket-{i}")).collect();
        let tickets: Map<String, Value> = ids
            .iter()
            .map(|id| (id.clone(), json!({"status": "open", "customer_note": "", "close_count": 0})))
            .collect();
        let root = json!({"tickets": tickets});
        std::fs::write(tmp.path().join(TICKETS_FILE), serde_json::to_string(&root).expect("JSON")).expect("write");
        let policy = FilePolicy { deny: Vec::new(), max_read_bytes: MAX, max_write_bytes: MAX };
        std::thread::scope(|scope| {
            for id in &ids {
                let (path, policy) = (tmp.path(), &policy);
                scope.spawn(move || {
                    let workspace = Workspace::open(path, policy).expect("open");
                    lookup(&workspace, id, MAX).expect("look-up");
                    close_with_receipt(&workspace, id, &format!("key-{id}"), "digest", MAX).expect("close");
                });
            }
        });
        let workspace = Workspace::open(tmp.path(), &policy).expect("open");
        let file = file(&workspace);
        for id in &ids {
            assert_eq!(file["tickets"][id]["close_count"], json!(1), "{id}: {file}");
            assert!(file["receipts"][format!("key-{id}")].is_object(), "{id}'s receipt kept");
        }
    }

    fn file(workspace: &Workspace) -> Value {
        let text = std::fs::read_to_string(workspace.root().join(TICKETS_FILE)).expect("read");
        serde_json::from_str(&text).expect("JSON")
    }

    #[test]
    fn injected_failures_are_transient_counted_down_and_then_gone() {
        let (_tmp, workspace) = store(json!({FAIL_NEXT_LOOKUPS: 2, "a": 1, "b": 2}));
        let first = lookup(&workspace, "ticket-7", MAX).expect_err("injected");
        assert_eq!(first.class, FailureClass::ExecutionError);
        assert!(first.class.is_retryable());
        assert!(first.message.contains("injected transient failure"), "{}", first.message);
        assert_eq!(file(&workspace)[FAIL_NEXT_LOOKUPS], json!(1));
        lookup(&workspace, "ticket-7", MAX).expect_err("injected");
        // At 0 the field goes; the others keep their order.
        let keys: Vec<String> = file(&workspace).as_object().expect("object").keys().cloned().collect();
        assert_eq!(keys, ["tickets", "a", "b"]);
        let found = lookup(&workspace, "ticket-7", MAX).expect("third look-up");
        assert_eq!(found.output_json.expect("json")["status"], json!("open"));
        // Tickets were never touched by the count-down.
        assert_eq!(file(&workspace)["tickets"]["ticket-7"]["close_count"], json!(0));
    }

    #[test]
    fn a_malformed_injection_count_is_an_invalid_result_and_is_left_alone() {
        for bad in [json!(-1), json!("2"), json!(1.5)] {
            let (_tmp, workspace) = store(json!({FAIL_NEXT_LOOKUPS: bad.clone()}));
            let error = lookup(&workspace, "ticket-7", MAX).expect_err("malformed");
            assert_eq!(error.class, FailureClass::InvalidToolResult, "{bad}");
            assert_eq!(file(&workspace)[FAIL_NEXT_LOOKUPS], bad);
        }
    }

    #[test]
    fn an_unknown_ticket_is_not_found_and_never_retryable() {
        let (_tmp, workspace) = store(json!({}));
        let before = file(&workspace);
        for error in [
            lookup(&workspace, "ticket-99", MAX).expect_err("unknown"),
            close(&workspace, "ticket-99", MAX).expect_err("unknown"),
            close_with_receipt(&workspace, "ticket-99", "k", "d", MAX).expect_err("unknown"),
        ] {
            assert_eq!(error.class, FailureClass::NotFound);
            assert!(!error.class.is_retryable());
            assert_eq!(error.message, "ticket `ticket-99` does not exist");
        }
        assert_eq!(file(&workspace), before, "nothing was written");
    }

    #[test]
    fn a_keyed_close_keeps_its_receipt_in_the_same_write() {
        let (_tmp, workspace) = store(json!({}));
        assert_eq!(receipt_for(&workspace, "close-7", MAX).expect("query"), None);
        let closed = close_with_receipt(&workspace, "ticket-7", "close-7", "digest-a", MAX).expect("close");
        let after = file(&workspace);
        assert_eq!(after["tickets"]["ticket-7"]["status"], json!("closed"));
        assert_eq!(after["tickets"]["ticket-7"]["close_count"], json!(1));
        let receipt = receipt_for(&workspace, "close-7", MAX).expect("query").expect("a receipt");
        assert_eq!(receipt.key, "close-7");
        assert_eq!(receipt.intent_digest, "digest-a");
        assert_eq!(receipt.result, json!({"output_text": closed.output_text, "output_json": closed.output_json}));
        assert_eq!(receipt_for(&workspace, "another-key", MAX).expect("query"), None);

        // The same key and intent: the kept result, no second close.
        let again = close_with_receipt(&workspace, "ticket-7", "close-7", "digest-a", MAX).expect("reused");
        assert_eq!(again, closed);
        assert_eq!(file(&workspace), after);
        // The same key for another intent: a conflict, nothing written.
        let conflict = close_with_receipt(&workspace, "ticket-7", "close-7", "digest-b", MAX).expect_err("conflict");
        assert_eq!(conflict.class, FailureClass::IdempotencyConflict);
        assert_eq!(file(&workspace), after);
    }

    #[test]
    fn an_unkeyed_close_keeps_no_receipt_and_the_format_is_unchanged() {
        let (_tmp, workspace) = store(json!({}));
        close(&workspace, "ticket-7", MAX).expect("close");
        let after = file(&workspace);
        assert_eq!(after.as_object().expect("object").keys().collect::<Vec<_>>(), ["tickets"]);
    }

    #[test]
    fn a_failed_write_leaves_neither_the_close_nor_the_receipt() {
        let (_tmp, workspace) = store(json!({}));
        let before = std::fs::read_to_string(workspace.root().join(TICKETS_FILE)).expect("read");
        // Room to read the file but not to write it back with the close
        // and its receipt: the one write is refused, so neither happens.
        let max_bytes = before.len() as u64 + 8;
        let error = close_with_receipt(&workspace, "ticket-7", "close-7", "digest-a", max_bytes).expect_err("refused");
        assert_eq!(error.class, FailureClass::ToolResultUncertain);
        assert_eq!(std::fs::read_to_string(workspace.root().join(TICKETS_FILE)).expect("read"), before);
        assert_eq!(receipt_for(&workspace, "close-7", MAX).expect("query"), None);
        let leftovers: Vec<_> = std::fs::read_dir(workspace.root()).expect("read dir").flatten().collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left: {leftovers:?}");
    }

    #[test]
    fn malformed_receipts_are_refused_before_use() {
        let good_result = json!({"output_text": "t", "output_json": {"status": "closed"}});
        for bad in [
            json!("x"),
            json!({"intent_digest": "d"}),
            json!({"intent_digest": 1, "result": good_result}),
            json!({"intent_digest": "d", "result": {}}),
            json!({"intent_digest": "d", "result": {"output_text": 1, "output_json": null}}),
            json!({"intent_digest": "d", "result": good_result, "state": "done"}),
        ] {
            let (_tmp, workspace) = store(json!({RECEIPTS: {"k": bad.clone()}}));
            let error = receipt_for(&workspace, "k", MAX).expect_err("malformed");
            assert_eq!(error.class, FailureClass::InvalidToolResult, "{bad}");
            let before = file(&workspace);
            let refused = close_with_receipt(&workspace, "ticket-7", "k", "d", MAX).expect_err("malformed");
            assert_eq!(refused.class, FailureClass::InvalidToolResult, "{bad}");
            assert_eq!(file(&workspace), before, "nothing closed on a malformed receipt");
        }
        let (_tmp, workspace) = store(json!({RECEIPTS: []}));
        assert_eq!(
            receipt_for(&workspace, "k", MAX).expect_err("not an object").class,
            FailureClass::InvalidToolResult
        );
    }

    #[test]
    fn tickets_must_have_exactly_the_expected_fields_and_types() {
        let good = json!({"status": "open", "customer_note": "hi", "close_count": 0});
        assert!(parse_ticket("t", &good).is_ok());
        for bad in [
            json!({"status": "open", "customer_note": "hi"}),
            json!({"status": "open", "customer_note": "hi", "close_count": 0, "extra": 1}),
            json!({"status": 1, "customer_note": "hi", "close_count": 0}),
            json!({"status": "open", "customer_note": "hi", "close_count": -1}),
            json!("open"),
        ] {
            let error = parse_ticket("t", &bad).expect_err("invalid ticket");
            assert_eq!(error.class, FailureClass::InvalidToolResult, "{bad}");
        }
    }
}
