//! Typed completion evidence of a run's checkpoint: what kind of proof a
//! piece of evidence is ([`EvidenceKind`]) and what it holds
//! ([`EvidenceDetail`]); and the result a keyed write's receipt keeps
//! ([`ReceiptResult`]).
//!
//! Each type serialises to exactly the bytes checkpoints have always held
//! (field order is key order, absent optional fields left out where they
//! always were). A kind this version does not write loads as
//! [`EvidenceKind::Other`], and a detail in a shape it does not write as
//! [`EvidenceDetail::Other`]; both are written back unchanged.

use std::fmt;

use crate::model::open_words::open_words;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// What a piece of evidence proves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvidenceKind {
    /// A keyed write ran and its receipt was recorded.
    Receipt,
    /// The first attempt after a resume found the effect applied.
    RecoveredFromReceipt,
    /// The effect was already applied under the key (an earlier run).
    ReusedReceipt,
    /// A person settled an uncertain keyed write as applied.
    Reconciled,
    /// One `[[verify]]` check.
    Verify,
    /// A `when` found the goal already holding.
    AlreadySatisfied,
    /// A kind this version does not write, kept as recorded.
    Other(String),
}

impl EvidenceKind {
    const KNOWN: [EvidenceKind; 6] = [
        EvidenceKind::Receipt,
        EvidenceKind::RecoveredFromReceipt,
        EvidenceKind::ReusedReceipt,
        EvidenceKind::Reconciled,
        EvidenceKind::Verify,
        EvidenceKind::AlreadySatisfied,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            EvidenceKind::Receipt => "receipt",
            EvidenceKind::RecoveredFromReceipt => "recovered_from_receipt",
            EvidenceKind::ReusedReceipt => "reused_receipt",
            EvidenceKind::Reconciled => "reconciled",
            EvidenceKind::Verify => "verify",
            EvidenceKind::AlreadySatisfied => "already_satisfied",
            EvidenceKind::Other(kind) => kind,
        }
    }

    /// Whether it stands for a keyed write's receipt (`reconciled`: a
    /// person's word, `planrun reconcile --applied`).
    pub fn is_receipt(&self) -> bool {
        matches!(
            self,
            EvidenceKind::Receipt
                | EvidenceKind::RecoveredFromReceipt
                | EvidenceKind::ReusedReceipt
                | EvidenceKind::Reconciled
        )
    }
}

/// The receipt a keyed write's evidence is bound to (`receipt`, and with
/// the run that applied the effect, `recovered_from_receipt` and
/// `reused_receipt`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptEvidence {
    pub idempotency_key: String,
    pub intent_digest: String,
    /// The run that applied the effect (a receipt that was reused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// A keyed write a person settled as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconciledEvidence {
    pub idempotency_key: Option<String>,
    pub intent_digest: String,
    pub settled_by: Option<String>,
}

/// A `when` that found the goal already holding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SatisfiedEvidence {
    /// The condition, in words.
    pub condition: String,
}

/// What a piece of evidence holds.
#[derive(Debug, Clone, PartialEq)]
pub enum EvidenceDetail {
    Receipt(ReceiptEvidence),
    Reconciled(ReconciledEvidence),
    AlreadySatisfied(SatisfiedEvidence),
    /// A `[[verify]]` check's outcome as `completion_verified` records it,
    /// or a detail in a shape this version does not write, kept as written.
    Other(Value),
}

impl EvidenceDetail {
    /// The key and intent of the receipt the evidence is bound to.
    pub fn receipt_binding(&self) -> Option<(Option<&str>, &str)> {
        match self {
            EvidenceDetail::Receipt(receipt) => Some((Some(&receipt.idempotency_key), &receipt.intent_digest)),
            EvidenceDetail::Reconciled(reconciled) => {
                Some((reconciled.idempotency_key.as_deref(), &reconciled.intent_digest))
            }
            EvidenceDetail::AlreadySatisfied(_) | EvidenceDetail::Other(_) => None,
        }
    }

    /// The typed detail `value` holds, when it is exactly what this
    /// version writes (same keys, same order, same values); otherwise
    /// `value` as recorded.
    fn from_value(value: Value) -> Self {
        let typed = [
            serde_json::from_value(value.clone()).ok().map(EvidenceDetail::Receipt),
            serde_json::from_value(value.clone()).ok().map(EvidenceDetail::Reconciled),
            serde_json::from_value(value.clone()).ok().map(EvidenceDetail::AlreadySatisfied),
        ];
        let same_bytes =
            |detail: &EvidenceDetail| serde_json::to_string(detail).ok() == serde_json::to_string(&value).ok();
        typed.into_iter().flatten().find(same_bytes).unwrap_or(EvidenceDetail::Other(value))
    }
}

/// The detail as the checkpoint holds it (compact JSON).
impl fmt::Display for EvidenceDetail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&serde_json::to_string(self).map_err(|_| fmt::Error)?)
    }
}

impl Serialize for EvidenceDetail {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            EvidenceDetail::Receipt(detail) => detail.serialize(serializer),
            EvidenceDetail::Reconciled(detail) => detail.serialize(serializer),
            EvidenceDetail::AlreadySatisfied(detail) => detail.serialize(serializer),
            EvidenceDetail::Other(value) => value.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for EvidenceDetail {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(EvidenceDetail::from_value)
    }
}

/// A keyed write's result as its receipt keeps it: exactly a tool
/// result's `output_text` (a string) and `output_json` (an object, an
/// array or `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptResult {
    pub output_text: String,
    pub output_json: Option<Value>,
}

impl ReceiptResult {
    /// The result as the receipt holds it.
    pub fn to_value(&self) -> Value {
        // Two strings and a JSON value always serialise.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The result `value` holds, when it has exactly the shape above (both
    /// fields present, nothing else); `None` otherwise.
    pub fn from_value(value: &Value) -> Option<ReceiptResult> {
        let result: ReceiptResult = serde_json::from_value(value.clone()).ok()?;
        let json_shape = result.output_json.as_ref().is_none_or(|json| json.is_object() || json.is_array());
        (json_shape && result.to_value() == *value).then_some(result)
    }
}

open_words!(EvidenceKind);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> EvidenceDetail {
        let detail: EvidenceDetail = serde_json::from_str(text).expect("detail");
        assert_eq!(serde_json::to_string(&detail).expect("json"), text);
        detail
    }

    #[test]
    fn details_keep_their_bytes_and_read_as_types() {
        assert!(matches!(
            round_trip(r#"{"idempotency_key":"k","intent_digest":"d"}"#),
            EvidenceDetail::Receipt(ReceiptEvidence { run_id: None, .. })
        ));
        let reused = round_trip(r#"{"idempotency_key":"k","intent_digest":"d","run_id":"r"}"#);
        assert_eq!(reused.receipt_binding(), Some((Some("k"), "d")));
        assert!(matches!(
            round_trip(r#"{"idempotency_key":null,"intent_digest":"d","settled_by":"ann"}"#),
            EvidenceDetail::Reconciled(_)
        ));
        assert!(matches!(round_trip(r#"{"condition":"x"}"#), EvidenceDetail::AlreadySatisfied(_)));
        for other in [
            r#"{"check":"c","passed":true,"observed":1,"source":"fresh_read"}"#,
            r#"{"intent_digest":"d","idempotency_key":"k"}"#,
            r#"{"idempotency_key":"k","intent_digest":"d","extra":1}"#,
            r#"null"#,
        ] {
            assert!(matches!(round_trip(other), EvidenceDetail::Other(_)), "{other}");
        }
    }

    #[test]
    fn receipt_results_have_exactly_a_tool_results_shape() {
        let read = |text: &str| ReceiptResult::from_value(&serde_json::from_str(text).expect("json"));
        let result = read(r#"{"output_text":"a","output_json":{"b":1}}"#).expect("a result");
        assert_eq!(
            serde_json::to_string(&result.to_value()).expect("json"),
            r#"{"output_text":"a","output_json":{"b":1}}"#
        );
        assert_eq!(read(r#"{"output_text":"","output_json":null}"#).map(|result| result.output_json), Some(None));
        for malformed in [
            r#"{"output_text":"a"}"#,
            r#"{"output_text":"a","output_json":1}"#,
            r#"{"output_text":1,"output_json":null}"#,
            r#"{"output_text":"a","output_json":null,"more":1}"#,
            r#""a""#,
        ] {
            assert_eq!(read(malformed), None, "{malformed}");
        }
    }

    #[test]
    fn kinds_keep_their_words() {
        for known in EvidenceKind::KNOWN {
            let text = serde_json::to_string(&known).expect("json");
            assert_eq!(serde_json::from_str::<EvidenceKind>(&text).expect("kind"), known);
        }
        let other: EvidenceKind = serde_json::from_str(r#""made_up""#).expect("kind");
        assert_eq!(serde_json::to_string(&other).expect("json"), r#""made_up""#);
    }
}
