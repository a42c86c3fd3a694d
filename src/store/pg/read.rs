//! Reading a run or a record back in one snapshot, and a run's strict
//! verification (rows, receipts, decisions).

use deadpool_postgres::{GenericClient, Pool};

use crate::store::{LoadedRun, StoreError};

use super::approvals::{self, ApprovalRow};
use super::error::store_error;
use super::session::{connect, query};
use super::sql;
use super::store::{AGENT, PgStore};
use super::verify::{EventRow, RunTexts, verify_run};

/// Reads an agent run's rows in one snapshot, with the decisions on it
/// (`approvals`) and the workspace it belongs to; `None` when it has no
/// checkpoint.
async fn read_run_texts(pool: &Pool, id: &str) -> Result<Option<(RunTexts, Vec<ApprovalRow>, String)>, StoreError> {
    let mut client = connect(pool).await?;
    let transaction = client.transaction().await.map_err(store_error("read the run"))?;
    transaction
        .batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .map_err(store_error("read the run"))?;
    let state = query(&transaction, sql::READ_STATE, &[&AGENT, &id], "read the run").await?;
    let Some((state, workspace)) =
        state.first().and_then(|row| Some((row.get::<_, Option<String>>(0)?, row.get::<_, String>(1))))
    else {
        return Ok(None);
    };
    let plan = query(&transaction, sql::READ_PLAN, &[&id], "read the run's plan").await?;
    let plan = plan.first().map(|row| row.get::<_, String>(0));
    let events = read_events(&transaction, AGENT, id).await?;
    let history = query(&transaction, sql::READ_HISTORY, &[&id], "read the run's history")
        .await?
        .iter()
        .map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1)))
        .collect();
    let approvals = approvals::read_rows(&transaction, id).await?;
    transaction.commit().await.map_err(store_error("read the run"))?;
    Ok(Some((RunTexts { state, plan, events, history }, approvals, workspace)))
}

async fn read_events<C: GenericClient + Sync>(client: &C, kind: &str, id: &str) -> Result<Vec<EventRow>, StoreError> {
    let rows = query(client, sql::READ_EVENTS, &[&kind, &id], "read the audit events").await?;
    Ok(rows.iter().map(|row| EventRow { seq: row.get(0), line: row.get(1), hash: row.get(2) }).collect())
}

/// Reads a record's checkpoint and events in one snapshot; `None` when it
/// has no checkpoint.
pub(super) async fn read_record_texts(
    pool: &Pool,
    kind: &'static str,
    id: &str,
) -> Result<Option<(String, Vec<EventRow>)>, StoreError> {
    let mut client = connect(pool).await?;
    let transaction = client.transaction().await.map_err(store_error("read the record"))?;
    transaction
        .batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await
        .map_err(store_error("read the record"))?;
    let state = query(&transaction, sql::READ_STATE, &[&kind, &id], "read the record").await?;
    let Some(state) = state.first().and_then(|row| row.get::<_, Option<String>>(0)) else {
        return Ok(None);
    };
    let events = read_events(&transaction, kind, id).await?;
    transaction.commit().await.map_err(store_error("read the record"))?;
    Ok(Some((state, events)))
}

impl PgStore {
    /// Reads run `run_id` and verifies it strictly: its rows, the
    /// receipts and the decisions (`approvals`) its log names.
    pub(super) fn verified(&self, run_id: &str) -> Result<(RunTexts, LoadedRun), StoreError> {
        let (texts, decisions, workspace) = self.texts(run_id)?;
        let loaded = verify_run(run_id, &texts, &self.sealer)?;
        self.check_receipts(run_id, &loaded, &workspace)?;
        approvals::check_against_log(run_id, &loaded, &decisions)?;
        Ok((texts, loaded))
    }

    pub(super) fn texts(&self, run_id: &str) -> Result<(RunTexts, Vec<ApprovalRow>, String), StoreError> {
        let id = run_id.to_string();
        let texts = self.session.call(move |pool| async move { read_run_texts(&pool, &id).await })?;
        // A queued run has no records yet: said so, not "no run".
        texts.ok_or_else(|| {
            self.or_queued(run_id, StoreError::NotFound { id: run_id.to_string(), path: self.store_location() })
        })
    }
}
