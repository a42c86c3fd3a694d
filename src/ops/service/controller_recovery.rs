//! The controller's recovery: after a failed bridge run, the service
//! policy's recovery rules are considered (once per controller run). A rule
//! whose conditions hold rewrites the goal; it applies only when the
//! rewritten goal routes to the plan the user's goal routes to, or to a
//! plan that plan declares in `recovery_plans`. Then that plan is offered
//! for the rewritten goal, under the rule (`recovery_applied`); otherwise
//! `recovery_skipped` says why. A plan run in place of the user's is a
//! substitute: its outcome is never the controller run's
//! ([`crate::ops::service::controller`]).

use serde::{Deserialize, Serialize};

use crate::model::FailureClass;
use crate::ops::service::Service;
use crate::ops::service::controller_event::{ControllerEvent, RecoveryApplied, RecoveryConsidered, RecoverySkipped};
use crate::router::select;
use crate::store::{RecordWriter, StoreError};

/// A recovery rule that applied: the goal it rewrote to and the plan that
/// goal routes to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedRecovery {
    pub rule_id: String,
    pub goal: String,
    pub plan_id: String,
}

/// Where a controller run stands when a bridge run failed.
pub(crate) struct Failed<'a> {
    /// The user's goal.
    pub goal: &'a str,
    /// The goal the failed run got.
    pub current_goal: &'a str,
    pub recovery_attempted: bool,
    pub iteration: u32,
    pub failure_class: Option<FailureClass>,
}

/// Logs `recovery_considered`, then `recovery_applied` or
/// `recovery_skipped`. Returns the recovery that applied, if any.
pub(crate) fn consider_recovery(
    service: &Service,
    records: &mut RecordWriter,
    failed: Failed<'_>,
) -> Result<Option<AppliedRecovery>, StoreError> {
    let Failed { iteration, failure_class, .. } = failed;
    let original = failed.current_goal.to_string();
    let applied = applicable_rule(service, &failed);
    let reason = match &applied {
        Ok((recovery, _)) => format!("rule `{}` matches", recovery.rule_id),
        Err(why) => why.clone(),
    };
    records.event(
        service.now(),
        &ControllerEvent::RecoveryConsidered(RecoveryConsidered {
            iteration,
            original_goal: original.clone(),
            failure_class,
            recovery_applied: applied.is_ok(),
            reason,
        }),
    )?;
    match applied {
        Ok((recovery, rule_reason)) => {
            records.event(
                service.now(),
                &ControllerEvent::RecoveryApplied(RecoveryApplied {
                    iteration,
                    original_goal: original,
                    rewritten_goal: recovery.goal.clone(),
                    rule_id: recovery.rule_id.clone(),
                    rule_reason,
                    plan_id: recovery.plan_id.clone(),
                }),
            )?;
            Ok(Some(recovery))
        }
        Err(why) => {
            records.event(
                service.now(),
                &ControllerEvent::RecoverySkipped(RecoverySkipped { iteration, original_goal: original, reason: why }),
            )?;
            Ok(None)
        }
    }
}

/// The first rule that matches `goal` and `failure_class` and whose
/// rewrite routes to a plan the user's goal's plan allows, with the rule's
/// reason; or why none applies.
fn applicable_rule(service: &Service, failed: &Failed<'_>) -> Result<(AppliedRecovery, String), String> {
    let (goal, failure_class) = (failed.current_goal, failed.failure_class);
    if failed.recovery_attempted {
        return Err("a recovery was already attempted in this controller run".to_string());
    }
    let rule = service.policy.recovery.iter().find(|rule| rule.matches(goal, failure_class)).ok_or_else(|| {
        format!(
            "no recovery rule matches this goal and failure class `{}`",
            failure_class.map_or("none", FailureClass::as_str)
        )
    })?;
    let catalog = &service.adapters.agent.catalog;
    let (goal_plan, _) = select(catalog, failed.goal).map_err(|why| format!("the goal routes to no plan: {why}"))?;
    let (plan, _) = select(catalog, &rule.rewrite)
        .map_err(|why| format!("rule `{}` rewrites the goal to one that routes to no plan: {why}", rule.id))?;
    if plan.id != goal_plan.id && !goal_plan.recovery_plans.contains(&plan.id) {
        return Err(format!(
            "rule `{}` rewrites the goal to one that routes to plan `{}`, which plan `{}` does not declare in \
             `recovery_plans`",
            rule.id, plan.id, goal_plan.id
        ));
    }
    let recovery = AppliedRecovery { rule_id: rule.id.clone(), goal: rule.rewrite.clone(), plan_id: plan.id.clone() };
    Ok((recovery, rule.reason.clone()))
}
