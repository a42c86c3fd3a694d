//! Goal → plan routing by keywords.
//!
//! A plan matches a goal when one of its keywords is a substring of the goal,
//! both lowercased (Unicode-aware, so `ПРОВЕРЬ что тут есть` matches
//! `проверь что тут есть`). The plan whose matching keyword is longest (in
//! characters) wins; two plans tied at the longest length are refused as
//! ambiguous rather than picked by chance; a goal that matches nothing goes
//! to the one plan with `default = true`.

use serde::Serialize;

use crate::load::Catalog;
use crate::model::{Plan, Policy};

/// One plan that matched, with its longest matching keyword.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub plan_id: String,
    pub keyword: String,
    /// Keyword length in characters.
    pub length: usize,
}

/// The outcome of routing one goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RouteOutcome {
    /// `plan` (index into the router's plans) wins by keyword.
    Matched { plan: usize, plan_id: String, keyword: String },
    /// Nothing matched; the default plan takes the goal.
    Default { plan: usize, plan_id: String },
    /// Several plans tie at the longest keyword length.
    Ambiguous { plan_ids: Vec<String>, length: usize },
    /// Nothing matched and no plan is the default.
    NoRoute,
}

/// The decision with everything needed to explain it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteDecision {
    pub goal: String,
    /// Every matching plan, longest keyword first, then by plan id.
    pub candidates: Vec<Candidate>,
    #[serde(flatten)]
    pub outcome: RouteOutcome,
}

impl RouteDecision {
    /// The chosen plan's index, if routing chose one.
    pub fn plan(&self) -> Option<usize> {
        match self.outcome {
            RouteOutcome::Matched { plan, .. } | RouteOutcome::Default { plan, .. } => Some(plan),
            RouteOutcome::Ambiguous { .. } | RouteOutcome::NoRoute => None,
        }
    }

    /// One sentence saying why.
    pub fn explanation(&self) -> String {
        match &self.outcome {
            RouteOutcome::Matched { plan_id, keyword, .. } => {
                let length = keyword.chars().count();
                let others = self.candidates.len().saturating_sub(1);
                if others == 0 {
                    format!("`{plan_id}` is the only plan with a keyword in the goal (`{keyword}`)")
                } else {
                    format!("`{plan_id}` has the longest matching keyword (`{keyword}`, {length} characters)")
                }
            }
            RouteOutcome::Default { plan_id, .. } => {
                format!("no keyword matches the goal; `{plan_id}` is the default plan")
            }
            RouteOutcome::Ambiguous { plan_ids, length } => format!(
                "ambiguous goal: plans {} match with keywords of equal length ({length} characters); make the goal or a keyword more specific",
                plan_ids.iter().map(|id| format!("`{id}`")).collect::<Vec<_>>().join(" and ")
            ),
            RouteOutcome::NoRoute => "no keyword matches the goal and no plan has `default = true`".to_string(),
        }
    }
}

/// Routes goals over a fixed set of plans. Keywords are lowercased once.
pub struct Router<'a> {
    plans: &'a [Plan],
    keywords: Vec<Vec<String>>,
}

/// A goal with no character but white space (`char::is_whitespace`, the set
/// the service schema's pattern lists): refused by every front end, since it
/// would route to the default plan and run it.
pub fn goal_is_blank(goal: &str) -> bool {
    goal.chars().all(char::is_whitespace)
}

impl<'a> Router<'a> {
    pub fn new(plans: &'a [Plan]) -> Self {
        let keywords =
            plans.iter().map(|plan| plan.keywords.iter().map(|keyword| keyword.to_lowercase()).collect()).collect();
        Router { plans, keywords }
    }

    pub fn route(&self, goal: &str) -> RouteDecision {
        let lowered = goal.to_lowercase();
        let mut candidates: Vec<(usize, Candidate)> = Vec::new();
        for (index, (plan, keywords)) in self.plans.iter().zip(&self.keywords).enumerate() {
            let best = keywords
                .iter()
                .zip(&plan.keywords)
                .filter(|(lower, _)| !lower.is_empty() && lowered.contains(lower.as_str()))
                .map(|(lower, original)| (lower.chars().count(), original))
                .max_by_key(|(length, _)| *length);
            if let Some((length, keyword)) = best {
                candidates.push((index, Candidate { plan_id: plan.id.clone(), keyword: keyword.clone(), length }));
            }
        }
        candidates.sort_by(|(_, a), (_, b)| b.length.cmp(&a.length).then_with(|| a.plan_id.cmp(&b.plan_id)));
        let outcome = match candidates.as_slice() {
            [] => match self.plans.iter().position(|plan| plan.default) {
                Some(plan) => RouteOutcome::Default { plan, plan_id: self.plans[plan].id.clone() },
                None => RouteOutcome::NoRoute,
            },
            [(plan, first), rest @ ..] => {
                let tied: Vec<String> = rest
                    .iter()
                    .take_while(|(_, other)| other.length == first.length)
                    .map(|(_, other)| other.plan_id.clone())
                    .collect();
                if tied.is_empty() {
                    RouteOutcome::Matched {
                        plan: *plan,
                        plan_id: first.plan_id.clone(),
                        keyword: first.keyword.clone(),
                    }
                } else {
                    let mut plan_ids = vec![first.plan_id.clone()];
                    plan_ids.extend(tied);
                    RouteOutcome::Ambiguous { plan_ids, length: first.length }
                }
            }
        };
        RouteDecision {
            goal: goal.to_string(),
            candidates: candidates.into_iter().map(|(_, candidate)| candidate).collect(),
            outcome,
        }
    }
}

/// Routes `goal` over a catalog and returns the chosen plan with the
/// policy it names, or why there is none (ambiguous, no route, a policy
/// that was not loaded).
pub fn select<'c>(catalog: &'c Catalog, goal: &str) -> Result<(&'c Plan, &'c Policy), String> {
    let decision = Router::new(&catalog.plans).route(goal);
    let index = decision.plan().ok_or_else(|| decision.explanation())?;
    let plan = &catalog.plans[index];
    let policy = catalog
        .policies
        .get(&plan.policy)
        .ok_or_else(|| format!("plan `{}` names policy `{}`, which was not loaded", plan.id, plan.policy))?;
    Ok((plan, policy))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunStatus, SourceRef};

    fn plan(id: &str, keywords: &[&str], default: bool) -> Plan {
        Plan {
            id: id.to_string(),
            description: String::new(),
            keywords: keywords.iter().map(|keyword| keyword.to_string()).collect(),
            policy: "default".to_string(),
            default,
            expected_status: RunStatus::Done,
            inputs: Vec::new(),
            steps: Vec::new(),
            budget: Default::default(),
            verify: Vec::new(),
            recovery_plans: Vec::new(),
            source: SourceRef { path: format!("plans/{id}.toml"), sha256: String::new() },
            keyword_spans: Vec::new(),
        }
    }

    fn plans() -> Vec<Plan> {
        vec![
            plan("inspect", &["inspect project"], false),
            plan("inspect_ru", &["проверь что тут есть"], false),
            plan("deny", &["test deny"], false),
            plan("deny_bash", &["test deny bash"], false),
            plan("fallback", &[], true),
            plan("tie_a", &["abcd"], false),
            plan("tie_b", &["wxyz"], false),
        ]
    }

    #[test]
    fn matches_case_insensitively_across_unicode() {
        let plans = plans();
        let router = Router::new(&plans);
        for (goal, expected) in [
            ("please INSPECT Project now", "inspect"),
            ("ПРОВЕРЬ что тут есть", "inspect_ru"),
            ("test deny bash please", "deny_bash"),
            ("test deny rm", "deny"),
            ("anything else", "fallback"),
        ] {
            let decision = router.route(goal);
            let chosen = decision.plan().map(|index| plans[index].id.as_str());
            assert_eq!(chosen, Some(expected), "{goal}: {}", decision.explanation());
        }
    }

    #[test]
    fn longest_keyword_wins_and_every_candidate_is_listed() {
        let plans = plans();
        let decision = Router::new(&plans).route("test deny bash");
        let ids: Vec<_> = decision.candidates.iter().map(|candidate| candidate.plan_id.as_str()).collect();
        assert_eq!(ids, ["deny_bash", "deny"]);
        assert!(decision.explanation().contains("longest matching keyword"));
    }

    #[test]
    fn equal_length_matches_are_refused_naming_both() {
        let plans = plans();
        let decision = Router::new(&plans).route("abcd wxyz");
        assert_eq!(decision.plan(), None);
        assert_eq!(
            decision.outcome,
            RouteOutcome::Ambiguous { plan_ids: vec!["tie_a".to_string(), "tie_b".to_string()], length: 4 }
        );
    }

    #[test]
    fn no_default_means_no_route() {
        let plans = vec![plan("only", &["x"], false)];
        assert_eq!(Router::new(&plans).route("y").outcome, RouteOutcome::NoRoute);
    }
}
