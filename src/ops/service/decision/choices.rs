//! The closed set of next steps planrun offers one decision, and the JSON
//! Schema of an answer that picks one of them.
//!
//! A model never writes a goal or a route: the controller builds the set
//! from the catalog and the run so far (`run_plan` with the plan the user's
//! goal routes to and, after a recovery rule applied, the recovery plan
//! that plan declares; or only `stop`), and the schema's enums are exactly
//! that set. The schema is sent with every request (structured output) and the
//! answer is validated against the same set after decoding
//! ([`crate::ops::service::decision::answer`]).

use serde::Serialize;
use serde_json::{Value, json};

/// The longest reason a decision may carry, in characters.
pub const MAX_REASON_CHARS: usize = 200;

/// The schema's description of `reason`. A model that copies it back as its
/// reason echoes the prompt, and the answer is refused.
pub const REASON_DESCRIPTION: &str = "why this choice, in one short sentence";

/// A plan a decision may run, with its catalog description (trusted: it
/// comes from the operator's plan files), the goal its run gets, and the
/// recovery rule it is offered under, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OfferedPlan {
    pub id: String,
    pub description: String,
    /// The user's goal, or a recovery rule's rewrite of it.
    pub goal: String,
    /// The service policy's recovery rule that offers it (`None`: the plan
    /// the user's goal routes to, run for that goal).
    pub recovery_rule: Option<String>,
}

impl OfferedPlan {
    /// Plan `id` offered for `goal`, under no recovery rule.
    pub fn new(id: &str, description: &str, goal: &str) -> Self {
        OfferedPlan {
            id: id.to_string(),
            description: description.to_string(),
            goal: goal.to_string(),
            recovery_rule: None,
        }
    }
}

/// What one decision may choose: `stop` always, `run_plan` with one of
/// `plans` when there is any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Choices {
    pub plans: Vec<OfferedPlan>,
    /// Why `run_plan` is not offered (empty `plans`), e.g. the last run is
    /// done and verified, or the goal routes to no plan.
    pub run_withheld: Option<String>,
}

impl Choices {
    /// `run_plan` (with `plan`) or `stop`.
    pub fn run_or_stop(plan: OfferedPlan) -> Self {
        Self::run_one_of_or_stop(vec![plan])
    }

    /// `run_plan` with one of `plans` (at least one), or `stop`.
    pub fn run_one_of_or_stop(plans: Vec<OfferedPlan>) -> Self {
        Choices { plans, run_withheld: None }
    }

    /// The offered plan `id`, if it is offered.
    pub fn plan(&self, id: &str) -> Option<&OfferedPlan> {
        self.plans.iter().find(|plan| plan.id == id)
    }

    /// Only `stop`, for `why`.
    pub fn stop_only(why: impl Into<String>) -> Self {
        Choices { plans: Vec::new(), run_withheld: Some(why.into()) }
    }

    /// The actions offered, in the schema's order.
    pub fn actions(&self) -> Vec<&'static str> {
        if self.plans.is_empty() { vec!["stop"] } else { vec!["run_plan", "stop"] }
    }

    pub fn plan_ids(&self) -> Vec<&str> {
        self.plans.iter().map(|plan| plan.id.as_str()).collect()
    }

    pub fn offers_plan(&self, id: &str) -> bool {
        self.plan(id).is_some()
    }

    /// The JSON Schema of a valid answer: every property required and no
    /// other allowed (what OpenAI's `strict` mode asks), `action` and
    /// `plan_id` closed enums of what is offered.
    pub fn schema(&self) -> Value {
        let mut plan_ids: Vec<Value> = self.plans.iter().map(|plan| json!(plan.id)).collect();
        plan_ids.push(Value::Null);
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["action", "plan_id", "reason"],
            "properties": {
                "action": {"type": "string", "enum": self.actions()},
                "plan_id": {"type": ["string", "null"], "enum": plan_ids,
                            "description": "the plan to run with `run_plan`; null with `stop`"},
                "reason": {"type": "string", "maxLength": MAX_REASON_CHARS, "description": REASON_DESCRIPTION}
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_is_the_offered_set() {
        let plan = OfferedPlan::new("flow_pwd", "pwd", "g");
        let schema = Choices::run_or_stop(plan).schema();
        assert_eq!(schema["properties"]["action"]["enum"], json!(["run_plan", "stop"]));
        assert_eq!(schema["properties"]["plan_id"]["enum"], json!(["flow_pwd", null]));
        let schema = Choices::stop_only("done").schema();
        assert_eq!(schema["properties"]["action"]["enum"], json!(["stop"]));
        assert_eq!(schema["properties"]["plan_id"]["enum"], json!([null]));
        assert_eq!(schema["additionalProperties"], json!(false));
    }
}
