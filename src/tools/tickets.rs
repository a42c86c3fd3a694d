//! The demo ticket system of the bounded-agent seed: `ticket_lookup` and
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

use serde_json::{Map, Value, json};

use crate::confine::Workspace;
use crate::model::FailureClass;
use crate::tools::{ToolFailure, ToolSuccess, read_file, write_file};

/// The file the ticket tools use, relative to the workspace.
pub const TICKETS_FILE: &str = "tickets.json";

/// One ticket, validated: exact fields, expected primitive types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub status: String,
    pub customer_note: String,
    pub close_count: u64,
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
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(root)) => Ok(root),
        Ok(_) => Err(invalid(format!("`{TICKETS_FILE}` is not an object"))),
        Err(error) => Err(invalid(format!("`{TICKETS_FILE}` is not valid JSON: {error}"))),
    }
}

fn ticket_of(root: &Map<String, Value>, ticket_id: &str) -> Result<Ticket, ToolFailure> {
    let Some(Value::Object(tickets)) = root.get("tickets") else {
        return Err(invalid(format!("`{TICKETS_FILE}` has no `tickets` object")));
    };
    let Some(value) = tickets.get(ticket_id) else {
        return Err(ToolFailure {
            class: FailureClass::ExecutionError,
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
    let root = load(workspace, max_bytes)?;
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
    let mut root = load(workspace, max_bytes)?;
    let ticket = ticket_of(&root, ticket_id)?;
    let close_count = ticket.close_count + 1;
    if let Some(Value::Object(tickets)) = root.get_mut("tickets") {
        tickets.insert(
            ticket_id.to_string(),
            json!({"status": "closed", "customer_note": ticket.customer_note, "close_count": close_count}),
        );
    }
    let mut text = serde_json::to_string_pretty(&Value::Object(root)).unwrap_or_default();
    text.push('\n');
    write_file(workspace, TICKETS_FILE, &text, max_bytes).map_err(|error| ToolFailure {
        class: FailureClass::ToolResultUncertain,
        message: format!("closing `{ticket_id}`: writing `{TICKETS_FILE}` failed, the close may or may not have been applied: {error}"),
        output_text: String::new(),
    })?;
    Ok(ToolSuccess {
        output_text: format!("{ticket_id}: closed (closed {close_count} time(s))"),
        output_json: Some(json!({"ticket_id": ticket_id, "status": "closed", "close_count": close_count})),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
