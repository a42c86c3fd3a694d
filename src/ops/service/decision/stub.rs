//! The deterministic stub rules (a fixed table of goals, plus recovery), within
//! the offered [`Choices`](crate::ops::service::decision::choices::Choices): the
//! stub never runs a plan that is not offered.
//!
//! | condition | choice | reason |
//! |---|---|---|
//! | no previous run (iteration 0), a plan offered | `run_plan` | first execution |
//! | no plan offered | `stop` | nothing to run (why) |
//! | last run done and agent done | `stop` | success |
//! | iteration approaching the maximum | `stop` | safety cap |
//! | last run failed, a recovery rewrite was just applied | `run_plan` (the plan the rule offers) | retry with the rewritten goal |
//! | last run failed | `stop` | no controller-level retry |

use crate::ops::service::decision::DecisionContext;
use crate::ops::service::decision::answer::Choice;

/// The stub's choice and reason.
pub fn decide(context: &DecisionContext<'_>) -> (Choice, String) {
    let plans = &context.choices.plans;
    // After a recovery rule applied, the plan it offers; else the first.
    let recovery = plans.iter().find(|plan| plan.recovery_rule.is_some()).filter(|_| context.recovery_pending);
    let offered = recovery.or(plans.first()).map(|plan| plan.id.clone());
    let Some(last_status) = context.last_status else {
        return match offered {
            Some(plan) => (Choice::RunPlan(plan), "first execution".to_string()),
            None => (Choice::Stop, nothing_to_run(context)),
        };
    };
    if last_status == "done" && context.last_agent_status.is_none_or(|status| status == "done") {
        return (Choice::Stop, "success: the last run is done".to_string());
    }
    if context.iteration + 1 >= context.max_iterations {
        return (Choice::Stop, "safety cap: iteration approaching the maximum".to_string());
    }
    if last_status == "failed" {
        return match offered {
            Some(plan) if context.recovery_pending => {
                (Choice::RunPlan(plan), "retry with the goal rewritten by a recovery rule".to_string())
            }
            None if context.recovery_pending => (Choice::Stop, nothing_to_run(context)),
            _ => (Choice::Stop, "the last run failed; no controller-level retry".to_string()),
        };
    }
    (Choice::Stop, format!("unexpected last status `{last_status}`"))
}

fn nothing_to_run(context: &DecisionContext<'_>) -> String {
    format!("nothing to run: {}", context.choices.run_withheld.as_deref().unwrap_or("no plan is offered"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::service::decision::choices::{Choices, OfferedPlan};

    fn context<'a>(
        choices: &'a Choices,
        iteration: u32,
        last: Option<(&'static str, &'static str)>,
        recovery_pending: bool,
    ) -> DecisionContext<'a> {
        DecisionContext {
            goal: "g",
            original_goal: "g",
            iteration,
            max_iterations: 3,
            last_status: last.map(|(status, _)| status),
            last_agent_status: last.map(|(_, agent)| agent),
            last_failure_class: None,
            last_error: None,
            recovery_attempted: recovery_pending,
            recovery_pending,
            choices,
        }
    }

    #[test]
    fn the_stub_runs_the_offered_plan_then_stops_or_recovers_once() {
        let run = Choices::run_or_stop(OfferedPlan::new("p", "", "g"));
        let choice = |ctx: DecisionContext<'_>| decide(&ctx).0;
        assert_eq!(choice(context(&run, 0, None, false)), Choice::RunPlan("p".into()));
        assert_eq!(choice(context(&run, 1, Some(("done", "done")), false)), Choice::Stop);
        assert_eq!(choice(context(&run, 1, Some(("failed", "failed")), false)), Choice::Stop);
        assert_eq!(choice(context(&run, 1, Some(("failed", "failed")), true)), Choice::RunPlan("p".into()));
        assert_eq!(choice(context(&run, 2, Some(("failed", "failed")), true)), Choice::Stop);
        assert_eq!(
            decide(&context(&run, 2, Some(("failed", "failed")), true)).1,
            "safety cap: iteration approaching the maximum"
        );
        let none = Choices::stop_only("ambiguous goal");
        assert_eq!(decide(&context(&none, 0, None, false)), (Choice::Stop, "nothing to run: ambiguous goal".into()));
    }
}
