//! `approve`: records an approval bound to the frozen action, without
//! running it (`resume` runs it).

use std::path::Path;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Map, json};

use crate::runtime::approval::{ApprovalClaims, check_claims};
use crate::runtime::control::error::ControlError;
use crate::runtime::control::open::open_waiting;
use crate::runtime::recorder::Recorder;
use crate::runtime::{EventType, RuntimeEnv, format_timestamp};
use crate::store::{Approval, PendingAction};

/// What `approve` recorded.
pub struct ApproveOutcome {
    pub pending: PendingAction,
    pub approval: Approval,
}

/// Records an approval bound to the frozen action's fingerprint, the state
/// version that froze it, its scope, and an expiry.
pub fn approve(
    workspace: &Path,
    run_id: &str,
    claims: &ApprovalClaims,
    expires_in: Duration,
    approved_by: Option<String>,
    env: &RuntimeEnv,
) -> Result<ApproveOutcome, ControlError> {
    let (run_dir, mut state, pending) = open_waiting(workspace, run_id, env)?;
    check_claims(&pending, claims)?;
    let now = env.clock.now();
    let expires_in = SignedDuration::try_from(expires_in).unwrap_or(SignedDuration::MAX);
    let expires_at: Timestamp = now.checked_add(expires_in).unwrap_or(Timestamp::MAX);
    let approval = Approval {
        fingerprint: pending.fingerprint.clone(),
        state_version: pending.state_version,
        scope: pending.scope.clone(),
        approved_by,
        approved_at: format_timestamp(now),
        expires_at: format_timestamp(expires_at),
    };
    let mut details = Map::new();
    details.insert("fingerprint".into(), json!(approval.fingerprint));
    details.insert("scope".into(), json!(approval.scope));
    details.insert("state_version".into(), json!(approval.state_version));
    details.insert("approved_by".into(), json!(approval.approved_by));
    details.insert("expires_at".into(), json!(approval.expires_at));
    let mut recorder = Recorder::new(run_dir, run_id, env.clock.as_ref());
    recorder.emit(EventType::ApprovalGranted, Some(&pending.step_id), Some("ok"), details)?;
    state.approval = Some(approval.clone());
    recorder.checkpoint(&mut state)?;
    Ok(ApproveOutcome { pending, approval })
}
