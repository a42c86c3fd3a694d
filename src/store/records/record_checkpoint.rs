//! A bridge or controller record's checkpoint: its own state (a JSON
//! object the service defines) plus three fields the store adds and strips
//! again on reading, `state_version`, `audit_seq` and `audit_hash`, which
//! tie the checkpoint to the log line it has seen. The file store keeps it
//! in a state file (`file/record_dir.rs`), the PostgreSQL store in
//! `runs.state`; both read it with [`read_checkpoint`].

use serde_json::{Map, Value};

use crate::store::{RecordKind, Sealer};

/// The fields the store adds to a record's state in its checkpoint.
pub(crate) const CHECKPOINT_FIELDS: [&str; 3] = ["state_version", "audit_seq", "audit_hash"];

/// A record's checkpoint as a state file (or its temp file, or the
/// PostgreSQL store's `runs.state`) holds it.
pub(crate) struct Checkpoint {
    pub state: Map<String, Value>,
    pub state_version: u64,
    pub audit_seq: u64,
    pub audit_hash: Option<String>,
}

/// Opens a record's sealed checkpoint `text` (named `state_name` in the
/// reasons) and takes the store's fields out of it; checks that it is the
/// state of record `id`.
pub(crate) fn read_checkpoint(
    text: &str,
    kind: RecordKind,
    id: &str,
    state_name: &str,
    sealer: &Sealer,
) -> Result<Checkpoint, String> {
    let payload = sealer.open(text).map_err(|error| format!("`{state_name}`: {error}"))?;
    let Value::Object(mut state) = payload else {
        return Err(format!("`{state_name}`: the payload is not an object"));
    };
    let mut take = |field: &str| state.remove(field);
    let state_version = take("state_version").and_then(|value| value.as_u64());
    let audit_seq = take("audit_seq").and_then(|value| value.as_u64());
    let audit_hash = match take("audit_hash") {
        Some(Value::Null) => Some(None),
        Some(Value::String(hash)) => Some(Some(hash)),
        _ => None,
    };
    let (Some(state_version), Some(audit_seq), Some(audit_hash)) = (state_version, audit_seq, audit_hash) else {
        return Err(format!("`{state_name}`: `state_version`, `audit_seq` or `audit_hash` is missing or invalid"));
    };
    let id_field = kind.id_field();
    if state.get(id_field).and_then(Value::as_str) != Some(id) {
        return Err(format!("`{state_name}` is not the state of `{id}` (`{id_field}`)"));
    }
    Ok(Checkpoint { state, state_version, audit_seq, audit_hash })
}
