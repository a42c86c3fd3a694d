//! Typed facts of a run's records: what a tool established about one
//! attempt ([`ToolFacts`]: [`ShellFacts`], [`FileFacts`], [`FlakyFacts`]),
//! the key a keyed step ran under ([`KeyedFacts`]), a step record's
//! `details` as a whole ([`StepDetails`]), and why a run stopped
//! ([`StopReason`]).
//!
//! Records are hashed and chained, so each type serialises to exactly the
//! bytes the records have always held: field order is key order, a field
//! that is absent is left out (never `null`, unless it always was), numbers
//! as integers. Reading stays as tolerant as it was: a step record's
//! `details` in a shape this version does not write (an older record, or
//! a hand-edited one) loads as [`StepDetails::Recorded`] and is written back
//! unchanged, and a stop reason this version does not know loads as
//! [`StopReason::Other`].

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::model::Decision;
use crate::model::open_words::open_words;

/// What a `shell` attempt established: the policy's verdict, then (once
/// the program was found) where it lives, then (once it ran) how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShellFacts {
    pub decision: Decision,
    pub rule: String,
    pub reason: String,
    /// The resolved program, once found on the policy's search path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// Where `program` leads, when that is elsewhere (a symbolic link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_canonical: Option<String>,
    /// The sandbox the program ran in; `None` when it was never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxFacts>,
    /// How the program ended; `None` when it was never started.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub ran: Option<ShellRanFacts>,
}

/// Which sandbox confined a program, as its step's record says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxFacts {
    /// `landlock` or `none`.
    pub kind: crate::model::SandboxMode,
    /// The kernel's Landlock ABI version, when Landlock applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abi: Option<u32>,
    /// Why there was none: `policy` (`shell.sandbox = "none"`) or what the
    /// kernel lacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfined: Option<String>,
    /// What network the program had: `off`, `on` or the ports, and
    /// `unconfined` where the ABI cannot restrict TCP (below 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Whether the program could create and remove entries at the
    /// workspace's top level: `writable (mount namespace)`, `writable (user
    /// and mount namespaces)`, or `read-only (…why)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_level: Option<String>,
}

/// How a program that was started ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShellRanFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    /// Either stream wrote more than was kept.
    pub truncated: bool,
    /// Killed because the run's lease ran out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fenced: bool,
    /// Killed at the step's timeout (never together with `fenced`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

/// What a `write_file` or `read_file` attempt established: the path, the
/// bytes moved, or the rule that refused the path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileFacts {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// `forbidden`, with `rule`, when the policy refused the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
}

/// What a `flaky` attempt established: which attempt, and how many fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlakyFacts {
    pub attempt: u32,
    pub failures: u32,
}

/// What a tool established about one attempt. `None` for the tools that
/// report no facts (`finish`, the ticket tools) and for an attempt that
/// never reached its tool.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ToolFacts {
    #[default]
    None,
    Shell(ShellFacts),
    File(FileFacts),
    Flaky(FlakyFacts),
    Http(crate::model::HttpFacts),
}

impl ToolFacts {
    /// The exit code of a program that ran.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            ToolFacts::Shell(ShellFacts { ran: Some(ran), .. }) => ran.exit_code,
            _ => None,
        }
    }

    /// The policy rule that decided the attempt, if one did.
    pub fn rule(&self) -> Option<&str> {
        match self {
            ToolFacts::Shell(facts) => Some(&facts.rule),
            ToolFacts::File(facts) => facts.rule.as_deref(),
            ToolFacts::Http(facts) => facts.rule.as_deref(),
            ToolFacts::None | ToolFacts::Flaky(_) => None,
        }
    }

    fn to_map(&self) -> Map<String, Value> {
        let value = match self {
            ToolFacts::None => return Map::new(),
            ToolFacts::Shell(facts) => serde_json::to_value(facts),
            ToolFacts::File(facts) => serde_json::to_value(facts),
            ToolFacts::Flaky(facts) => serde_json::to_value(facts),
            ToolFacts::Http(facts) => serde_json::to_value(facts),
        };
        match value {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }
}

/// How a keyed step's result was had without running its effect now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptUse {
    /// The first attempt after a resume found the effect applied.
    RecoveredFromReceipt,
    /// The effect was already applied under the key (an earlier run).
    ReusedReceipt,
}

impl ReceiptUse {
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptUse::RecoveredFromReceipt => "recovered_from_receipt",
            ReceiptUse::ReusedReceipt => "reused_receipt",
        }
    }
}

/// Who vouched for an effect that was already applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VouchedBy {
    /// The ticket system's own receipt of a keyed close.
    TicketStore,
    /// A file's content matches what the write intended.
    TargetDigest,
}

/// The key a keyed step ran under, after the tool's facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyedFacts {
    pub idempotency_key: String,
    pub intent_digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vouched_by: Option<VouchedBy>,
    /// Set when the result came from a receipt instead of the effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptUse>,
}

impl KeyedFacts {
    pub fn new(idempotency_key: &str, intent_digest: &str) -> Self {
        KeyedFacts {
            idempotency_key: idempotency_key.to_string(),
            intent_digest: intent_digest.to_string(),
            vouched_by: None,
            receipt: None,
        }
    }
}

/// A keyed step a person settled as applied (`planrun reconcile --applied`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReconciledFacts {
    pub idempotency_key: Option<String>,
    pub intent_digest: String,
    /// Always `applied` (a write settled as not applied leaves no record).
    pub reconciled: String,
    pub settled_by: Option<String>,
}

/// A step record's `details`: facts from the tool and the policy, never
/// the step's output.
#[derive(Debug, Clone, PartialEq)]
pub enum StepDetails {
    /// An attempt: the tool's facts, then the key it ran under, if any.
    Attempt { tool: ToolFacts, keyed: Option<KeyedFacts> },
    /// A step whose `when` was false: `skipped` or `already_satisfied`.
    Skipped { reason: String },
    /// A keyed step a person settled by hand.
    Reconciled(ReconciledFacts),
    /// Facts in a shape this version does not write, kept as recorded.
    Recorded(Map<String, Value>),
}

impl Default for StepDetails {
    fn default() -> Self {
        StepDetails::Attempt { tool: ToolFacts::None, keyed: None }
    }
}

impl StepDetails {
    /// The policy rule that decided the attempt, if one did.
    pub fn rule(&self) -> Option<&str> {
        match self {
            StepDetails::Attempt { tool, .. } => tool.rule(),
            StepDetails::Recorded(map) => recorded_str(map, "rule"),
            StepDetails::Skipped { .. } | StepDetails::Reconciled(_) => None,
        }
    }

    /// How a keyed step's result came from a receipt, as recorded.
    pub fn receipt(&self) -> Option<&str> {
        match self {
            StepDetails::Attempt { keyed: Some(keyed), .. } => keyed.receipt.map(ReceiptUse::as_str),
            StepDetails::Recorded(map) => recorded_str(map, "receipt"),
            _ => None,
        }
    }

    /// The `reason` fact: why a step did not run (a skipped step), or the
    /// reason of the shell rule that decided it.
    pub fn reason(&self) -> Option<&str> {
        match self {
            StepDetails::Skipped { reason } => Some(reason),
            StepDetails::Attempt { tool: ToolFacts::Shell(facts), .. } => Some(&facts.reason),
            StepDetails::Recorded(map) => recorded_str(map, "reason"),
            _ => None,
        }
    }

    /// The key a keyed step ran under.
    pub fn idempotency_key(&self) -> Option<&str> {
        match self {
            StepDetails::Attempt { keyed: Some(keyed), .. } => Some(&keyed.idempotency_key),
            StepDetails::Reconciled(facts) => facts.idempotency_key.as_deref(),
            StepDetails::Recorded(map) => recorded_str(map, "idempotency_key"),
            _ => None,
        }
    }

    /// The path a file tool acted on.
    pub fn path(&self) -> Option<&str> {
        match self {
            StepDetails::Attempt { tool: ToolFacts::File(facts), .. } => Some(&facts.path),
            StepDetails::Recorded(map) => recorded_str(map, "path"),
            _ => None,
        }
    }

    /// The details as the record holds them.
    pub fn to_map(&self) -> Map<String, Value> {
        let value = match self {
            StepDetails::Attempt { tool, keyed } => {
                let mut map = tool.to_map();
                if let Some(Ok(Value::Object(keyed))) = keyed.as_ref().map(serde_json::to_value) {
                    map.extend(keyed);
                }
                return map;
            }
            StepDetails::Skipped { reason } => return Map::from_iter([("reason".to_string(), reason.as_str().into())]),
            StepDetails::Reconciled(facts) => serde_json::to_value(facts),
            StepDetails::Recorded(map) => return map.clone(),
        };
        match value {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }

    /// The typed facts `map` holds, when they are exactly what this
    /// version writes (same keys, same order, same values); otherwise
    /// `map` as recorded.
    pub fn from_map(map: Map<String, Value>) -> Self {
        let parse = |map: &Map<String, Value>| {
            let value = Value::Object(map.clone());
            let keyed = || serde_json::from_value::<KeyedFacts>(value.clone()).ok();
            let attempt = |tool: Option<ToolFacts>| tool.map(|tool| StepDetails::Attempt { tool, keyed: keyed() });
            match map.keys().next().map(String::as_str) {
                None => attempt(Some(ToolFacts::None)),
                Some("idempotency_key") if map.contains_key("reconciled") => {
                    serde_json::from_value(value.clone()).ok().map(StepDetails::Reconciled)
                }
                Some("idempotency_key") => attempt(Some(ToolFacts::None)),
                Some("decision") => attempt(serde_json::from_value(value.clone()).ok().map(ToolFacts::Shell)),
                Some("path") => attempt(serde_json::from_value(value.clone()).ok().map(ToolFacts::File)),
                Some("attempt") => attempt(serde_json::from_value(value.clone()).ok().map(ToolFacts::Flaky)),
                Some("method") => attempt(serde_json::from_value(value.clone()).ok().map(ToolFacts::Http)),
                Some("reason") => map
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(|reason| StepDetails::Skipped { reason: reason.into() }),
                Some(_) => None,
            }
        };
        match parse(&map) {
            Some(typed) if same_entries(&typed.to_map(), &map) => typed,
            _ => StepDetails::Recorded(map),
        }
    }
}

/// Whether two maps hold the same entries in the same order.
fn same_entries(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a == b)
}

fn recorded_str<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m str> {
    map.get(key).and_then(Value::as_str)
}

impl Serialize for StepDetails {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_map().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for StepDetails {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(StepDetails::from_map)
    }
}

/// Why a run stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A `finish` step ran.
    FinishStep,
    /// The last step ran.
    EndOfPlan,
    /// A `when` found the goal already holding.
    AlreadySatisfied,
    /// A step failed with no retry left.
    StepFailed,
    /// A budget ran out.
    BudgetExhausted,
    /// A `[[verify]]` check failed.
    VerificationFailed,
    /// A keyed write's outcome could not be known.
    ToolResultUncertain,
    /// A key was already used for another action.
    IdempotencyConflict,
    /// Recovering an interrupted attempt failed with no retry left.
    RecoveryExhausted,
    /// A person rejected the pending action.
    Rejected,
    /// A person cancelled the run.
    Cancelled,
    /// A false `when` with `otherwise = "fail"`.
    ConditionFailed,
    /// A reason this version does not write, kept as recorded.
    Other(String),
}

impl StopReason {
    const KNOWN: [StopReason; 12] = [
        StopReason::FinishStep,
        StopReason::EndOfPlan,
        StopReason::AlreadySatisfied,
        StopReason::StepFailed,
        StopReason::BudgetExhausted,
        StopReason::VerificationFailed,
        StopReason::ToolResultUncertain,
        StopReason::IdempotencyConflict,
        StopReason::RecoveryExhausted,
        StopReason::Rejected,
        StopReason::Cancelled,
        StopReason::ConditionFailed,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            StopReason::FinishStep => "finish_step",
            StopReason::EndOfPlan => "end_of_plan",
            StopReason::AlreadySatisfied => "already_satisfied",
            StopReason::StepFailed => "step_failed",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::VerificationFailed => "verification_failed",
            StopReason::ToolResultUncertain => "tool_result_uncertain",
            StopReason::IdempotencyConflict => "idempotency_conflict",
            StopReason::RecoveryExhausted => "recovery_exhausted",
            StopReason::Rejected => "rejected",
            StopReason::Cancelled => "cancelled",
            StopReason::ConditionFailed => "condition_failed",
            StopReason::Other(reason) => reason,
        }
    }
}

open_words!(StopReason);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> StepDetails {
        let details: StepDetails = serde_json::from_str(text).expect("details");
        assert_eq!(serde_json::to_string(&details).expect("json"), text);
        details
    }

    #[test]
    fn details_keep_their_bytes_and_read_as_types() {
        let shell = round_trip(
            r#"{"decision":"allow","rule":"allow-echo","reason":"","program":"/usr/bin/echo","exit_code":0,"stdout_bytes":3,"stderr_bytes":0,"truncated":false}"#,
        );
        assert!(matches!(&shell, StepDetails::Attempt { tool: ToolFacts::Shell(_), keyed: None }), "{shell:?}");
        assert_eq!(shell.rule(), Some("allow-echo"));
        let timed_out = round_trip(
            r#"{"decision":"allow","rule":"r","reason":"x","program":"/bin/sleep","signal":9,"stdout_bytes":0,"stderr_bytes":0,"truncated":false,"timed_out":true}"#,
        );
        assert!(matches!(timed_out, StepDetails::Attempt { tool: ToolFacts::Shell(_), .. }));
        let write = round_trip(
            r#"{"path":"a.txt","bytes":2,"idempotency_key":"k","intent_digest":"d","vouched_by":"target_digest","receipt":"reused_receipt"}"#,
        );
        assert_eq!(
            (write.path(), write.idempotency_key(), write.receipt()),
            (Some("a.txt"), Some("k"), Some("reused_receipt"))
        );
        let denied = round_trip(r#"{"path":"../x","decision":"forbidden","rule":"files.parent"}"#);
        assert_eq!(denied.rule(), Some("files.parent"));
        assert!(matches!(
            round_trip(r#"{"attempt":1,"failures":2}"#),
            StepDetails::Attempt { tool: ToolFacts::Flaky(_), .. }
        ));
        assert_eq!(round_trip(r#"{"reason":"skipped"}"#).reason(), Some("skipped"));
        assert!(matches!(
            round_trip(r#"{"idempotency_key":"k","intent_digest":"d"}"#),
            StepDetails::Attempt { tool: ToolFacts::None, keyed: Some(_) }
        ));
        assert!(matches!(
            round_trip(r#"{"idempotency_key":null,"intent_digest":"d","reconciled":"applied","settled_by":"ann"}"#),
            StepDetails::Reconciled(_)
        ));
        assert_eq!(round_trip("{}"), StepDetails::default());
    }

    #[test]
    fn details_in_another_shape_are_kept_as_recorded() {
        for text in [
            r#"{"rule":"r","decision":"allow","reason":""}"#,
            r#"{"path":"a","bytes":2.0}"#,
            r#"{"path":"a","note":"x"}"#,
            r#"{"decision":"allow","rule":"r","reason":"","fenced":false}"#,
            r#"{"something":[1,2]}"#,
        ] {
            assert!(matches!(round_trip(text), StepDetails::Recorded(_)), "{text}");
        }
        assert_eq!(round_trip(r#"{"rule":"r","decision":"allow","reason":""}"#).rule(), Some("r"));
    }

    #[test]
    fn stop_reasons_keep_their_words() {
        for known in StopReason::KNOWN {
            let text = serde_json::to_string(&known).expect("json");
            assert_eq!(serde_json::from_str::<StopReason>(&text).expect("reason"), known);
        }
        let other: StopReason = serde_json::from_str(r#""made_up""#).expect("reason");
        assert_eq!(
            (other.as_str(), serde_json::to_string(&other).expect("json")),
            ("made_up", r#""made_up""#.to_string())
        );
    }
}
