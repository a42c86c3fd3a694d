//! The checkpoint a head line of an agent run's `audit.jsonl` carries.
//!
//! A run's log is its one durable record. Each checkpoint is one appended
//! line, the *head line* — the `state_saved` event, or `run_finished` when
//! the run has ended — whose `details.checkpoint` is a [`HeadPayload`]:
//! the checkpoint (what `state.json` held after every step in the previous
//! layout), the step records appended since the previous head, and on the
//! first head the plan. The line ends with its own `seal` (see `audit.rs`),
//! and one `fdatasync` of the log makes it and every line before it
//! durable. `history.jsonl`, `plan.json` and `state.json` are views of the
//! log, written without a sync and checked against it on every read.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::store::records::audit::EventColumns;
use crate::store::records::head_state::HeadState;
use crate::store::{NewEvent, RunState, StepRecord};

/// The events a checkpoint ends with (written by the runtime's recorder
/// just before it checkpoints): the store holds such an event back until
/// the checkpoint, which writes it as the head line.
pub(crate) const HEAD_EVENTS: [&str; 2] = ["state_saved", "run_finished"];

/// The key of a head line's details that holds the [`HeadPayload`].
pub(crate) const CHECKPOINT_KEY: &str = "checkpoint";

/// The fields the store adds to a run's checkpoint payload.
pub(crate) const LINK_FIELDS: [&str; 2] = ["plan_hash", "history_hash"];

/// The fields of a checkpoint that name the head line itself: a head line
/// cannot hold its own link, so they are left out of the line and filled
/// in from its position on reading.
pub(crate) const SELF_FIELDS: [&str; 2] = ["audit_seq", "audit_hash"];

/// What a head line's `details.checkpoint` holds, as read back (it is
/// written as a [`HeadPayloadRef`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeadPayload {
    /// The checkpoint: the [`RunState`] fields without `audit_seq` and
    /// `audit_hash`, plus `plan_hash` and `history_hash`.
    pub state: Map<String, Value>,
    /// The step records appended since the previous head (on the first
    /// head of a log every record before it).
    pub history: Vec<StepRecord>,
    /// The plan exactly as it runs, on the first head of a log only.
    #[serde(default)]
    pub plan: Option<Value>,
}

/// A [`HeadPayload`] as a head line is written: the same fields, in the
/// same order, borrowed from what the store holds (nothing is copied but
/// into the line). `state` is the checkpoint as a map, or a [`HeadState`]
/// that writes the same bytes straight from the run state.
#[derive(Serialize)]
struct HeadPayloadRef<'a, T: Serialize> {
    state: T,
    history: &'a [StepRecord],
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<&'a Value>,
}

/// What the coming head line carries that no line of the log holds yet:
/// the event it ends with (held back when appended), the step records
/// appended since the previous head line, and the plan until the first
/// head line carries it. The file store's run folder and the PostgreSQL
/// store's leased run keep one each, so that both write the same lines.
#[derive(Debug, Default)]
pub(crate) struct PendingHead {
    held: Option<HeldEvent>,
    history: Vec<StepRecord>,
    plan: Option<Value>,
}

/// Why a checkpoint cannot be written yet.
const NO_HEAD_EVENT: &str = "a checkpoint follows the `state_saved` event it ends with";

impl PendingHead {
    /// A head line that must carry every record again (a run reopened from
    /// the layout before head lines).
    pub(crate) fn carrying(history: Vec<StepRecord>, plan: Value) -> Self {
        PendingHead { held: None, history, plan: Some(plan) }
    }

    /// Appends `event` to a log of `written` lines: a head event
    /// (`state_saved`, `run_finished`) is held back and gets the next
    /// `seq`; any other first writes the held one as a plain line (another
    /// event followed it before the checkpoint), then itself, with `write`,
    /// which returns the `seq` it wrote.
    pub(crate) fn append<E>(
        &mut self,
        event: NewEvent<'_>,
        written: u64,
        mut write: impl FnMut(NewEvent<'_>) -> Result<u64, E>,
    ) -> Result<u64, E> {
        let mut seq = written;
        if let Some(held) = self.held.take() {
            seq = write(held.event())?;
        }
        if HEAD_EVENTS.contains(&event.event_type) {
            self.held = Some(HeldEvent::new(event));
            return Ok(seq + 1);
        }
        write(event)
    }

    /// The `seq` of the last event appended to a log of `written` lines (a
    /// held one has its `seq` already: the checkpoint writes it).
    pub(crate) fn seq(&self, written: u64) -> u64 {
        written + u64::from(self.held.is_some())
    }

    /// Adds a step record to the coming head line.
    pub(crate) fn record(&mut self, record: &StepRecord) {
        self.history.push(record.clone());
    }

    /// The plan, for the first head line.
    pub(crate) fn plan(&mut self, plan: Value) {
        self.plan = Some(plan);
    }

    /// The checkpoint the head line of a checkpoint of `state` carries,
    /// with the store's links (`plan_hash`, `history_hash`); refused when
    /// no head event is held.
    /// (The PostgreSQL store's, which keeps the map for its compact head.)
    #[cfg(any(feature = "postgres", test))]
    pub(crate) fn checkpoint(&self, state: &RunState, links: Links<'_>) -> Result<Map<String, Value>, String> {
        if self.held.is_none() {
            return Err(NO_HEAD_EVENT.to_string());
        }
        linked_payload(state, links).map(head_state).map_err(|e| e.to_string())
    }

    /// The head line that carries `checkpoint`: the held event, its columns
    /// unchanged, whose `details` hold the [`HeadPayload`] under
    /// [`CHECKPOINT_KEY`], all borrowed. Nothing is taken: call
    /// [`PendingHead::written`] once the line is written.
    #[cfg(any(feature = "postgres", test))]
    pub(crate) fn line<'a>(
        &'a self,
        checkpoint: &'a Map<String, Value>,
    ) -> Result<HeadLine<'a, &'a Map<String, Value>>, String> {
        self.line_with(checkpoint)
    }

    /// The head line of a checkpoint of `state` with the store's `links`,
    /// as `PendingHead::line` of `PendingHead::checkpoint` writes it,
    /// byte for byte, without building the checkpoint as a map first.
    pub(crate) fn line_of<'a>(
        &'a self,
        state: &'a RunState,
        links: Links<'a>,
    ) -> Result<HeadLine<'a, HeadState<'a>>, String> {
        self.line_with(HeadState { state, links })
    }

    fn line_with<T: Serialize>(&self, state: T) -> Result<HeadLine<'_, T>, String> {
        let Some(held) = &self.held else {
            return Err(NO_HEAD_EVENT.to_string());
        };
        let payload = HeadPayloadRef { state, history: &self.history, plan: self.plan.as_ref() };
        Ok(HeadLine { held, details: HeadDetails { details: &held.details, payload } })
    }

    /// The head line is written: nothing is pending any more.
    pub(crate) fn written(&mut self) {
        *self = PendingHead::default();
    }
}

/// A head line, borrowed from the [`PendingHead`]: the held event's columns
/// and the `details` it is written with.
pub(crate) struct HeadLine<'a, T: Serialize> {
    pub held: &'a HeldEvent,
    pub details: HeadDetails<'a, T>,
}

impl<T: Serialize> HeadLine<'_, T> {
    /// `event_type`, `step_id`, `status`.
    pub(crate) fn columns(&self) -> EventColumns<'_> {
        EventColumns {
            event_type: self.held.event_type.as_str(),
            step_id: self.held.step_id.as_deref(),
            status: self.held.status.as_deref(),
        }
    }
}

/// A head line's `details`: the held event's, with the payload under
/// [`CHECKPOINT_KEY`]; serialized as the map `Map::insert` of the payload
/// would make (in the key's place when the details have it, else last),
/// without copying the checkpoint into a [`Value`].
pub(crate) struct HeadDetails<'a, T: Serialize> {
    details: &'a Map<String, Value>,
    payload: HeadPayloadRef<'a, T>,
}

impl<T: Serialize> Serialize for HeadDetails<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let replaces = self.details.contains_key(CHECKPOINT_KEY);
        let mut map = serializer.serialize_map(Some(self.details.len() + usize::from(!replaces)))?;
        for (key, value) in self.details {
            if key == CHECKPOINT_KEY {
                map.serialize_entry(key, &self.payload)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        if !replaces {
            map.serialize_entry(CHECKPOINT_KEY, &self.payload)?;
        }
        map.end()
    }
}

/// An appended `state_saved`/`run_finished` event not written yet: a store
/// holds it until the checkpoint writes it as the head line.
#[derive(Debug, Clone)]
pub(crate) struct HeldEvent {
    pub ts: String,
    pub event_type: String,
    pub step_id: Option<String>,
    pub status: Option<String>,
    pub details: Map<String, Value>,
}

impl HeldEvent {
    pub(crate) fn new(event: NewEvent<'_>) -> Self {
        HeldEvent {
            ts: event.ts,
            event_type: event.event_type.to_string(),
            step_id: event.step_id.map(str::to_string),
            status: event.status.map(str::to_string),
            details: event.details,
        }
    }

    /// The event as appended, to write it as a plain line (another event
    /// followed it before the checkpoint).
    pub(crate) fn event(&self) -> NewEvent<'_> {
        NewEvent {
            ts: self.ts.clone(),
            event_type: &self.event_type,
            step_id: self.step_id.as_deref(),
            status: self.status.as_deref(),
            details: self.details.clone(),
        }
    }
}

/// The store's links in a checkpoint: of the plan copy (`plan_hash`) and
/// after the last step record it covers (`history_hash`, `None` before the
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Links<'a> {
    pub plan_hash: &'a str,
    pub history_hash: Option<&'a str>,
}

/// `state` as a checkpoint payload with the store's links: the shape of
/// `state.json`'s payload.
pub(crate) fn linked_payload(state: &RunState, links: Links<'_>) -> Result<Map<String, Value>, serde_json::Error> {
    let Links { plan_hash, history_hash } = links;
    let Value::Object(mut payload) = serde_json::to_value(state)? else {
        return Err(serde::ser::Error::custom("a run state is an object"));
    };
    payload.insert(LINK_FIELDS[0].into(), json!(plan_hash));
    payload.insert(LINK_FIELDS[1].into(), json!(history_hash));
    Ok(payload)
}

/// The payload as a head line carries it (without the fields naming the
/// line itself).
pub(crate) fn head_state(mut payload: Map<String, Value>) -> Map<String, Value> {
    for field in SELF_FIELDS {
        // `shift_remove` keeps the order of the fields that stay.
        payload.shift_remove(field);
    }
    payload
}

/// The full payload of the head line at `seq` whose link is `hash` (the
/// shape of `state.json`'s payload).
pub(crate) fn full_payload(state: &Map<String, Value>, seq: u64, hash: &str) -> Map<String, Value> {
    let mut payload = Map::new();
    for (key, value) in state {
        // The fields keep `RunState`'s order: the line's own seq and link
        // go where the state has them, before `started_at`.
        if key == "started_at" {
            payload.insert(SELF_FIELDS[0].into(), json!(seq));
            payload.insert(SELF_FIELDS[1].into(), json!(hash));
        }
        payload.insert(key.clone(), value.clone());
    }
    if !payload.contains_key(SELF_FIELDS[0]) {
        payload.insert(SELF_FIELDS[0].into(), json!(seq));
        payload.insert(SELF_FIELDS[1].into(), json!(hash));
    }
    payload
}

/// Splits a full payload into the run state and the store's links
/// (`plan_hash`, `history_hash`); the reason when they are missing or
/// invalid, or the state does not parse.
pub(crate) fn split_payload(mut payload: Map<String, Value>) -> Result<(RunState, String, Option<String>), String> {
    let plan_hash = payload.shift_remove(LINK_FIELDS[0]);
    let history_hash = payload.shift_remove(LINK_FIELDS[1]);
    let (Some(Value::String(plan_hash)), Some(history_hash @ (Value::Null | Value::String(_)))) =
        (plan_hash, history_hash)
    else {
        return Err("`plan_hash` or `history_hash` is missing or invalid".to_string());
    };
    let history_hash = history_hash.as_str().map(str::to_string);
    let state: RunState = serde_json::from_value(Value::Object(payload)).map_err(|error| error.to_string())?;
    Ok((state, plan_hash, history_hash))
}

/// The bytes `plan.json` holds for `plan`, whose link is the checkpoint's
/// `plan_hash`.
pub(crate) fn plan_bytes(plan: &Value) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = serde_json::to_vec_pretty(plan)?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{PlanRef, RunState};

    const RECORD: &str = r#"{"step_id":"step-2","kind":"write_file","status":"done","attempt":1,"failure_class":null,"action":{"kind":"write_file","path":"report.txt","content":"a \"quoted\" line\n"},"output_text":"wrote 17 bytes to report.txt","error":null,"details":{"path":"report.txt","bytes":17},"started_at":"2026-01-01T00:00:01Z","finished_at":"2026-01-01T00:00:01.5Z","duration_ms":500}"#;

    fn pending(details: Map<String, Value>) -> (PendingHead, RunState) {
        let plan = PlanRef {
            id: "p".into(),
            path: "plans/p.toml".into(),
            sha256: "0".repeat(64),
            policy: "default".into(),
            policy_path: "policies/default.toml".into(),
            policy_sha256: "1".repeat(64),
            step_count: 2,
            plan_file: None,
            policy_file: None,
        };
        let state = RunState::started("r1".into(), Some("a goal".into()), plan, "2026-01-01T00:00:00Z".into());
        let mut head = PendingHead::default();
        head.plan(json!({"id": "p", "steps": [{"id": "step-1"}]}));
        head.record(&serde_json::from_str(RECORD).expect("a step record"));
        let event = NewEvent {
            ts: "2026-01-01T00:00:02Z".into(),
            event_type: "state_saved",
            step_id: Some("step-2"),
            status: Some("ok"),
            details,
        };
        head.append(event, 3, |_| Ok::<u64, ()>(0)).expect("held");
        (head, state)
    }

    /// The details as they were made before they were borrowed: the
    /// payload copied into a `Value` and inserted into the held details.
    fn inserted(head: &PendingHead, checkpoint: &Map<String, Value>) -> String {
        let held = head.held.as_ref().expect("held");
        let payload = HeadPayloadRef { state: checkpoint, history: &head.history, plan: head.plan.as_ref() };
        let mut details = held.details.clone();
        details.insert(CHECKPOINT_KEY.into(), serde_json::to_value(payload).expect("a value"));
        serde_json::to_string(&details).expect("text")
    }

    /// A head line's borrowed details are the bytes the inserted payload
    /// gives: last after the event's own details, or in the place of a
    /// `checkpoint` key the details already had.
    #[test]
    fn borrowed_head_details_are_the_bytes_of_the_inserted_payload() {
        let mut own = Map::new();
        own.insert("state_version".into(), json!(2));
        own.insert("note".into(), json!("ü \u{1} \"x\""));
        let mut with_key = Map::new();
        with_key.insert("checkpoint".into(), json!("replaced"));
        with_key.insert("after".into(), json!([1, 2.5, null]));
        for details in [Map::new(), own, with_key] {
            let (head, state) = pending(details);
            let checkpoint = head
                .checkpoint(&state, Links { plan_hash: &"2".repeat(64), history_hash: None })
                .expect("a checkpoint");
            let line = head.line(&checkpoint).expect("a head line");
            let borrowed = serde_json::to_string(&line.details).expect("text");
            assert_eq!(borrowed, inserted(&head, &checkpoint));
            let links = Links { plan_hash: &"2".repeat(64), history_hash: None };
            let direct = head.line_of(&state, links).expect("a head line");
            assert_eq!(serde_json::to_string(&direct.details).expect("text"), borrowed);
            // With the optional fields a state may carry, and a history link.
            let mut fuller = state.clone();
            fuller.failed_steps = vec!["step-1".into()];
            fuller.error = Some("a \"quoted\" error\n".into());
            fuller.audit_seq = 7;
            fuller.audit_hash = Some("3".repeat(64));
            fuller.finished_at = Some("2026-01-01T00:00:03Z".into());
            let links = Links { plan_hash: "p", history_hash: Some("h") };
            let map = head.checkpoint(&fuller, links).expect("a checkpoint");
            let expected = serde_json::to_string(&head.line(&map).expect("a head line").details).expect("text");
            let direct = head.line_of(&fuller, links).expect("a head line");
            assert_eq!(serde_json::to_string(&direct.details).expect("text"), expected);
            assert!(!expected.contains("audit_seq") && expected.contains("\"failed_steps\":[\"step-1\"]"));
            let value: Value = serde_json::from_str(&borrowed).expect("json");
            assert_eq!(value["checkpoint"]["history"][0]["step_id"], "step-2");
        }
        assert_eq!(
            PendingHead::default().checkpoint(&pending(Map::new()).1, Links { plan_hash: "h", history_hash: None }),
            Err(NO_HEAD_EVENT.into())
        );
    }
}
