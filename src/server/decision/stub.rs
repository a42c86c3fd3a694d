//! The deterministic stub rules (the seed's table, plus recovery).
//!
//! | condition | action | reason |
//! |---|---|---|
//! | no previous run (iteration 0) | `run_agent` | first execution |
//! | last run done and agent done | `stop` | success |
//! | last run failed, a recovery rewrite was just applied, below the cap | `run_agent` | retry with the rewritten goal |
//! | last run failed | `stop` | no controller-level retry |
//! | iteration approaching the maximum | `stop` | safety cap |

use crate::server::decision::{Action, DecisionContext};

/// The stub's answer: action, goal and reason.
pub fn decide(context: &DecisionContext<'_>) -> (Action, String, String) {
    let goal = context.goal.to_string();
    let Some(last_status) = context.last_status else {
        return (Action::RunAgent, goal, "first execution".to_string());
    };
    let approaching_max = context.iteration + 1 >= context.max_iterations;
    if last_status == "done" && context.last_agent_status.is_none_or(|status| status == "done") {
        return (Action::Stop, goal, "success: the last run is done".to_string());
    }
    if approaching_max {
        return (Action::Stop, goal, "safety cap: iteration approaching the maximum".to_string());
    }
    if last_status == "failed" {
        if context.recovery_pending {
            return (Action::RunAgent, goal, "retry with the goal rewritten by a recovery rule".to_string());
        }
        return (Action::Stop, goal, "the last run failed; no controller-level retry".to_string());
    }
    (Action::Stop, goal, format!("unexpected last status `{last_status}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(
        iteration: u32,
        last: Option<(&'static str, &'static str)>,
        recovery_pending: bool,
    ) -> DecisionContext<'static> {
        DecisionContext {
            goal: "g",
            original_goal: "g",
            iteration,
            max_iterations: 3,
            last_status: last.map(|(status, _)| status),
            last_agent_status: last.map(|(_, agent)| agent),
            recovery_attempted: recovery_pending,
            recovery_pending,
        }
    }

    #[test]
    fn the_stub_follows_the_seed_table() {
        let action = |ctx: DecisionContext<'_>| decide(&ctx).0;
        assert_eq!(action(context(0, None, false)), Action::RunAgent);
        assert_eq!(action(context(1, Some(("done", "done")), false)), Action::Stop);
        assert_eq!(action(context(1, Some(("failed", "failed")), false)), Action::Stop);
        assert_eq!(action(context(1, Some(("failed", "failed")), true)), Action::RunAgent);
        assert_eq!(action(context(2, Some(("failed", "failed")), true)), Action::Stop);
        assert_eq!(
            decide(&context(2, Some(("failed", "failed")), true)).2,
            "safety cap: iteration approaching the maximum"
        );
    }
}
