//! [`PgStore`], the store of one workspace: the [`RunStore`] impl (runs
//! and records, the queue, listings, export and receipts).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_postgres::types::ToSql;

use crate::store::records::canonical::sha256_hex;
use crate::store::records::receipts::{check_receipt_references, named_receipts, open_receipt, seal_receipt};
use crate::store::{
    Holder, LoadedRecord, LoadedRun, QueuedClaim, QueuedRun, Receipt, ReceiptError, ReceiptState, RecordHandle,
    RecordKind, RunHandle, RunListing, RunStore, Runnable, RunsPlace, Sealer, StoreError,
};

use super::lease::{HandleParts, HeldLease, LeaseKey};
use super::lines::jsonl;
use super::read::read_record_texts;
use super::record::PgRecord;
use super::run::PgRun;
use super::session::{Session, connect, execute, query};
use super::sql;
use super::verify::verify_record;

/// The PostgreSQL store of one workspace.
pub struct PgStore {
    pub(super) session: Arc<Session>,
    /// The workspace's id, or why it has none.
    pub(super) workspace_id: Result<String, String>,
    /// The workspace's folder on this machine (none in some tests).
    pub(super) workspace: Option<PathBuf>,
    pub(super) sealer: Sealer,
}

/// The `kind` column of a record kind.
fn record_kind(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Bridge => "bridge",
        RecordKind::Controller => "controller",
    }
}

pub(super) const AGENT: &str = "agent";

impl PgStore {
    /// The store itself, for messages about a run it does not have (or
    /// already has).
    pub(super) fn store_location(&self) -> PathBuf {
        PathBuf::from(&self.session.display)
    }

    fn location_of(&self, kind: &str, id: &str) -> PathBuf {
        PathBuf::from(format!("{}#{kind}/{id}", self.session.display))
    }

    /// The parts of a handle on the row of `kind` that `lease` is on.
    fn handle_parts(&self, kind: &str, lease: HeldLease) -> HandleParts {
        let location = self.location_of(kind, lease.id());
        HandleParts { session: self.session.clone(), lease, sealer: self.sealer.clone(), location }
    }

    /// The handle of the agent run `lease` is on (`loaded` when claimed).
    fn run_handle(&self, lease: HeldLease, loaded: Option<&LoadedRun>) -> Box<PgRun> {
        Box::new(PgRun::new(self.handle_parts(AGENT, lease), self.workspace.clone(), loaded))
    }

    /// The handle of the record of `kind` that `lease` is on (`loaded` when claimed).
    fn record_handle(&self, kind: RecordKind, lease: HeldLease, loaded: Option<&LoadedRecord>) -> Box<PgRecord> {
        Box::new(PgRecord::new(self.handle_parts(record_kind(kind), lease), kind, loaded))
    }

    /// The workspace's id, or why it has none.
    pub(super) fn workspace(&self) -> Result<String, StoreError> {
        self.workspace_id.clone().map_err(StoreError::WorkspaceId)
    }

    /// `error` for agent run `run_id`, or [`StoreError::Queued`] when the
    /// run it did not find is queued.
    pub(super) fn or_queued(&self, run_id: &str, error: StoreError) -> StoreError {
        match error {
            StoreError::NotFound { .. } if self.queued_run(run_id).is_ok_and(|queued| queued.is_some()) => {
                StoreError::Queued { id: run_id.to_string() }
            }
            error => error,
        }
    }

    /// The handle of a claimed queued run: `(token, request, claims)`.
    fn queued_claim(&self, run_id: String, (token, request, claims): (i64, String, i64), sent: Instant) -> QueuedClaim {
        let key = LeaseKey {
            kind: AGENT,
            id: run_id,
            owner: self.session.options.owner_id.clone(),
            token,
            secs: self.session.lease_secs(),
        };
        let claims = u64::try_from(claims).unwrap_or(0);
        let lease =
            HeldLease::new(self.session.clone(), key, self.workspace_id.clone().unwrap_or_default(), sent, claims);
        QueuedClaim { handle: self.run_handle(lease, None), request }
    }

    /// Receipt `key` of workspace `workspace` (this one's for a step; the
    /// run's own when a run is read by id).
    fn receipt_in(&self, workspace: &str, key: &str) -> Result<Option<Receipt>, ReceiptError> {
        let digest = sha256_hex(key.as_bytes());
        let path = PathBuf::from(format!("{}#receipts/{digest}", self.session.display));
        let workspace = workspace.to_string();
        let text = self
            .session
            .idempotent(move |pool| {
                let (workspace, digest) = (workspace.clone(), digest.clone());
                async move {
                    let client = connect(&pool).await?;
                    let rows = query(&client, sql::GET_RECEIPT, &[&workspace, &digest], "read a receipt").await?;
                    Ok(rows.first().map(|row| row.get::<_, String>(0)))
                }
            })
            .map_err(|error| ReceiptError::Store(Box::new(error)))?;
        let Some(text) = text else { return Ok(None) };
        open_receipt(&text, key, &self.sealer, &path).map(Some)
    }

    /// The receipts the verified log names are part of what it vouches
    /// for (as in the file store): those of the run's own workspace,
    /// `workspace` (a run is read by id from any workspace).
    pub(super) fn check_receipts(&self, run_id: &str, loaded: &LoadedRun, workspace: &str) -> Result<(), StoreError> {
        check_receipt_references(run_id, &loaded.audit, &self.sealer, &|key| self.receipt_in(workspace, key))
    }

    pub(super) fn list(&self, kind: &'static str, field: &'static str) -> Result<Vec<RunListing>, StoreError> {
        let workspace = self.workspace()?;
        let rows = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let rows = query(&client, sql::LIST, &[&kind, &workspace], "list the runs").await?;
            Ok(rows.iter().map(|row| (row.get::<_, String>(0), row.get::<_, Option<String>>(1))).collect::<Vec<_>>())
        })?;
        let mut listed: Vec<RunListing> = rows
            .into_iter()
            .map(|(run_id, state)| {
                // A queued run has no checkpoint yet: listed, without a time.
                let started_at = state
                    .and_then(|state| self.sealer.open(&state).ok())
                    .and_then(|payload| payload.get(field).and_then(Value::as_str).map(str::to_string));
                RunListing { run_id, started_at }
            })
            .collect();
        let instant =
            |listing: &RunListing| listing.started_at.as_deref().and_then(|text| text.parse::<jiff::Timestamp>().ok());
        listed.sort_by(|a, b| instant(b).cmp(&instant(a)).then_with(|| b.run_id.cmp(&a.run_id)));
        Ok(listed)
    }

    /// Writes verified run `run_id` as the file store's folder
    /// `<out>/runs/<run_id>/` (state.json, plan.json, history.jsonl,
    /// audit.jsonl), the same bytes, seal and chains; returns the folder.
    pub(super) fn export(&self, run_id: &str, out: &Path) -> Result<PathBuf, StoreError> {
        let (texts, loaded) = self.verified(run_id)?;
        // `state.json` as the file store writes it: only when the run has
        // paused or ended (it is then the compact head `runs.state` holds).
        let status = loaded.state.status;
        let compact = status.is_paused() || status.is_terminal();
        // Checked above: each is the receipt its log names.
        let mut receipts = Vec::new();
        for key in named_receipts(&loaded.audit).into_keys() {
            let receipt = self.get_receipt(key).map_err(|error| match error {
                ReceiptError::Store(error) => *error,
                error => StoreError::Tampered { id: run_id.to_string(), reason: error.to_string() },
            })?;
            receipts.extend(receipt);
        }
        let files = crate::store::export::RunFiles {
            state: compact.then(|| texts.state.clone()),
            plan: texts.plan.clone().unwrap_or_default(),
            history: jsonl(texts.history.iter().map(|(_, line)| line.as_str())),
            audit: jsonl(texts.events.iter().map(|row| row.line.as_str())),
            receipts,
        };
        crate::store::export::write_run_folder(out, run_id, &files, &self.sealer)
    }
}

impl RunStore for PgStore {
    fn create_run(&self, run_id: &str) -> Result<Box<dyn RunHandle>, StoreError> {
        let lease = self.create(AGENT, run_id)?;
        Ok(self.run_handle(lease, None))
    }

    fn open_run(&self, run_id: &str) -> Result<(Box<dyn RunHandle>, LoadedRun), StoreError> {
        let mut lease = self.claim(AGENT, run_id).map_err(|error| self.or_queued(run_id, error))?;
        let loaded = match self.read_run(run_id) {
            Ok(loaded) => loaded,
            Err(error) => {
                let _ = lease.release();
                return Err(error);
            }
        };
        Ok((self.run_handle(lease, Some(&loaded)), loaded))
    }

    fn read_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        Ok(self.verified(run_id)?.1)
    }

    fn export_run(&self, run_id: &str, out: &Path) -> Result<PathBuf, StoreError> {
        self.export(run_id, out)
    }

    fn wait_for_runnable(&self, timeout: Duration) -> bool {
        self.session.wait_for_runnable(&self.workspace_id, timeout)
    }

    fn shared(&self) -> bool {
        true
    }

    fn runnable_runs(&self) -> Result<Vec<Runnable>, StoreError> {
        let workspace = self.workspace()?;
        let rows = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let rows = query(&client, sql::RUNNABLE, &[&workspace], "list the runnable runs").await?;
            Ok(rows
                .iter()
                .map(|row| (row.get::<_, String>(0), row.get::<_, String>(1), row.get::<_, String>(2)))
                .collect::<Vec<_>>())
        })?;
        // A waiting run is runnable once it holds an approval; a checkpoint
        // that does not open is left to the claim, which refuses it.
        Ok(rows
            .into_iter()
            .filter_map(|(run_id, status, state)| {
                let payload = self.sealer.open(&state).ok()?;
                let approved = !payload.get("approval").is_none_or(Value::is_null);
                let state_version = payload.get("state_version").and_then(Value::as_u64)?;
                (status == "running" || approved).then_some(Runnable { run_id, state_version })
            })
            .collect())
    }

    fn queue_run(&self, run_id: &str, request: &str) -> Result<(), StoreError> {
        let (workspace, id, request) = (self.workspace()?, run_id.to_string(), request.to_string());
        let queued = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let queued = execute(&client, sql::QUEUE_RUN, &[&workspace, &id, &request], "queue the run").await?;
            if queued == 1 {
                // A hint for the workers; polling covers a lost one.
                let _ = execute(&client, sql::NOTIFY_RUNNABLE, &[&workspace], "wake the workers").await;
            }
            Ok(queued)
        })?;
        if queued == 1 {
            Ok(())
        } else {
            Err(StoreError::RunExists { id: run_id.to_string(), path: self.store_location() })
        }
    }

    fn claim_queued(&self, skip: &[String]) -> Result<Option<QueuedClaim>, StoreError> {
        let (workspace, skip) = (self.workspace()?, skip.to_vec());
        let (owner, secs) = (self.session.options.owner_id.clone(), self.session.lease_secs());
        let sent = Instant::now();
        let claimed = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 4] = [&workspace, &owner, &secs, &skip];
            let rows = query(&client, sql::CLAIM_QUEUED, &params, "claim a queued run").await?;
            Ok(rows.first().map(|row| {
                (row.get::<_, String>(0), (row.get::<_, i64>(1), row.get::<_, String>(2), row.get::<_, i64>(3)))
            }))
        })?;
        Ok(claimed.map(|(run_id, claim)| self.queued_claim(run_id, claim, sent)))
    }

    fn claim_queued_run(&self, run_id: &str) -> Result<QueuedClaim, StoreError> {
        let this = self.workspace()?;
        let (id, workspace) = (run_id.to_string(), this.clone());
        let (owner, secs) = (self.session.options.owner_id.clone(), self.session.lease_secs());
        let sent = Instant::now();
        let claimed = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 4] = [&id, &owner, &secs, &workspace];
            let rows = query(&client, sql::CLAIM_QUEUED_BY_ID, &params, "claim the queued run").await?;
            if let Some(row) = rows.first() {
                return Ok(Ok((row.get::<_, i64>(0), row.get::<_, String>(1), row.get::<_, i64>(2))));
            }
            let exists = query(&client, sql::RUN_EXISTS, &[&AGENT, &id], "look the run up").await?;
            Ok(Err(exists.first().map(|row| row.get::<_, String>(1))))
        })?;
        match claimed {
            Ok(claim) => Ok(self.queued_claim(run_id.to_string(), claim, sent)),
            Err(Some(owner)) if owner != this => {
                Err(StoreError::OtherWorkspace { id: run_id.to_string(), owner, this })
            }
            Err(_) if self.queued_run(run_id)?.is_some() => Err(StoreError::Locked { id: run_id.to_string() }),
            Err(_) => Err(StoreError::NotFound { id: run_id.to_string(), path: self.store_location() }),
        }
    }

    fn queued_run(&self, run_id: &str) -> Result<Option<QueuedRun>, StoreError> {
        let id = run_id.to_string();
        let row = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let rows = query(&client, sql::READ_QUEUED, &[&id], "read the queued run").await?;
            Ok(rows.first().map(|row| (row.get::<_, String>(0), row.get::<_, bool>(1))))
        })?;
        Ok(row.map(|(request, starting)| QueuedRun { run_id: run_id.to_string(), request, starting }))
    }

    fn run_state_location(&self, run_id: &str) -> String {
        self.location_of(AGENT, run_id).display().to_string()
    }

    fn holder(&self, run_id: &str) -> Result<Holder, StoreError> {
        self.lease_holder(AGENT, run_id)
    }

    fn record_holder(&self, kind: RecordKind, id: &str) -> Result<Holder, StoreError> {
        self.lease_holder(record_kind(kind), id)
    }

    fn runs_place(&self) -> RunsPlace {
        let workspace_id = self.workspace_id.clone().unwrap_or_else(|why| format!("none: {why}"));
        RunsPlace::Database { store: self.session.display.clone(), workspace_id }
    }

    fn list_runs(&self) -> Result<Vec<RunListing>, StoreError> {
        self.list(AGENT, "started_at")
    }

    fn list_records(&self, kind: RecordKind) -> Result<Vec<RunListing>, StoreError> {
        self.list(record_kind(kind), "created_at")
    }

    fn unfinished_records(&self, kind: RecordKind) -> Result<Vec<String>, StoreError> {
        let (kind, workspace) = (record_kind(kind), self.workspace()?);
        self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let rows =
                query(&client, sql::UNFINISHED_RECORDS, &[&kind, &workspace], "list the unfinished records").await?;
            Ok(rows.iter().map(|row| row.get::<_, String>(0)).collect())
        })
    }

    fn create_record(&self, kind: RecordKind, id: &str) -> Result<Box<dyn RecordHandle>, StoreError> {
        let lease = self.create(record_kind(kind), id)?;
        Ok(self.record_handle(kind, lease, None))
    }

    fn open_record(&self, kind: RecordKind, id: &str) -> Result<(Box<dyn RecordHandle>, LoadedRecord), StoreError> {
        let mut lease = self.claim(record_kind(kind), id)?;
        match self.read_record(kind, id) {
            Ok(loaded) => Ok((self.record_handle(kind, lease, Some(&loaded)), loaded)),
            Err(error) => {
                let _ = lease.release();
                Err(error)
            }
        }
    }

    fn read_record(&self, kind: RecordKind, id: &str) -> Result<LoadedRecord, StoreError> {
        let (kind_text, id_owned) = (record_kind(kind), id.to_string());
        let texts =
            self.session.call(move |pool| async move { read_record_texts(&pool, kind_text, &id_owned).await })?;
        let Some((state, events)) = texts else {
            return Err(StoreError::NotFound { id: id.to_string(), path: self.store_location() });
        };
        verify_record(kind, id, &state, &events, &self.sealer)
    }

    fn get_receipt(&self, key: &str) -> Result<Option<Receipt>, ReceiptError> {
        let workspace = self.workspace().map_err(|error| ReceiptError::Store(Box::new(error)))?;
        self.receipt_in(&workspace, key)
    }

    fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError> {
        // Sealed as the file store seals it: under a key, a receipt edited
        // in the table is refused on reading.
        let text = seal_receipt(receipt, &self.sealer)
            .map_err(|error| StoreError::Database { action: "serialize a receipt", message: error.to_string() })?;
        let status = match receipt.state {
            ReceiptState::Started => "started",
            ReceiptState::Done => "done",
        };
        let (workspace, digest) = (self.workspace()?, sha256_hex(receipt.key.as_bytes()));
        let (key, run_id, step_id) = (receipt.key.clone(), receipt.run_id.clone(), receipt.step_id.clone());
        let owner = self.session.options.owner_id.clone();
        self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 8] =
                [&workspace, &digest, &key, &status, &run_id, &step_id, &text, &owner];
            match execute(&client, sql::PUT_RECEIPT, &params, "write a receipt").await? {
                0 => Err(StoreError::LeaseLost { id: run_id.clone() }),
                _ => Ok(()),
            }
        })
    }

    fn remove_receipt(&self, key: &str) -> Result<(), StoreError> {
        let (workspace, digest) = (self.workspace()?, sha256_hex(key.as_bytes()));
        self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            execute(&client, sql::REMOVE_RECEIPT, &[&workspace, &digest], "remove a receipt").await.map(|_| ())
        })
    }
}
