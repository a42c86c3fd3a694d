//! Leases: the row a handle holds ([`LeaseKey`]), taking one (a new run
//! or record, or a claim of an existing one), holding it ([`HeldLease`]: the
//! heartbeat and the local deadline, [`Fence`]) and giving it back; and
//! why a guarded write found no row ([`refusal`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use crate::fence::Fence;
use crate::store::{ClaimsExhausted, Holder, Sealer, StoreError};

use super::session::{Session, connect, execute, query};
use super::sql;
use super::store::{AGENT, PgStore};

/// The row a handle holds the lease on.
#[derive(Debug, Clone)]
pub(super) struct LeaseKey {
    pub(super) kind: &'static str,
    pub(super) id: String,
    pub(super) owner: String,
    pub(super) token: i64,
    pub(super) secs: i64,
}

/// A held lease: renewed while it lives, given back on release or drop.
pub(super) struct HeldLease {
    session: Arc<Session>,
    key: LeaseKey,
    /// The run's workspace, whose workers are woken when it is given back.
    workspace: String,
    /// The local deadline: renewed by every successful claim, heartbeat
    /// and checkpoint (from the instant it was sent), lost past it or when
    /// the database says the lease is gone.
    fence: Fence,
    /// How often the run was taken over from a dead holder since its last
    /// checkpoint, this claim included (0 for a new run).
    claims: u64,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
    released: bool,
}

/// What a handle on a leased run or record ([`super::run::PgRun`],
/// [`super::record::PgRecord`]) is made of, handed to it by the store that
/// took the lease: the session its statements go through, the lease that
/// guards them, the sealer of its lines and the place messages name.
pub(super) struct HandleParts {
    pub(super) session: Arc<Session>,
    pub(super) lease: HeldLease,
    pub(super) sealer: Sealer,
    /// `<store>#<kind>/<id>`.
    pub(super) location: PathBuf,
}

impl HeldLease {
    /// The lease `key`, claimed by a statement sent at `sent`.
    pub(super) fn new(
        session: Arc<Session>,
        key: LeaseKey,
        workspace: String,
        sent: Instant,
        claims: u64,
    ) -> HeldLease {
        let pool = session.pool.clone();
        let beat = key.clone();
        let length = Duration::from_secs(u64::try_from(key.secs).unwrap_or(1));
        let fence = Fence::leased(sent, length);
        let beat_fence = fence.clone();
        // A third of the lease, so that two beats can be lost before it
        // expires (a one-second test lease beats every 333 ms).
        let period = (length / 3).max(Duration::from_millis(100));
        let heartbeat = session.runtime.spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                // Past the local deadline the holder sends nothing more.
                if !beat_fence.holds() {
                    break;
                }
                let sent = Instant::now();
                let Ok(client) = pool.get().await else { continue };
                let params: [&(dyn ToSql + Sync); 5] = [&beat.kind, &beat.id, &beat.owner, &beat.token, &beat.secs];
                match execute(&client, sql::RENEW_LEASE, &params, "renew the lease").await {
                    Ok(1) => beat_fence.renewed(sent),
                    // The lease is gone (taken over): stop acting at once.
                    Ok(_) => {
                        beat_fence.lose();
                        break;
                    }
                    // A database that went away: try again next period (the
                    // local deadline runs out meanwhile).
                    Err(_) => {}
                }
            }
        });
        HeldLease { session, key, workspace, fence, claims, heartbeat: Some(heartbeat), released: false }
    }

    /// The row the lease is on.
    pub(super) fn key(&self) -> &LeaseKey {
        &self.key
    }

    /// The id of the run or record it is on.
    pub(super) fn id(&self) -> &str {
        &self.key.id
    }

    /// The local deadline ([`crate::store::RunHandle::fence`]).
    pub(super) fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Whether the run was taken over from dead holders more often than
    /// the process allows ([`crate::store::RunHandle::claims_exhausted`]).
    pub(super) fn claims_exhausted(&self) -> Option<ClaimsExhausted> {
        let max_claims = self.session.options.max_claims;
        (self.claims > max_claims).then_some(ClaimsExhausted { claims: self.claims, max_claims })
    }

    /// Before a write: refused without a statement past the local deadline
    /// ([`StoreError::LeaseLost`]); otherwise the instant the write is sent,
    /// which renews the fence if the write renews the lease.
    pub(super) fn before_write(&self) -> Result<Instant, StoreError> {
        if self.fence.holds() { Ok(Instant::now()) } else { Err(StoreError::LeaseLost { id: self.key.id.clone() }) }
    }

    /// After a guarded write that renews the lease, sent at `sent`: a
    /// success renews the fence, a lost lease loses it.
    pub(super) fn after_write<T>(&self, sent: Instant, written: Result<T, StoreError>) -> Result<T, StoreError> {
        match &written {
            Ok(_) => self.fence.renewed(sent),
            Err(StoreError::LeaseLost { .. }) => self.fence.lose(),
            Err(_) => {}
        }
        written
    }

    /// After a guarded write that does not renew the lease (a record's
    /// event): a lost lease loses the fence.
    pub(super) fn after_append<T>(&self, written: Result<T, StoreError>) -> Result<T, StoreError> {
        if matches!(written, Err(StoreError::LeaseLost { .. })) {
            self.fence.lose();
        }
        written
    }

    pub(super) fn release(&mut self) -> Result<(), StoreError> {
        if let Some(heartbeat) = self.heartbeat.take() {
            heartbeat.abort();
        }
        if self.released {
            return Ok(());
        }
        self.released = true;
        if !self.fence.holds() {
            // Past the deadline the holder writes nothing, not even this:
            // the lease expires by itself (or is someone else's already).
            return Ok(());
        }
        let (key, workspace) = (self.key.clone(), self.workspace.clone());
        // Guarded by the owner and the token: a second release after one
        // that committed unseen changes nothing.
        self.session.idempotent(move |pool| {
            let (key, workspace) = (key.clone(), workspace.clone());
            async move {
                let client = connect(&pool).await?;
                let params: [&(dyn ToSql + Sync); 4] = [&key.kind, &key.id, &key.owner, &key.token];
                let released = execute(&client, sql::RELEASE_LEASE, &params, "release the lease").await?;
                if released == 1 && key.kind == AGENT {
                    // A hint for the workers; polling covers a lost one.
                    let _ = execute(&client, sql::NOTIFY_RUNNABLE, &[&workspace], "wake the workers").await;
                }
                Ok(())
            }
        })
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        // Best effort: a lease that cannot be given back expires.
        let _ = self.release();
    }
}

/// Why a guarded write of `key` found no row.
pub(super) async fn refusal<C: GenericClient + Sync>(client: &C, key: &LeaseKey, expected: u64) -> StoreError {
    let params: [&(dyn ToSql + Sync); 4] = [&key.kind, &key.id, &key.owner, &key.token];
    match query(client, sql::WRITE_REFUSED, &params, "read the run's lease").await {
        Ok(rows) => match rows.first() {
            None => StoreError::NotFound { id: key.id.clone(), path: PathBuf::from("runs") },
            Some(row) => {
                let found = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
                if found != expected {
                    StoreError::VersionConflict { id: key.id.clone(), expected, found }
                } else {
                    StoreError::LeaseLost { id: key.id.clone() }
                }
            }
        },
        Err(error) => error,
    }
}

impl PgStore {
    /// The owner of the valid lease on `id` of `kind`, or nobody.
    pub(super) fn lease_holder(&self, kind: &'static str, id: &str) -> Result<Holder, StoreError> {
        let id = id.to_string();
        let owner = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let rows = query(&client, sql::READ_HOLDER, &[&kind, &id], "read the lease").await?;
            Ok(rows.first().map(|row| row.get::<_, String>(0)))
        })?;
        Ok(owner.map_or(Holder::Nobody, Holder::Node))
    }

    /// Inserts the row of a new run or record and takes its lease.
    pub(super) fn create(&self, kind: &'static str, id: &str) -> Result<HeldLease, StoreError> {
        let (id_owned, workspace) = (id.to_string(), self.workspace()?);
        let (owner, secs) = (self.session.options.owner_id.clone(), self.session.lease_secs());
        let key_owner = owner.clone();
        let sent = Instant::now();
        let lease_workspace = workspace.clone();
        let token = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 5] = [&kind, &id_owned, &workspace, &owner, &secs];
            let rows = query(&client, sql::CREATE_RUN, &params, "create the run").await?;
            Ok(rows.first().map(|row| row.get::<_, i64>(0)))
        })?;
        let Some(token) = token else {
            return Err(StoreError::RunExists { id: id.to_string(), path: self.store_location() });
        };
        let key = LeaseKey { kind, id: id.to_string(), owner: key_owner, token, secs };
        Ok(HeldLease::new(self.session.clone(), key, lease_workspace, sent, 0))
    }

    /// Claims the lease of an existing run or record with a checkpoint.
    pub(super) fn claim(&self, kind: &'static str, id: &str) -> Result<HeldLease, StoreError> {
        let this = self.workspace()?;
        let (id_owned, workspace) = (id.to_string(), this.clone());
        let (owner, secs) = (self.session.options.owner_id.clone(), self.session.lease_secs());
        let key_owner = owner.clone();
        let sent = Instant::now();
        let claimed = self.session.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 5] = [&kind, &id_owned, &owner, &secs, &workspace];
            let rows = query(&client, sql::CLAIM_BY_ID, &params, "claim the run").await?;
            if let Some(row) = rows.first() {
                return Ok(Ok((row.get::<_, i64>(0), row.get::<_, i64>(1))));
            }
            let exists = query(&client, sql::RUN_EXISTS, &[&kind, &id_owned], "look the run up").await?;
            Ok(Err(exists.first().map(|row| (row.get::<_, bool>(0), row.get::<_, String>(1)))))
        })?;
        match claimed {
            Ok((token, claims)) => {
                let key = LeaseKey { kind, id: id.to_string(), owner: key_owner, token, secs };
                let claims = u64::try_from(claims).unwrap_or(0);
                Ok(HeldLease::new(
                    self.session.clone(),
                    key,
                    self.workspace_id.clone().unwrap_or_default(),
                    sent,
                    claims,
                ))
            }
            Err(Some((_, owner))) if owner != this => {
                Err(StoreError::OtherWorkspace { id: id.to_string(), owner, this })
            }
            Err(Some((true, _))) => Err(StoreError::Locked { id: id.to_string() }),
            Err(_) => Err(StoreError::NotFound { id: id.to_string(), path: self.store_location() }),
        }
    }
}
