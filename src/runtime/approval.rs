//! Approval gates: freezing an action, its fingerprint, and checking that an
//! approval matches exactly what was frozen.

use jiff::Timestamp;
use serde_json::json;

use crate::store::canonical::canonical_digest;
use crate::store::{Approval, PendingAction, RunState};

/// SHA-256 of the canonical JSON of what a person approves: the resolved
/// action, its kind, risk, idempotency key and target scope.
pub fn fingerprint(
    kind: &str,
    action: &serde_json::Value,
    risk: &str,
    idempotency_key: Option<&str>,
    scope: &str,
) -> String {
    let value = json!({
        "kind": kind,
        "action": action,
        "risk": risk,
        "idempotency_key": idempotency_key,
        "scope": scope,
    });
    canonical_digest(&value)
}

/// Recomputes a pending action's fingerprint from its fields.
pub fn recompute(pending: &PendingAction) -> String {
    fingerprint(&pending.kind, &pending.action, &pending.risk, pending.idempotency_key.as_deref(), &pending.scope)
}

/// Why an approval cannot be used (`approval_invalid`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approval_invalid: {0}")]
pub struct ApprovalInvalid(pub String);

/// What `planrun approve` was told to check against the frozen action.
#[derive(Debug, Clone, Default)]
pub struct ApprovalClaims {
    pub fingerprint: Option<String>,
    pub scope: Option<String>,
    pub state_version: Option<u64>,
}

/// Checks the operator's claims against the frozen action before an approval
/// is recorded.
pub fn check_claims(pending: &PendingAction, claims: &ApprovalClaims) -> Result<(), ApprovalInvalid> {
    if recompute(pending) != pending.fingerprint {
        return Err(ApprovalInvalid("the frozen action does not match its own fingerprint".to_string()));
    }
    if let Some(fingerprint) = &claims.fingerprint
        && *fingerprint != pending.fingerprint
    {
        return Err(ApprovalInvalid(format!(
            "fingerprint `{fingerprint}` is not the frozen action's `{}`",
            pending.fingerprint
        )));
    }
    if let Some(scope) = &claims.scope
        && *scope != pending.scope
    {
        return Err(ApprovalInvalid(format!("scope `{scope}` is not the frozen action's `{}`", pending.scope)));
    }
    if let Some(version) = claims.state_version
        && version != pending.state_version
    {
        return Err(ApprovalInvalid(format!(
            "state version {version} is not the version that froze the action ({})",
            pending.state_version
        )));
    }
    Ok(())
}

/// Checks a recorded approval before the frozen action runs: it must name
/// the same fingerprint, state version and scope, and `approved_at <= now <
/// expires_at`.
pub fn check_approval(state: &RunState, now: Timestamp) -> Result<(&PendingAction, &Approval), ApprovalInvalid> {
    let Some(pending) = &state.pending_action else {
        return Err(ApprovalInvalid("the run has no pending action".to_string()));
    };
    let Some(approval) = &state.approval else {
        return Err(ApprovalInvalid(format!(
            "step `{}` is waiting for approval: run `planrun approve {}` first",
            pending.step_id, state.run_id
        )));
    };
    if recompute(pending) != pending.fingerprint {
        return Err(ApprovalInvalid("the frozen action does not match its own fingerprint".to_string()));
    }
    if approval.fingerprint != pending.fingerprint {
        return Err(ApprovalInvalid("the approval is for a different action (fingerprint mismatch)".to_string()));
    }
    if approval.state_version != pending.state_version {
        return Err(ApprovalInvalid(format!(
            "the approval is bound to state version {}, the action was frozen at version {}",
            approval.state_version, pending.state_version
        )));
    }
    if approval.scope != pending.scope {
        return Err(ApprovalInvalid(format!(
            "the approval's scope `{}` is not the action's `{}`",
            approval.scope, pending.scope
        )));
    }
    let approved: Timestamp = approval
        .approved_at
        .parse()
        .map_err(|_| ApprovalInvalid(format!("unreadable approval time `{}`", approval.approved_at)))?;
    let expires: Timestamp = approval
        .expires_at
        .parse()
        .map_err(|_| ApprovalInvalid(format!("unreadable expiry `{}`", approval.expires_at)))?;
    // `approved_at <= now < expires_at`: a clock set back before the
    // approval cannot bring an expired approval back to life.
    if now < approved {
        return Err(ApprovalInvalid(format!(
            "the approval was given at {}, after the clock's now ({}); the clock went back, approve again",
            approval.approved_at,
            crate::runtime::format_timestamp(now)
        )));
    }
    if now >= expires {
        return Err(ApprovalInvalid(format!("the approval expired at {}; approve again", approval.expires_at)));
    }
    Ok((pending, approval))
}
