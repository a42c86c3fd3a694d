//! [`ApprovalDecision`] and [`ApprovalUse`]: what a run's handle is told
//! about a person's decision on a frozen action and about the step that
//! uses an approval, so that a shared store can coordinate them across
//! processes (the PostgreSQL store's `approvals` table).
//!
//! The run's log stays the record of both (`approval_granted`,
//! `approval_rejected`, `approval_verified`, written by the runtime as for
//! every store); a store that keeps nothing beside the log (the file store,
//! whose run lock already makes one decision at a time) ignores them.

use std::time::Duration;

/// A person's decision on the action a run froze, recorded by the store
/// with the run's next checkpoint, in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    pub step_id: String,
    pub fingerprint: String,
    /// The `state_version` of the checkpoint that froze the action.
    pub state_version: u64,
    pub scope: String,
    /// Who decided (`approved_by`), when known.
    pub decided_by: Option<String>,
    pub verdict: Verdict,
}

/// What was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Approved for `expires_in`: a shared store judges the expiry on its
    /// own clock (the database's `now()`), from the moment it records it.
    Approved {
        expires_in: Duration,
    },
    Rejected {
        reason: Option<String>,
    },
}

/// The approval a resumed step is about to use: the frozen action it
/// approves. Used once, before the action runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalUse {
    pub step_id: String,
    pub fingerprint: String,
    /// The `state_version` of the checkpoint that froze the action.
    pub state_version: u64,
    pub scope: String,
}
