//! The `approvals` table: the cross-node coordination of approvals in the
//! PostgreSQL store. The run's log stays the verifiable record (the same
//! `approval_granted` / `approval_rejected` / `approval_verified` lines as
//! on the file store, so an export still equals its file twin); the table
//! is what lets any node decide and any worker use an approval safely:
//!
//! - a decision is a row written in the transaction of the checkpoint that
//!   records its event ([`record`]), under the lease and the compare-and-set
//!   on `state_version`: of two concurrent decisions exactly one commits;
//! - a step uses an approval once, before its action runs ([`consume`]), in
//!   a transaction guarded by the lease and the loaded version: the row
//!   must be live and unexpired in database time, and it gets
//!   `consumed_at`, `consumed_lease` and `consumed_seq` (the seq of the
//!   step's `approval_verified`). A holder that died after using it and
//!   before the step's checkpoint left a use the log never recorded; the
//!   next holder (a newer lease) takes that use over, as `resume` continues
//!   a crashed step on the file store (receipts keep keyed effects once);
//! - on every read the rows are checked against the verified log
//!   ([`check_against_log`]): a row the log does not record, or a decision
//!   or use the log records and the table lost or changed, is refused as
//!   tampered.
//!
//! The event names are spelled here because the table mirrors those lines
//! of the log (the runtime's event enum is the one place they are written).

use deadpool_postgres::{GenericClient, Pool};
use serde_json::Value;
use tokio_postgres::types::ToSql;

use super::error::store_error;
use super::lease::{LeaseKey, refusal};
use super::session::{connect, execute, query};
use super::sql;
use crate::store::{ApprovalDecision, ApprovalUse, AuditEvent, LoadedRun, StoreError, Verdict};

const GRANTED: &str = "approval_granted";
const REJECTED: &str = "approval_rejected";
const VERIFIED: &str = "approval_verified";

/// One row of `approvals`, as the load check reads it.
#[derive(Debug, Clone)]
pub(super) struct ApprovalRow {
    state_version: i64,
    step_id: String,
    fingerprint: String,
    scope: String,
    approved: bool,
    decided_by: Option<String>,
    reason: Option<String>,
    consumed_seq: Option<i64>,
}

/// Every decision on run `run_id`, oldest first.
pub(super) async fn read_rows<C: GenericClient + Sync>(
    client: &C,
    run_id: &str,
) -> Result<Vec<ApprovalRow>, StoreError> {
    let rows = query(client, sql::READ_APPROVALS, &[&run_id], "read the run's approvals").await?;
    Ok(rows
        .iter()
        .map(|row| ApprovalRow {
            state_version: row.get(0),
            step_id: row.get(1),
            fingerprint: row.get(2),
            scope: row.get(3),
            approved: row.get::<_, String>(4) == "approved",
            decided_by: row.get(5),
            reason: row.get(6),
            consumed_seq: row.get(7),
        })
        .collect())
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Writes `decision` on run `run_id` inside the checkpoint's transaction.
pub(super) async fn record<C: GenericClient + Sync>(
    client: &C,
    run_id: &str,
    decision: &ApprovalDecision,
) -> Result<(), StoreError> {
    let version = to_i64(decision.state_version);
    let (step, fingerprint, scope, by) =
        (&decision.step_id, &decision.fingerprint, &decision.scope, &decision.decided_by);
    match &decision.verdict {
        Verdict::Approved { expires_in } => {
            let secs = expires_in.as_secs_f64();
            let params: [&(dyn ToSql + Sync); 7] = [&run_id, step, fingerprint, &version, scope, by, &secs];
            let rows = query(client, sql::RECORD_APPROVAL, &params, "record the approval").await?;
            if rows.is_empty() {
                return Err(StoreError::Tampered {
                    id: run_id.to_string(),
                    reason: format!(
                        "the `approvals` table holds a live approval of another action at state version {}",
                        decision.state_version
                    ),
                });
            }
        }
        Verdict::Rejected { reason } => {
            let params: [&(dyn ToSql + Sync); 7] = [&run_id, step, fingerprint, &version, scope, by, reason];
            execute(client, sql::RECORD_REJECTION, &params, "record the rejection").await?;
        }
    }
    Ok(())
}

/// Uses `approval` for the holder of `key`, whose stored checkpoint is
/// version `expected` with its last event at `head_seq`; the step's
/// `approval_verified` is event `seq`. One transaction: the lease guard,
/// then the use.
pub(super) async fn consume(
    pool: &Pool,
    key: &LeaseKey,
    (expected, head_seq, seq): (u64, u64, u64),
    approval: &ApprovalUse,
) -> Result<(), StoreError> {
    let mut client = connect(pool).await?;
    let transaction = client.transaction().await.map_err(store_error("start using the approval"))?;
    let expected_i = to_i64(expected);
    let params: [&(dyn ToSql + Sync); 6] = [&key.kind, &key.id, &key.owner, &key.token, &expected_i, &key.secs];
    if execute(&transaction, sql::GUARD_RUN, &params, "guard the run").await? == 0 {
        return Err(refusal(&transaction, key, expected).await);
    }
    let version = to_i64(approval.state_version);
    let (seq, head) = (to_i64(seq), to_i64(head_seq));
    let params: [&(dyn ToSql + Sync); 8] =
        [&key.id, &version, &approval.step_id, &approval.fingerprint, &approval.scope, &key.token, &seq, &head];
    if query(&transaction, sql::CONSUME_APPROVAL, &params, "use the approval").await?.is_empty() {
        let reason = why_unusable(&transaction, &key.id, approval).await?;
        return Err(StoreError::ApprovalRefused { id: key.id.clone(), reason });
    }
    transaction.commit().await.map_err(store_error("commit the use of the approval"))
}

/// Why no approval of the frozen action could be used, in the words of
/// the runtime's own refusals (`approval_invalid: …`).
async fn why_unusable<C: GenericClient + Sync>(
    client: &C,
    run_id: &str,
    approval: &ApprovalUse,
) -> Result<String, StoreError> {
    let version = to_i64(approval.state_version);
    let rows = query(client, sql::APPROVALS_OF_ACTION, &[&run_id, &version], "read the approval").await?;
    let Some(row) = rows.first() else {
        return Ok(format!(
            "the store holds no approval of step `{}` frozen at state version {}; approve again",
            approval.step_id, approval.state_version
        ));
    };
    let (step, fingerprint, scope): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    if step != approval.step_id || fingerprint != approval.fingerprint || scope != approval.scope {
        return Ok("the approval the store holds is for a different action (fingerprint mismatch)".to_string());
    }
    if row.get::<_, bool>(3) {
        let (lease, seq): (Option<i64>, Option<i64>) = (row.get(4), row.get(5));
        return Ok(format!(
            "the approval was used already (by lease {}, at audit event {}): an approval is used once",
            lease.unwrap_or_default(),
            seq.unwrap_or_default()
        ));
    }
    if row.get::<_, Option<bool>>(6).unwrap_or(true) {
        let expires: Option<String> = row.get(7);
        return Ok(format!(
            "the approval expired at {} (database time); approve again",
            expires.as_deref().unwrap_or("-")
        ));
    }
    Ok("the approval cannot be used now; approve again".to_string())
}

fn text<'e>(event: &'e AuditEvent, field: &str) -> Option<&'e str> {
    event.details.get(field).and_then(Value::as_str)
}

fn version(event: &AuditEvent) -> Option<i64> {
    event.details.get("state_version").and_then(Value::as_u64).map(to_i64)
}

/// Whether `row` is the action `event` names (step, fingerprint, scope).
fn same_action(row: &ApprovalRow, event: &AuditEvent) -> bool {
    event.step_id.as_deref() == Some(row.step_id.as_str())
        && text(event, "fingerprint") == Some(row.fingerprint.as_str())
        && text(event, "scope") == Some(row.scope.as_str())
}

/// Whether `event` (an `approval_granted` or `approval_rejected`) records
/// the decision `row` holds.
fn records(event: &AuditEvent, row: &ApprovalRow) -> bool {
    same_action(row, event)
        && if row.approved {
            event.event_type == GRANTED
                && version(event) == Some(row.state_version)
                && text(event, "approved_by") == row.decided_by.as_deref()
        } else {
            event.event_type == REJECTED && text(event, "reason") == row.reason.as_deref()
        }
}

/// Checks the rows of `approvals` against the verified log of `loaded`.
pub(super) fn check_against_log(run_id: &str, loaded: &LoadedRun, rows: &[ApprovalRow]) -> Result<(), StoreError> {
    let tampered = |reason: String| StoreError::Tampered { id: run_id.to_string(), reason };
    let events = &loaded.audit;
    let of_type = |name: &'static str| events.iter().filter(move |event| event.event_type == name);
    // Every row is a decision the log records.
    for row in rows {
        if !events.iter().any(|event| records(event, row)) {
            let decision = if row.approved { "approval" } else { "rejection" };
            return Err(tampered(format!(
                "the `approvals` table holds a {decision} of step `{}` (state version {}) that the log does not record",
                row.step_id, row.state_version
            )));
        }
    }
    // Every use the log records is a used row, at that event.
    for event in of_type(VERIFIED) {
        let seq = to_i64(event.seq);
        let used = rows.iter().any(|row| {
            row.approved
                && row.consumed_seq == Some(seq)
                && same_action(row, event)
                && version(event) == Some(row.state_version)
        });
        if !used {
            return Err(tampered(format!(
                "the log records the use of the approval of step `{}` at event {seq}; the `approvals` table does not",
                event.step_id.as_deref().unwrap_or("-")
            )));
        }
    }
    // Every rejection the log records is a row.
    for event in of_type(REJECTED) {
        if !rows.iter().any(|row| !row.approved && records(event, row)) {
            return Err(tampered(format!(
                "the log records the rejection of step `{}`; the `approvals` table does not",
                event.step_id.as_deref().unwrap_or("-")
            )));
        }
    }
    // The approval the checkpoint holds is a row (used only by a holder
    // that died before the step's checkpoint, if at all).
    if let (Some(approval), Some(pending)) = (&loaded.state.approval, &loaded.state.pending_action) {
        let head = to_i64(loaded.audit_tail.seq);
        let held = rows.iter().any(|row| {
            row.approved
                && row.step_id == pending.step_id
                && row.fingerprint == approval.fingerprint
                && row.scope == approval.scope
                && u64::try_from(row.state_version).ok() == Some(approval.state_version)
                && row.decided_by == approval.approved_by
                && row.consumed_seq.is_none_or(|seq| seq > head)
        });
        if !held {
            return Err(tampered(format!(
                "the approval of step `{}` the checkpoint holds is not in the `approvals` table (or differs there)",
                pending.step_id
            )));
        }
    }
    Ok(())
}
