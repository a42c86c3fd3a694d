//! [`PgStore`]: the [`RunStore`] in PostgreSQL (cargo feature `postgres`,
//! `--store postgres://…`). The tables are in `migrations/`, every
//! statement in `sql.rs`, the schema's versions in `migrate.rs`.
//!
//! The records are the file store's, byte for byte: one row per audit line,
//! each checkpoint the sealed head line the file store writes (`head.rs`:
//! the held `state_saved`/`run_finished` event with the checkpoint, the
//! step records since the previous head and, on the first, the plan), one
//! row per history line, the plan copy (`run_plans.plan`), and the compact
//! head of the last head line (`runs.state`, the file store's `state.json`). Seals
//! and chains are computed by planrun over those bytes ([`Sealer`]), never
//! over what `jsonb` gives back, and checked again on every read
//! (`verify.rs`), so an edited, deleted or re-ordered row is found, and
//! `planrun export` writes files the file store's verifier accepts.
//!
//! A **queued** run (`queue_run`) is a row with status `queued`, no
//! checkpoint and the submitted request (opaque text); `claim_queued`
//! takes the oldest of the workspace in one `FOR UPDATE SKIP LOCKED`
//! statement and hands out a handle as `create_run` does. The workspace is
//! named by its `.planrun/id` (`workspace_id.rs`), not by its path.
//!
//! A handle holds the run's **lease**: `owner_id`, the fencing token
//! `lease_version` (one more on every claim) and `lease_expires_at` on the
//! run's row, renewed by a heartbeat at a third of `PLANRUN_LEASE_SECS`
//! while the handle lives, given back when it is released or dropped, and
//! expiring by itself when the process dies. Every write is guarded by the
//! lease in the statement that writes: a holder whose lease was taken over
//! writes nothing ([`StoreError::LeaseLost`]). The handle also keeps the
//! lease's local deadline ([`Fence`], [`RunHandle::fence`]): from the
//! instant each claim, heartbeat or checkpoint was sent, the lease less a
//! sixth; past it (or once a heartbeat finds the lease gone) the handle
//! sends nothing more, not even the release, and the runtime starts no
//! effect and kills a running tool.
//!
//! An agent run's events and history are kept in its handle until its
//! next checkpoint and committed with it in one transaction (one commit per
//! checkpoint; the compare-and-set on `state_version` is in the same
//! statement as the lease guard), so a database run has no crash tail. The
//! checkpoints after reads are kept too, and sent together before the
//! run's next other write (`PgRun::checkpoint_reads`). A
//! record's events are written as they happen (its log may run past its
//! checkpoint, as in the file store).

mod approvals;
pub mod error;
mod location;
pub mod migrate;
mod options;
mod runtime;
mod sql;
#[cfg(test)]
pub(crate) mod test_db;
#[cfg(test)]
mod tests;
mod tls;
mod verify;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::{Value, json};

use crate::fence::Fence;
use crate::model::RunStatus;
use crate::store::records::audit::{LineRef, write_line};
use crate::store::records::head::{Links, PendingHead, full_payload, plan_bytes};
use crate::store::records::receipts::{check_receipt_references, named_receipts, open_receipt, seal_receipt};
use tokio_postgres::types::ToSql;

use crate::store::backoff::Backoff;
use crate::store::records::canonical::sha256_hex;
use crate::store::records::version::compare_version;
use crate::store::{
    ApprovalDecision, ApprovalUse, ChildNoteFile, ClaimsExhausted, Holder, LoadedRecord, LoadedRun, NewEvent,
    QueuedClaim, QueuedRun, Receipt, ReceiptError, ReceiptState, RecordHandle, RecordKind, RunHandle, RunListing,
    RunRecords, RunState, RunStore, Runnable, RunsPlace, Sealer, StepRecord, StoreError, StoreFactory,
};
use approvals::ApprovalRow;
use error::{PgError, is_transient_pool, pool_error, store_error};
pub use location::PgLocation;
pub use migrate::MigrationReport;
pub(crate) use options::PgBackend;
use runtime::{Pending, StoreRuntime};
use verify::{EventRow, RunTexts, verify_record, verify_run};

/// Every statement may take this long (`statement_timeout`).
const STATEMENT_TIMEOUT_MS: u64 = 30_000;
/// A session idle inside a transaction this long is ended by the server
/// (`idle_in_transaction_session_timeout`): a frozen holder cannot keep
/// row locks.
const IDLE_IN_TRANSACTION_MS: u64 = 60_000;
/// Connections per process.
const POOL_SIZE: usize = 8;

/// How a process uses the store: its lease length, its owner id and how
/// often a run may be taken over without progress.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `PLANRUN_LEASE_SECS` (default 30).
    pub lease_secs: u64,
    /// `PLANRUN_MAX_CLAIMS` (default 5): how often a run may be taken over
    /// from dead holders since its last checkpoint; the claim after that
    /// ends it `recovery_exhausted` (the runtime does, asked through
    /// [`RunHandle::claims_exhausted`]).
    pub max_claims: u64,
    /// Who holds the leases this process takes (`pid:random`).
    pub owner_id: String,
}

/// The process's one pool and runtime, shared by every [`PgStore`].
struct PgShared {
    runtime: StoreRuntime,
    pool: Pool,
    display: String,
    options: PgOptions,
    /// The session configuration, for the unpooled listening session.
    config: tokio_postgres::Config,
    /// Plain or TLS sessions, as the URL's `sslmode` asks.
    connector: tls::Connector,
    /// How long a call waits for the database to answer again before it
    /// fails with [`StoreError::Unavailable`]: zero for one-shot commands
    /// (they fail fast), the lease length for workers and the service.
    patience: Duration,
    /// Wake-ups (`LISTEN planrun_runnable`), once a worker waits for them.
    wake_ups: std::sync::Mutex<WakeUps>,
}

impl PgShared {
    fn open(location: &PgLocation, options: PgOptions, patience: Duration) -> Result<Arc<PgShared>, PgError> {
        let unreachable = |message: String| PgError::Unreachable { location: location.display.clone(), message };
        let connector = tls::Connector::for_location(location)?;
        let mut config = location.config.clone();
        if config.get_application_name().is_none() {
            config.application_name("planrun");
        }
        let session = format!(
            "-c statement_timeout={STATEMENT_TIMEOUT_MS} -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
        );
        let given = config.get_options().map(str::to_string);
        config.options(given.map_or(session.clone(), |given| format!("{given} {session}")));
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        config.keepalives(true);
        let manager_config = ManagerConfig { recycling_method: RecyclingMethod::Fast };
        let manager = match &connector {
            tls::Connector::Plain => Manager::from_config(config.clone(), tokio_postgres::NoTls, manager_config),
            tls::Connector::Rustls(rustls) => Manager::from_config(config.clone(), rustls.clone(), manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .create_timeout(Some(Duration::from_secs(10)))
            .wait_timeout(Some(Duration::from_secs(30)))
            .build()
            .map_err(|error| unreachable(error.to_string()))?;
        let runtime = StoreRuntime::start().map_err(|error| unreachable(error.to_string()))?;
        Ok(Arc::new(PgShared {
            runtime,
            pool,
            display: location.display.clone(),
            options,
            config,
            connector,
            patience,
            wake_ups: std::sync::Mutex::new(WakeUps::default()),
        }))
    }

    /// Runs `make(pool)` on the store's runtime and waits for it. With
    /// patience, a database that does not answer is waited for first (up
    /// to [`PgShared::patience`], jittered exponential backoff), so that a
    /// restart between two statements costs a pause, not the run; a
    /// session lost while a statement runs still fails the call
    /// ([`StoreError::Unavailable`]: its outcome is read back, never
    /// guessed).
    fn call<T, F>(&self, make: impl FnOnce(Pool) -> F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.begin(make).wait()
    }

    /// [`PgShared::call`] without waiting: the answer is waited for later.
    fn begin<T, F>(&self, make: impl FnOnce(Pool) -> F) -> Pending<T>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let (pool, patience) = (self.pool.clone(), self.patience);
        let future = make(self.pool.clone());
        self.runtime.begin(async move {
            if !patience.is_zero() {
                wait_for_connection(&pool, patience).await;
            }
            future.await
        })
    }

    /// An idempotent call (a read, giving a lease back), made again while
    /// the database is unavailable (up to [`PgShared::patience`]): doing
    /// it twice is doing it once, and a check that reads (a receipt) must
    /// not fail a run because one session was lost.
    fn idempotent<T, F>(&self, make: impl Fn(Pool) -> F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let deadline = std::time::Instant::now() + self.patience;
        let mut backoff = Backoff::default();
        loop {
            match self.call(&make) {
                Err(error) if error.is_unavailable() => {
                    let delay = backoff.next_delay();
                    if std::time::Instant::now() + delay > deadline {
                        return Err(error);
                    }
                    std::thread::sleep(delay);
                }
                outcome => return outcome,
            }
        }
    }

    /// Starts the listening session: one unpooled connection that
    /// subscribes to `planrun_runnable` and forwards each payload (a
    /// workspace id). When it ends (the server went away) the channel
    /// closes and the next wait starts another.
    fn listen(&self) -> std::sync::mpsc::Receiver<String> {
        let (sender, receiver) = std::sync::mpsc::channel();
        let (config, connector) = (self.config.clone(), self.connector.clone());
        self.runtime.spawn(async move {
            match connector {
                tls::Connector::Plain => listen_on(config, tokio_postgres::NoTls, sender).await,
                tls::Connector::Rustls(rustls) => listen_on(config, rustls, sender).await,
            }
        });
        receiver
    }

    /// Refuses a schema this planrun cannot use; [`PgError::Unavailable`]
    /// when the database does not answer.
    fn check_schema(&self) -> Result<(), PgError> {
        let display = self.display.clone();
        let pool = self.pool.clone();
        self.runtime
            .run(async move {
                let client = match pool.get().await {
                    Ok(client) => client,
                    Err(error) => return Ok(Err(error::unreachable(&display, &error))),
                };
                Ok(migrate::check_schema(&client).await)
            })
            .map_err(|error| PgError::Unreachable { location: self.display.clone(), message: error.to_string() })?
    }

    fn lease_secs(&self) -> i64 {
        i64::try_from(self.options.lease_secs.max(1)).unwrap_or(i64::MAX)
    }
}

/// The listening session's channel, and when to try again after it ended.
#[derive(Default)]
struct WakeUps {
    receiver: Option<std::sync::mpsc::Receiver<String>>,
    retry_at: Option<std::time::Instant>,
}

/// How long to wait before listening again after the session ended.
const LISTEN_RETRY: Duration = Duration::from_secs(5);

/// The listening session over `tls`: subscribes, then forwards each
/// notification's payload to `sender` until the session or the receiver
/// ends.
async fn listen_on<T>(config: tokio_postgres::Config, tls: T, sender: std::sync::mpsc::Sender<String>)
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Send,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
{
    let Ok((client, mut connection)) = config.connect(tls).await else { return };
    // The connection is polled here (it carries the notifications); the
    // client lives as long as the session listens.
    let forward = async move {
        while let Some(Ok(message)) = std::future::poll_fn(|context| connection.poll_message(context)).await {
            if let tokio_postgres::AsyncMessage::Notification(note) = message
                && sender.send(note.payload().to_string()).is_err()
            {
                return;
            }
        }
    };
    let subscribe = async move {
        if client.batch_execute(sql::LISTEN_RUNNABLE).await.is_ok() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = forward => {},
        () = subscribe => {},
    }
}

/// Waits until the pool gives a connection (it goes back to the pool for
/// the call to take), the database answers something other than "not
/// now", or `patience` would be over before the next attempt.
async fn wait_for_connection(pool: &Pool, patience: Duration) {
    let deadline = tokio::time::Instant::now() + patience;
    let mut backoff = Backoff::default();
    loop {
        match pool.get().await {
            Err(error) if is_transient_pool(&error) => {
                let delay = backoff.next_delay();
                if tokio::time::Instant::now() + delay > deadline {
                    return;
                }
                tokio::time::sleep(delay).await;
            }
            _ => return,
        }
    }
}

/// One connection of the pool, or the message why there is none.
async fn connect(pool: &Pool) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get().await.map_err(pool_error("connect"))
}

async fn execute<C: GenericClient + Sync>(
    client: &C,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
    action: &'static str,
) -> Result<u64, StoreError> {
    let prepared = client.prepare_cached(statement).await.map_err(store_error(action))?;
    client.execute(&prepared, params).await.map_err(store_error(action))
}

async fn query<C: GenericClient + Sync>(
    client: &C,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
    action: &'static str,
) -> Result<Vec<tokio_postgres::Row>, StoreError> {
    let prepared = client.prepare_cached(statement).await.map_err(store_error(action))?;
    client.query(&prepared, params).await.map_err(store_error(action))
}

/// The [`StoreFactory`] of [`PgStore`]s: one pool for the process, opened
/// (and its schema checked) once, at start-up.
#[derive(Clone)]
pub struct PgStores {
    shared: Arc<PgShared>,
}

impl std::fmt::Debug for PgStores {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "PgStores({})", self.shared.display)
    }
}

impl PgStores {
    /// Connects to `location` and refuses a schema this planrun cannot use
    /// (never migrated, partly migrated, newer): nothing is written. A
    /// database that does not answer fails at once (after the connect
    /// timeout): the one-shot commands.
    pub fn connect(location: &PgLocation, options: PgOptions) -> Result<PgStores, PgError> {
        let shared = PgShared::open(location, options, Duration::ZERO)?;
        shared.check_schema()?;
        Ok(PgStores { shared })
    }

    /// As [`PgStores::connect`], for the long-running processes (`worker`,
    /// `serve`): while the database does not answer ([`PgError::is_unavailable`]:
    /// refused, timed out, starting up) it waits with jittered exponential
    /// backoff ([`Backoff`], at most [`crate::store::backoff::RECONNECT_MAX`]
    /// between attempts), telling `on_wait` each time; every later call
    /// waits up to a lease length for a database that went away. Any
    /// other refusal (a login, TLS, the schema) ends it as `connect` does.
    pub fn connect_waiting(
        location: &PgLocation,
        options: PgOptions,
        on_wait: &dyn Fn(&PgError, Duration),
    ) -> Result<PgStores, PgError> {
        let patience = Duration::from_secs(options.lease_secs.max(1));
        let shared = PgShared::open(location, options, patience)?;
        let mut backoff = Backoff::default();
        loop {
            match shared.check_schema() {
                Err(error) if error.is_unavailable() => {
                    let delay = backoff.next_delay();
                    on_wait(&error, delay);
                    std::thread::sleep(delay);
                }
                outcome => return outcome.map(|()| PgStores { shared }),
            }
        }
    }

    /// `planrun store migrate`: applies the missing migrations.
    pub fn migrate(location: &PgLocation, options: PgOptions) -> Result<MigrationReport, PgError> {
        let shared = PgShared::open(location, options, Duration::ZERO)?;
        let display = shared.display.clone();
        let pool = shared.pool.clone();
        shared
            .runtime
            .run(async move {
                let mut client = match pool.get().await {
                    Ok(client) => client,
                    Err(error) => return Ok(Err(error::unreachable(&display, &error))),
                };
                Ok(migrate::migrate(&mut client).await)
            })
            .map_err(|error| PgError::Unreachable { location: shared.display.clone(), message: error.to_string() })?
    }

    /// The store of the workspace named `workspace_id` (tests).
    pub fn store_named(&self, workspace_id: &str, sealer: &Sealer) -> PgStore {
        let workspace_id = Ok(workspace_id.to_string());
        PgStore { shared: self.shared.clone(), workspace_id, workspace: None, sealer: sealer.clone() }
    }

    /// The store of `workspace`, which it names by its id
    /// (`<workspace>/.planrun/id`, created with `fresh()` on first use), so
    /// that the same workspace mounted at other paths on other machines has
    /// the same runs and receipts.
    pub fn store(&self, workspace: &Path, sealer: &Sealer, fresh: &dyn Fn() -> String) -> PgStore {
        let workspace_id =
            crate::store::workspace_id::read_or_create(workspace, fresh).map_err(|error| error.to_string());
        let folder = Some(workspace.to_path_buf());
        PgStore { shared: self.shared.clone(), workspace_id, workspace: folder, sealer: sealer.clone() }
    }
}

impl StoreFactory for PgStores {
    fn open(&self, workspace: &Path, sealer: &Sealer) -> Arc<dyn RunStore> {
        // Without an id generator, a workspace without an id stays without
        // one: every use of the store says so.
        let workspace_id = match crate::store::workspace_id::read_existing(workspace) {
            Ok(Some(id)) => Ok(id),
            Ok(None) => Err(format!(
                "the workspace `{}` has no id yet (`{}`): run a planrun command on it with the database store to make one",
                workspace.display(),
                crate::store::workspace_id_path(workspace).display()
            )),
            Err(error) => Err(error.to_string()),
        };
        let folder = Some(workspace.to_path_buf());
        Arc::new(PgStore { shared: self.shared.clone(), workspace_id, workspace: folder, sealer: sealer.clone() })
    }

    fn open_identified(&self, workspace: &Path, sealer: &Sealer, fresh: &dyn Fn() -> String) -> Arc<dyn RunStore> {
        Arc::new(self.store(workspace, sealer, fresh))
    }
}

/// The PostgreSQL store of one workspace.
pub struct PgStore {
    shared: Arc<PgShared>,
    /// The workspace's id, or why it has none.
    workspace_id: Result<String, String>,
    /// The workspace's folder on this machine (none in some tests).
    workspace: Option<PathBuf>,
    sealer: Sealer,
}

/// The `kind` column of a record kind.
fn record_kind(kind: RecordKind) -> &'static str {
    match kind {
        RecordKind::Bridge => "bridge",
        RecordKind::Controller => "controller",
    }
}

const AGENT: &str = "agent";

/// The row a handle holds the lease on.
#[derive(Debug, Clone)]
struct LeaseKey {
    kind: &'static str,
    id: String,
    owner: String,
    token: i64,
    secs: i64,
}

/// A held lease: renewed while it lives, given back on release or drop.
struct HeldLease {
    shared: Arc<PgShared>,
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

impl HeldLease {
    /// The lease `key`, claimed by a statement sent at `sent`.
    fn new(shared: Arc<PgShared>, key: LeaseKey, workspace: String, sent: Instant, claims: u64) -> HeldLease {
        let pool = shared.pool.clone();
        let beat = key.clone();
        let length = Duration::from_secs(u64::try_from(key.secs).unwrap_or(1));
        let fence = Fence::leased(sent, length);
        let beat_fence = fence.clone();
        // A third of the lease, so that two beats can be lost before it
        // expires (a one-second test lease beats every 333 ms).
        let period = (length / 3).max(Duration::from_millis(100));
        let heartbeat = shared.runtime.spawn(async move {
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
        HeldLease { shared, key, workspace, fence, claims, heartbeat: Some(heartbeat), released: false }
    }

    /// Before a write: refused without a statement past the local deadline
    /// ([`StoreError::LeaseLost`]); otherwise the instant the write is sent,
    /// which renews the fence if the write renews the lease.
    fn before_write(&self) -> Result<Instant, StoreError> {
        if self.fence.holds() { Ok(Instant::now()) } else { Err(StoreError::LeaseLost { id: self.key.id.clone() }) }
    }

    /// After a guarded write that renews the lease, sent at `sent`: a
    /// success renews the fence, a lost lease loses it.
    fn after_write<T>(&self, sent: Instant, written: Result<T, StoreError>) -> Result<T, StoreError> {
        match &written {
            Ok(_) => self.fence.renewed(sent),
            Err(StoreError::LeaseLost { .. }) => self.fence.lose(),
            Err(_) => {}
        }
        written
    }

    fn release(&mut self) -> Result<(), StoreError> {
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
        self.shared.idempotent(move |pool| {
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
/// Runs [`sql::CHECKPOINT`] with its 18 parameters; `false` when its
/// guard refused (nothing was written).
async fn checkpoint_written<C: GenericClient + Sync>(
    client: &C,
    params: &[&(dyn ToSql + Sync)],
) -> Result<bool, StoreError> {
    let rows = query(client, sql::CHECKPOINT, params, "write the checkpoint").await?;
    Ok(rows.first().is_some_and(|row| row.get::<_, i64>(0) == 1))
}

async fn refusal<C: GenericClient + Sync>(client: &C, key: &LeaseKey, expected: u64) -> StoreError {
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
async fn read_record_texts(
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

/// Lines as a JSON Lines file: each followed by a newline.
fn jsonl<'l>(lines: impl Iterator<Item = &'l str>) -> String {
    lines.map(|line| format!("{line}\n")).collect()
}

/// The sealed envelope of `payload`, as the file store writes `state.json`.
fn sealed_text(sealer: &Sealer, id: &str, payload: Value) -> Result<String, StoreError> {
    let serialize = |message: String| StoreError::Io {
        action: "serialize",
        path: PathBuf::from(format!("runs.state of `{id}`")),
        source: std::io::Error::other(message),
    };
    let envelope = sealer.seal(payload).map_err(|error| serialize(error.to_string()))?;
    let mut text = serde_json::to_string_pretty(&envelope).map_err(|error| serialize(error.to_string()))?;
    text.push('\n');
    Ok(text)
}

impl PgStore {
    /// The store itself, for messages about a run it does not have (or
    /// already has).
    fn store_location(&self) -> PathBuf {
        PathBuf::from(&self.shared.display)
    }

    fn location_of(&self, kind: &str, id: &str) -> PathBuf {
        PathBuf::from(format!("{}#{kind}/{id}", self.shared.display))
    }

    /// The workspace's id, or why it has none.
    /// The owner of the valid lease on `id` of `kind`, or nobody.
    fn lease_holder(&self, kind: &'static str, id: &str) -> Result<Holder, StoreError> {
        let id = id.to_string();
        let owner = self.shared.call(move |pool| async move {
            let client = connect(&pool).await?;
            let rows = query(&client, sql::READ_HOLDER, &[&kind, &id], "read the lease").await?;
            Ok(rows.first().map(|row| row.get::<_, String>(0)))
        })?;
        Ok(owner.map_or(Holder::Nobody, Holder::Node))
    }

    fn workspace(&self) -> Result<String, StoreError> {
        self.workspace_id.clone().map_err(StoreError::WorkspaceId)
    }

    /// `error` for agent run `run_id`, or [`StoreError::Queued`] when the
    /// run it did not find is queued.
    fn or_queued(&self, run_id: &str, error: StoreError) -> StoreError {
        match error {
            StoreError::NotFound { .. } if self.queued_run(run_id).is_ok_and(|queued| queued.is_some()) => {
                StoreError::Queued { id: run_id.to_string() }
            }
            error => error,
        }
    }

    /// The handle of a queued run just claimed with token `token`.
    /// The handle of a claimed queued run: `(token, request, claims)`.
    fn queued_claim(&self, run_id: String, (token, request, claims): (i64, String, i64), sent: Instant) -> QueuedClaim {
        let key = LeaseKey {
            kind: AGENT,
            id: run_id,
            owner: self.shared.options.owner_id.clone(),
            token,
            secs: self.shared.lease_secs(),
        };
        let claims = u64::try_from(claims).unwrap_or(0);
        let lease =
            HeldLease::new(self.shared.clone(), key, self.workspace_id.clone().unwrap_or_default(), sent, claims);
        QueuedClaim { handle: Box::new(PgRun::new(self, lease, None)), request }
    }

    /// Inserts the row of a new run or record and takes its lease.
    fn create(&self, kind: &'static str, id: &str) -> Result<HeldLease, StoreError> {
        let (id_owned, workspace) = (id.to_string(), self.workspace()?);
        let (owner, secs) = (self.shared.options.owner_id.clone(), self.shared.lease_secs());
        let key_owner = owner.clone();
        let sent = Instant::now();
        let lease_workspace = workspace.clone();
        let token = self.shared.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 5] = [&kind, &id_owned, &workspace, &owner, &secs];
            let rows = query(&client, sql::CREATE_RUN, &params, "create the run").await?;
            Ok(rows.first().map(|row| row.get::<_, i64>(0)))
        })?;
        let Some(token) = token else {
            return Err(StoreError::RunExists { id: id.to_string(), path: self.store_location() });
        };
        let key = LeaseKey { kind, id: id.to_string(), owner: key_owner, token, secs };
        Ok(HeldLease::new(self.shared.clone(), key, lease_workspace, sent, 0))
    }

    /// Claims the lease of an existing run or record with a checkpoint.
    fn claim(&self, kind: &'static str, id: &str) -> Result<HeldLease, StoreError> {
        let this = self.workspace()?;
        let (id_owned, workspace) = (id.to_string(), this.clone());
        let (owner, secs) = (self.shared.options.owner_id.clone(), self.shared.lease_secs());
        let key_owner = owner.clone();
        let sent = Instant::now();
        let claimed = self.shared.call(move |pool| async move {
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
                    self.shared.clone(),
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

    /// Receipt `key` of workspace `workspace` (this one's for a step; the
    /// run's own when a run is read by id).
    fn receipt_in(&self, workspace: &str, key: &str) -> Result<Option<Receipt>, ReceiptError> {
        let digest = sha256_hex(key.as_bytes());
        let path = PathBuf::from(format!("{}#receipts/{digest}", self.shared.display));
        let workspace = workspace.to_string();
        let text = self
            .shared
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
    fn check_receipts(&self, run_id: &str, loaded: &LoadedRun, workspace: &str) -> Result<(), StoreError> {
        check_receipt_references(run_id, &loaded.audit, &self.sealer, &|key| self.receipt_in(workspace, key))
    }

    /// Reads run `run_id` and verifies it strictly: its rows, the
    /// receipts and the decisions (`approvals`) its log names.
    fn verified(&self, run_id: &str) -> Result<(RunTexts, LoadedRun), StoreError> {
        let (texts, decisions, workspace) = self.texts(run_id)?;
        let loaded = verify_run(run_id, &texts, &self.sealer)?;
        self.check_receipts(run_id, &loaded, &workspace)?;
        approvals::check_against_log(run_id, &loaded, &decisions)?;
        Ok((texts, loaded))
    }

    fn texts(&self, run_id: &str) -> Result<(RunTexts, Vec<ApprovalRow>, String), StoreError> {
        let id = run_id.to_string();
        let texts = self.shared.call(move |pool| async move { read_run_texts(&pool, &id).await })?;
        // A queued run has no records yet: said so, not "no run".
        texts.ok_or_else(|| {
            self.or_queued(run_id, StoreError::NotFound { id: run_id.to_string(), path: self.store_location() })
        })
    }

    fn list(&self, kind: &'static str, field: &'static str) -> Result<Vec<RunListing>, StoreError> {
        let workspace = self.workspace()?;
        let rows = self.shared.call(move |pool| async move {
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
    fn export(&self, run_id: &str, out: &Path) -> Result<PathBuf, StoreError> {
        let (texts, loaded) = self.verified(run_id)?;
        // `state.json` as the file store writes it: only when the run has
        // paused or ended (it is then the compact head `runs.state` holds).
        let status = loaded.state.status;
        let compact = status == RunStatus::WaitingApproval || status.is_terminal();
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
        Ok(Box::new(PgRun::new(self, lease, None)))
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
        Ok((Box::new(PgRun::new(self, lease, Some(&loaded))), loaded))
    }

    fn read_run(&self, run_id: &str) -> Result<LoadedRun, StoreError> {
        Ok(self.verified(run_id)?.1)
    }

    fn export_run(&self, run_id: &str, out: &Path) -> Result<PathBuf, StoreError> {
        self.export(run_id, out)
    }

    fn wait_for_runnable(&self, timeout: Duration) -> bool {
        let Ok(mut wake_ups) = self.shared.wake_ups.lock() else {
            std::thread::sleep(timeout);
            return false;
        };
        if wake_ups.receiver.is_none() && wake_ups.retry_at.is_none_or(|at| std::time::Instant::now() >= at) {
            wake_ups.receiver = Some(self.shared.listen());
        }
        let Some(receiver) = &wake_ups.receiver else {
            drop(wake_ups);
            std::thread::sleep(timeout);
            return false;
        };
        match receiver.recv_timeout(timeout) {
            Ok(workspace) => self.workspace_id.as_ref().is_ok_and(|id| *id == workspace),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // The session ended (or never began): poll only, and listen
                // again a little later.
                wake_ups.receiver = None;
                wake_ups.retry_at = Some(std::time::Instant::now() + LISTEN_RETRY);
                drop(wake_ups);
                std::thread::sleep(timeout);
                false
            }
        }
    }

    fn shared(&self) -> bool {
        true
    }

    fn runnable_runs(&self) -> Result<Vec<Runnable>, StoreError> {
        let workspace = self.workspace()?;
        let rows = self.shared.call(move |pool| async move {
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
        let queued = self.shared.call(move |pool| async move {
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
        let (owner, secs) = (self.shared.options.owner_id.clone(), self.shared.lease_secs());
        let sent = Instant::now();
        let claimed = self.shared.call(move |pool| async move {
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
        let (owner, secs) = (self.shared.options.owner_id.clone(), self.shared.lease_secs());
        let sent = Instant::now();
        let claimed = self.shared.call(move |pool| async move {
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
        let row = self.shared.call(move |pool| async move {
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
        RunsPlace::Database { store: self.shared.display.clone(), workspace_id }
    }

    fn list_runs(&self) -> Result<Vec<RunListing>, StoreError> {
        self.list(AGENT, "started_at")
    }

    fn list_records(&self, kind: RecordKind) -> Result<Vec<RunListing>, StoreError> {
        self.list(record_kind(kind), "created_at")
    }

    fn unfinished_records(&self, kind: RecordKind) -> Result<Vec<String>, StoreError> {
        let (kind, workspace) = (record_kind(kind), self.workspace()?);
        self.shared.call(move |pool| async move {
            let client = connect(&pool).await?;
            let rows =
                query(&client, sql::UNFINISHED_RECORDS, &[&kind, &workspace], "list the unfinished records").await?;
            Ok(rows.iter().map(|row| row.get::<_, String>(0)).collect())
        })
    }

    fn create_record(&self, kind: RecordKind, id: &str) -> Result<Box<dyn RecordHandle>, StoreError> {
        let lease = self.create(record_kind(kind), id)?;
        Ok(Box::new(PgRecord::new(self, kind, lease, None)))
    }

    fn open_record(&self, kind: RecordKind, id: &str) -> Result<(Box<dyn RecordHandle>, LoadedRecord), StoreError> {
        let mut lease = self.claim(record_kind(kind), id)?;
        match self.read_record(kind, id) {
            Ok(loaded) => Ok((Box::new(PgRecord::new(self, kind, lease, Some(&loaded))), loaded)),
            Err(error) => {
                let _ = lease.release();
                Err(error)
            }
        }
    }

    fn read_record(&self, kind: RecordKind, id: &str) -> Result<LoadedRecord, StoreError> {
        let (kind_text, id_owned) = (record_kind(kind), id.to_string());
        let texts =
            self.shared.call(move |pool| async move { read_record_texts(&pool, kind_text, &id_owned).await })?;
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
        let owner = self.shared.options.owner_id.clone();
        self.shared.call(move |pool| async move {
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
        self.shared.call(move |pool| async move {
            let client = connect(&pool).await?;
            execute(&client, sql::REMOVE_RECEIPT, &[&workspace, &digest], "remove a receipt").await.map(|_| ())
        })
    }
}

/// An agent run leased by this process.
struct PgRun {
    /// The workspace's folder on this machine, where the run's shell child
    /// is noted (`RunHandle::child_note`).
    workspace: Option<PathBuf>,
    lease: HeldLease,
    location: PathBuf,
    sealer: Sealer,
    /// The version of the last checkpoint this handle wrote (kept or sent).
    stored_version: u64,
    /// The version the database holds, as far as this handle knows: the
    /// guard of its next statement. Behind `stored_version` while read
    /// checkpoints are kept in the handle (`deferred`).
    committed_version: u64,
    audit_seq: u64,
    audit_hash: Option<String>,
    history_records: u64,
    history_hash: Option<String>,
    /// The plan's text and link, once written; `plan_stored` once committed.
    plan: Option<(String, String)>,
    plan_stored: bool,
    /// Appended since the last checkpoint, committed with the next one.
    events: Vec<EventRow>,
    history: Vec<(i64, String)>,
    /// What the coming head line carries that no row holds yet, as in
    /// the file store (`head.rs`).
    pending: PendingHead,
    /// A decision on the frozen action, written with the next checkpoint.
    decision: Option<ApprovalDecision>,
    /// The last checkpoint was committed asynchronously
    /// ([`RunHandle::checkpoint_reads`]) and no synchronous commit of this
    /// run followed it yet.
    unsynced: bool,
    /// The read checkpoints kept in the handle and not sent yet
    /// ([`RunHandle::checkpoint_reads`]): the last one's head.
    deferred: Option<DeferredHead>,
    /// Kept read checkpoints sent without waiting (when as many were kept
    /// as a handle keeps): the run reads on while the server writes them;
    /// the answer is taken before anything else is sent.
    in_flight: Option<InFlight>,
}

/// The statement that sends kept read checkpoints, not answered yet.
struct InFlight {
    answer: Pending<()>,
    sent: Instant,
    /// The last of them.
    deferred: DeferredHead,
    asynchronous: bool,
}

/// How many read checkpoints in a row a handle keeps before it sends them
/// (in one statement: their rows and the last one's head).
const DEFERRED_READS_MAX: usize = 64;

/// How long the first of the kept read checkpoints may wait: the next
/// read's checkpoint after that sends them all.
const DEFERRED_READS_FOR: Duration = Duration::from_millis(200);

/// The last of the read checkpoints a handle keeps: its head line is the
/// last row of `events[..events]`, and it covers `history[..history]`.
struct DeferredHead {
    /// The checkpoint its head line carries, and the line's link: the
    /// compact head (`runs.state`) is made of them when sent.
    checkpoint: serde_json::Map<String, Value>,
    head_hash: String,
    version: u64,
    audit_seq: u64,
    history_records: u64,
    status: String,
    events: usize,
    history: usize,
    /// Read checkpoints kept, and since when.
    reads: usize,
    since: Instant,
}

/// One checkpoint statement's content: the head, the rows before it, and
/// on a run's first checkpoint its plan or with a decision its row.
struct HeadToSend {
    text: String,
    status: String,
    finished: bool,
    version: u64,
    audit_seq: u64,
    history_records: u64,
    events: Vec<EventRow>,
    history: Vec<(i64, String)>,
    plan: Option<(String, String)>,
    decision: Option<ApprovalDecision>,
}

impl PgRun {
    fn new(store: &PgStore, lease: HeldLease, loaded: Option<&LoadedRun>) -> PgRun {
        let location = store.location_of(AGENT, &lease.key.id);
        let workspace = store.workspace.clone();
        let mut run = PgRun {
            workspace,
            lease,
            location,
            sealer: store.sealer.clone(),
            stored_version: 0,
            committed_version: 0,
            audit_seq: 0,
            audit_hash: None,
            history_records: 0,
            history_hash: None,
            plan: None,
            plan_stored: false,
            events: Vec::new(),
            history: Vec::new(),
            pending: PendingHead::default(),
            decision: None,
            unsynced: false,
            deferred: None,
            in_flight: None,
        };
        if let Some(loaded) = loaded {
            run.stored_version = loaded.state.state_version;
            run.committed_version = loaded.state.state_version;
            run.audit_seq = loaded.audit_tail.seq;
            run.audit_hash = loaded.audit_tail.hash.clone();
            run.history_records = loaded.history.len() as u64;
            run.history_hash = loaded.heads.history_hash.clone();
            run.plan = Some((String::new(), loaded.heads.plan_hash.clone()));
            run.plan_stored = true;
        }
        run
    }

    fn serialize_error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Io {
            action: "serialize",
            path: self.location.clone(),
            source: std::io::Error::other(message.to_string()),
        }
    }

    /// Adds `event` as the next audit row (a head line when `sealed`).
    fn push_event(&mut self, event: NewEvent<'_>, sealed: bool) -> Result<u64, StoreError> {
        let line =
            event_line(&self.lease.key.id, self.audit_seq + 1, self.audit_hash.as_deref(), event, sealed, &self.sealer)
                .map_err(|error| self.serialize_error(error))?;
        let hash = self.sealer.link(line.as_bytes());
        self.audit_seq += 1;
        self.events.push(EventRow { seq: i64::try_from(self.audit_seq).unwrap_or(i64::MAX), line, hash: hash.clone() });
        self.audit_hash = Some(hash);
        Ok(self.audit_seq)
    }

    /// The head line of checkpoint `state` (not added yet), its link, and
    /// the checkpoint it carries (the compact head is made of it when sent:
    /// [`full_payload`]).
    fn head_line(&self, state: &RunState) -> Result<(EventRow, String, serde_json::Map<String, Value>), StoreError> {
        let Some((_, plan_hash)) = &self.plan else {
            return Err(self.serialize_error("a run's first checkpoint comes after its plan is stored"));
        };
        let checkpoint = self
            .pending
            .checkpoint(state, Links { plan_hash, history_hash: self.history_hash.as_deref() })
            .map_err(|error| self.serialize_error(error))?;
        let head = self.pending.line(&checkpoint).map_err(|error| self.serialize_error(error))?;
        let seq = self.audit_seq + 1;
        let event = LineRef {
            seq,
            ts: &head.held.ts,
            run_id: &self.lease.key.id,
            event_type: head.columns().event_type,
            step_id: head.columns().step_id,
            status: head.columns().status,
            details: &head.details,
            prev_hash: self.audit_hash.as_deref(),
        };
        let line = line_text(&event, true, &self.sealer).map_err(|error| self.serialize_error(error))?;
        let head_hash = self.sealer.link(line.as_bytes());
        let row = EventRow { seq: i64::try_from(seq).unwrap_or(i64::MAX), line, hash: head_hash.clone() };
        Ok((row, head_hash, checkpoint))
    }

    /// [`RunHandle::checkpoint`], committed synchronously, or (`synchronous`
    /// false, and it stores neither the plan nor a decision) without
    /// waiting for the write-ahead log's flush. It also sends the read
    /// checkpoints the handle kept.
    fn write_checkpoint(&mut self, state: &RunState, expected: u64, synchronous: bool) -> Result<(), StoreError> {
        compare_version(&self.lease.key.id, self.stored_version, expected)?;
        self.settle(true)?;
        let (row, head_hash, checkpoint) = self.head_line(state)?;
        let seq = self.audit_seq + 1;
        let compact = full_payload(&checkpoint, seq, &head_hash);
        let text = sealed_text(&self.sealer, &self.lease.key.id, Value::Object(compact))?;
        // Written into the handle only once the transaction commits: a
        // refused checkpoint leaves the handle as it was.
        let mut events = self.events.clone();
        events.push(row);
        let plan = if self.plan_stored { None } else { self.plan.clone() };
        let head = HeadToSend {
            text,
            status: state.status.as_str().to_string(),
            finished: state.status.is_terminal(),
            version: state.state_version,
            audit_seq: seq,
            history_records: self.history_records,
            events,
            history: self.history.clone(),
            plan,
            decision: self.decision.clone(),
        };
        let asynchronous = self.send(head, synchronous)?;
        self.plan_stored = true;
        self.events.clear();
        self.history.clear();
        self.pending.written();
        self.decision = None;
        self.deferred = None;
        self.audit_seq = seq;
        self.audit_hash = Some(head_hash);
        self.stored_version = state.state_version;
        self.committed_version = state.state_version;
        // A synchronous commit flushes the log up to it, and so every
        // earlier commit; an asynchronous one waits for the next.
        self.unsynced = asynchronous;
        Ok(())
    }

    /// Sends the read checkpoints the handle kept (nothing when none): their
    /// rows and the last one's head, in one statement, once the statement
    /// in flight was answered; waits for the answer when `wait` (else
    /// [`PgRun::settle`] takes it later). Kept as they were when it fails,
    /// so that a later write sends them again.
    fn send_deferred(&mut self, synchronous: bool, wait: bool) -> Result<(), StoreError> {
        self.settle(true)?;
        let Some(deferred) = self.deferred.take() else { return Ok(()) };
        match self.deferred_head(&deferred).and_then(|head| self.start_send(head, synchronous)) {
            Ok((sent, answer, asynchronous)) => {
                self.in_flight = Some(InFlight { answer, sent, deferred, asynchronous });
            }
            Err(error) => {
                self.deferred = Some(deferred);
                return Err(error);
            }
        }
        if wait { self.settle(true) } else { Ok(()) }
    }

    /// The statement that sends the kept read checkpoints up to `deferred`.
    fn deferred_head(&self, deferred: &DeferredHead) -> Result<HeadToSend, StoreError> {
        let compact = full_payload(&deferred.checkpoint, deferred.audit_seq, &deferred.head_hash);
        Ok(HeadToSend {
            text: sealed_text(&self.sealer, &self.lease.key.id, Value::Object(compact))?,
            status: deferred.status.clone(),
            finished: false,
            version: deferred.version,
            audit_seq: deferred.audit_seq,
            history_records: deferred.history_records,
            events: self.events[..deferred.events].to_vec(),
            history: self.history[..deferred.history].to_vec(),
            plan: None,
            decision: None,
        })
    }

    /// Takes the answer of the statement in flight, waiting for it when
    /// `wait` (else only when it is there): its rows leave the handle and
    /// its version is the stored one. A refusal or a failure is returned,
    /// and the rows stay kept, so that the next write sends them again,
    /// guarded by the version before.
    fn settle(&mut self, wait: bool) -> Result<(), StoreError> {
        let Some(mut flight) = self.in_flight.take() else { return Ok(()) };
        let answer = if wait {
            flight.answer.wait()
        } else {
            match flight.answer.ready() {
                Some(answer) => answer,
                None => {
                    self.in_flight = Some(flight);
                    return Ok(());
                }
            }
        };
        let InFlight { sent, deferred, asynchronous, .. } = flight;
        if let Err(error) = self.lease.after_write(sent, answer) {
            // Kept ones since cover these rows too.
            self.deferred.get_or_insert(deferred);
            return Err(error);
        }
        self.events.drain(..deferred.events);
        self.history.drain(..deferred.history);
        if let Some(kept) = &mut self.deferred {
            kept.events -= deferred.events;
            kept.history -= deferred.history;
        }
        self.committed_version = deferred.version;
        self.unsynced = asynchronous;
        Ok(())
    }

    /// One checkpoint statement, guarded by the lease and by the version
    /// the database holds (`committed_version`); in a transaction with the
    /// plan or the decision when there is one. Whether it was committed
    /// asynchronously: only a statement of its own, when not `synchronous`.
    fn send(&self, head: HeadToSend, synchronous: bool) -> Result<bool, StoreError> {
        let (sent, answer, asynchronous) = self.start_send(head, synchronous)?;
        self.lease.after_write(sent, answer.wait())?;
        Ok(asynchronous)
    }

    /// [`PgRun::send`] without waiting for the answer: when it was sent,
    /// the answer, and whether it commits asynchronously.
    fn start_send(&self, head: HeadToSend, synchronous: bool) -> Result<(Instant, Pending<()>, bool), StoreError> {
        let sent = self.lease.before_write()?;
        let key = self.lease.key.clone();
        let to_i64 = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        let expected = self.committed_version;
        let HeadToSend { text, status, finished, version, audit_seq, history_records, events, history, plan, decision } =
            head;
        // A step's own checkpoint is one statement; the first one (the
        // plan) or one with a person's decision is a transaction, which
        // always commits synchronously.
        let one_statement = plan.is_none() && decision.is_none();
        let asynchronous = !synchronous && one_statement;
        let (expected_i, version) = (to_i64(expected), to_i64(version));
        let (audit_seq, history_records) = (to_i64(audit_seq), to_i64(history_records));
        let answer = self.lease.shared.begin(move |pool| async move {
            let mut client = connect(&pool).await?;
            let seqs: Vec<i64> = events.iter().map(|row| row.seq).collect();
            let lines: Vec<&str> = events.iter().map(|row| row.line.as_str()).collect();
            let hashes: Vec<&str> = events.iter().map(|row| row.hash.as_str()).collect();
            let numbers: Vec<i64> = history.iter().map(|(number, _)| *number).collect();
            let records: Vec<&str> = history.iter().map(|(_, line)| line.as_str()).collect();
            let params: [&(dyn ToSql + Sync); 18] = [
                &key.kind,
                &key.id,
                &key.owner,
                &key.token,
                &expected_i,
                &text,
                &status,
                &version,
                &audit_seq,
                &history_records,
                &finished,
                &key.secs,
                &seqs,
                &lines,
                &hashes,
                &numbers,
                &records,
                &asynchronous,
            ];
            if one_statement {
                // A step's checkpoint: the one statement, one round trip.
                if !checkpoint_written(&client, &params).await? {
                    return Err(refusal(&client, &key, expected).await);
                }
                return Ok(());
            }
            // The first checkpoint stores the plan, an approval's its row:
            // the same statement and those in one transaction.
            let transaction = client.transaction().await.map_err(store_error("start the checkpoint"))?;
            if !checkpoint_written(&transaction, &params).await? {
                return Err(refusal(&transaction, &key, expected).await);
            }
            if let Some((plan, plan_hash)) = &plan {
                execute(&transaction, sql::INSERT_PLAN, &[&key.id, plan, plan_hash], "store the plan").await?;
            }
            if let Some(decision) = &decision {
                approvals::record(&transaction, &key.id, decision).await?;
            }
            transaction.commit().await.map_err(store_error("commit the checkpoint"))
        });
        Ok((sent, answer, asynchronous))
    }
}

impl RunHandle for PgRun {
    fn run_id(&self) -> &str {
        &self.lease.key.id
    }

    fn records(&self) -> RunRecords {
        RunRecords::Database(self.location.display().to_string())
    }

    fn audit_seq(&self) -> u64 {
        self.pending.seq(self.audit_seq)
    }

    fn audit_hash(&self) -> Option<&str> {
        // The last line written; a held head line's link is known once the
        // checkpoint has written it.
        self.audit_hash.as_deref()
    }

    fn stored_version(&self) -> u64 {
        self.stored_version
    }

    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError> {
        let mut pending = std::mem::take(&mut self.pending);
        let appended = pending.append(event, self.audit_seq, |event| self.push_event(event, false));
        self.pending = pending;
        appended
    }

    fn append_history(&mut self, record: &StepRecord) -> Result<(), StoreError> {
        let line = serde_json::to_string(record).map_err(|error| self.serialize_error(error))?;
        self.history_hash = Some(self.sealer.chain(self.history_hash.as_deref(), line.as_bytes()));
        self.history_records += 1;
        self.history.push((i64::try_from(self.history_records).unwrap_or(i64::MAX), line));
        self.pending.record(record);
        Ok(())
    }

    fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError> {
        let bytes = plan_bytes(plan).map_err(|error| self.serialize_error(error))?;
        let text = String::from_utf8(bytes).map_err(|error| self.serialize_error(error))?;
        let hash = self.sealer.link(text.as_bytes());
        self.plan = Some((text, hash));
        self.pending.plan(plan.clone());
        Ok(())
    }

    /// The checkpoint, if the stored `state_version` is `expected`: the
    /// held `state_saved`/`run_finished` event becomes the head line (the
    /// checkpoint, the step records since the previous head, on the first
    /// head the plan, sealed: the file store's line), `runs.state` the
    /// compact head of that line, all committed in one transaction.
    fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        self.write_checkpoint(state, expected, true)
    }

    /// The checkpoint after a read. A run's read checkpoints in a row are
    /// kept in the handle and sent together, in one statement: when
    /// [`DEFERRED_READS_MAX`] are kept or the first of them is older than
    /// [`DEFERRED_READS_FOR`] (at the next read's checkpoint), committed
    /// without waiting for the write-ahead log's flush and without waiting
    /// for the answer, which is taken before the next statement; and
    /// before anything else this handle writes ([`RunHandle::make_durable`]
    /// before an effect, a pause or an end, a use of an approval),
    /// synchronously. Until then the database holds the checkpoint before
    /// them: a crash (or a server crash that loses the asynchronous commit)
    /// loses them, never tears them, and the run reads again from there.
    /// The lines are the same either way. The first checkpoint (the plan)
    /// and one with a decision are sent at once, synchronously.
    fn checkpoint_reads(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        if !self.plan_stored || self.decision.is_some() {
            return self.write_checkpoint(state, expected, false);
        }
        compare_version(&self.lease.key.id, self.stored_version, expected)?;
        // A refusal or failure of the statement in flight stops the run now.
        self.settle(false)?;
        // A holder whose lease's deadline passed keeps nothing either.
        self.lease.before_write()?;
        let (row, head_hash, checkpoint) = self.head_line(state)?;
        self.events.push(row);
        self.pending.written();
        self.audit_seq += 1;
        self.audit_hash = Some(head_hash.clone());
        self.stored_version = state.state_version;
        let (reads, since) = self.deferred.as_ref().map_or((1, Instant::now()), |kept| (kept.reads + 1, kept.since));
        self.deferred = Some(DeferredHead {
            checkpoint,
            head_hash,
            version: state.state_version,
            audit_seq: self.audit_seq,
            history_records: self.history_records,
            status: state.status.as_str().to_string(),
            events: self.events.len(),
            history: self.history.len(),
            reads,
            since,
        });
        if reads >= DEFERRED_READS_MAX || since.elapsed() >= DEFERRED_READS_FOR {
            self.send_deferred(false, false)?;
        }
        Ok(())
    }

    /// After an asynchronous checkpoint: one guarded, synchronous commit
    /// (the lease renewed if the checkpoint is still the stored one), so
    /// the effect that follows never starts on a checkpoint a server crash
    /// lost: then this is refused and nothing runs.
    ///
    /// Read checkpoints the handle kept are sent now, synchronously, in
    /// one statement instead.
    fn make_durable(&mut self) -> Result<(), StoreError> {
        self.settle(true)?;
        if self.deferred.is_some() {
            return self.send_deferred(true, true);
        }
        if !self.unsynced {
            return Ok(());
        }
        let sent = self.lease.before_write()?;
        let key = self.lease.key.clone();
        let expected = self.committed_version;
        let version = i64::try_from(expected).unwrap_or(i64::MAX);
        let written = self.lease.shared.idempotent(move |pool| {
            let key = key.clone();
            async move {
                let client = connect(&pool).await?;
                let params: [&(dyn ToSql + Sync); 6] =
                    [&key.kind, &key.id, &key.owner, &key.token, &version, &key.secs];
                if execute(&client, sql::CHECKPOINT_DURABLE, &params, "make the checkpoint durable").await? == 1 {
                    return Ok(());
                }
                Err(refusal(&client, &key, expected).await)
            }
        });
        self.lease.after_write(sent, written)?;
        self.unsynced = false;
        Ok(())
    }

    fn record_decision(&mut self, decision: ApprovalDecision) -> Result<(), StoreError> {
        self.decision = Some(decision);
        Ok(())
    }

    /// One transaction before the approved action runs: the lease and the
    /// loaded version guard it, then the approval's row is used
    /// (`approvals.rs`). The step's `approval_verified` is the last event
    /// appended; the stored head is the last one committed.
    fn consume_approval(&mut self, approval: &ApprovalUse) -> Result<(), StoreError> {
        self.send_deferred(true, true)?;
        let key = self.lease.key.clone();
        let head = self.audit_seq - self.events.len() as u64;
        let seqs = (self.stored_version, head, self.audit_seq);
        let approval = approval.clone();
        self.lease.shared.call(move |pool| async move { approvals::consume(&pool, &key, seqs, &approval).await })
    }

    /// Read checkpoints still kept are dropped: the database holds the
    /// checkpoint before them, from which the run reads again.
    fn release(mut self: Box<Self>) -> Result<(), StoreError> {
        // The statement in flight is answered before the lease is given
        // back (whatever the answer: the run is given back either way).
        let _ = self.settle(true);
        self.deferred = None;
        self.lease.release()
    }

    fn fence(&self) -> Fence {
        self.lease.fence.clone()
    }

    fn child_note(&self) -> Option<ChildNoteFile> {
        let note = |workspace: &PathBuf| workspace.join(".planrun").join("children").join(&self.lease.key.id);
        self.workspace.as_ref().map(|workspace| ChildNoteFile::transient(note(workspace)))
    }

    fn claims_exhausted(&self) -> Option<ClaimsExhausted> {
        let max_claims = self.lease.shared.options.max_claims;
        (self.lease.claims > max_claims).then_some(ClaimsExhausted { claims: self.lease.claims, max_claims })
    }
}

/// The audit line of `event` as `seq` of `id` after `prev_hash` (a head
/// line with its seal when `sealed`): the same bytes as the file store's
/// `audit.jsonl` line.
fn event_line(
    id: &str,
    seq: u64,
    prev_hash: Option<&str>,
    event: NewEvent<'_>,
    sealed: bool,
    sealer: &Sealer,
) -> serde_json::Result<String> {
    let event = LineRef {
        seq,
        ts: &event.ts,
        run_id: id,
        event_type: event.event_type,
        step_id: event.step_id,
        status: event.status,
        details: &event.details,
        prev_hash,
    };
    line_text(&event, sealed, sealer)
}

/// The text of a log line (a head line when `sealed`).
fn line_text(event: &impl serde::Serialize, sealed: bool, sealer: &Sealer) -> serde_json::Result<String> {
    let mut line = Vec::with_capacity(512);
    write_line(&mut line, event, sealed, sealer)?;
    String::from_utf8(line).map_err(serde::ser::Error::custom)
}

impl Drop for PgRun {
    /// A statement still in flight is answered before the lease is given
    /// back (by the lease's own drop, after this).
    fn drop(&mut self) {
        if let Some(flight) = self.in_flight.take() {
            let _ = flight.answer.wait();
        }
    }
}

/// A bridge or controller record leased by this process.
struct PgRecord {
    lease: HeldLease,
    kind: RecordKind,
    location: PathBuf,
    sealer: Sealer,
    stored_version: u64,
    audit_seq: u64,
    audit_hash: Option<String>,
}

/// The fields the store adds to a record's state in its checkpoint.
const RECORD_FIELDS: [&str; 3] = ["state_version", "audit_seq", "audit_hash"];

impl PgRecord {
    fn new(store: &PgStore, kind: RecordKind, lease: HeldLease, loaded: Option<&LoadedRecord>) -> PgRecord {
        let location = store.location_of(record_kind(kind), &lease.key.id);
        PgRecord {
            lease,
            kind,
            location,
            sealer: store.sealer.clone(),
            stored_version: loaded.map_or(0, |loaded| loaded.state_version),
            audit_seq: loaded.map_or(0, |loaded| loaded.audit_tail.seq),
            audit_hash: loaded.and_then(|loaded| loaded.audit_tail.hash.clone()),
        }
    }

    fn refuse(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Io {
            action: "serialize",
            path: self.location.clone(),
            source: std::io::Error::other(message.to_string()),
        }
    }
}

impl RecordHandle for PgRecord {
    fn id(&self) -> &str {
        &self.lease.key.id
    }

    fn kind(&self) -> RecordKind {
        self.kind
    }

    fn stored_version(&self) -> u64 {
        self.stored_version
    }

    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError> {
        self.lease.before_write()?;
        let seq = self.audit_seq + 1;
        let line = event_line(&self.lease.key.id, seq, self.audit_hash.as_deref(), event, false, &self.sealer)
            .map_err(|error| self.refuse(error))?;
        let hash = self.sealer.link(line.as_bytes());
        let key = self.lease.key.clone();
        let seq_i = i64::try_from(seq).unwrap_or(i64::MAX);
        let stored = hash.clone();
        let written = self.lease.shared.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 7] = [&key.kind, &key.id, &key.owner, &key.token, &seq_i, &line, &stored];
            if execute(&client, sql::APPEND_RECORD_EVENT, &params, "append an audit event").await? == 1 {
                Ok(())
            } else {
                Err(StoreError::LeaseLost { id: key.id.clone() })
            }
        });
        if matches!(written, Err(StoreError::LeaseLost { .. })) {
            self.lease.fence.lose();
        }
        written?;
        self.audit_seq = seq;
        self.audit_hash = Some(hash);
        Ok(seq)
    }

    fn checkpoint(&mut self, state: &Value, expected: u64) -> Result<u64, StoreError> {
        compare_version(&self.lease.key.id, self.stored_version, expected)?;
        let Value::Object(state) = state else {
            return Err(self.refuse("a record's state must be a JSON object"));
        };
        if let Some(field) = RECORD_FIELDS.iter().find(|field| state.contains_key(**field)) {
            return Err(self.refuse(format!("a record's state may not hold `{field}`: the store writes it")));
        }
        let id_field = self.kind.id_field();
        if state.get(id_field).and_then(Value::as_str) != Some(self.lease.key.id.as_str()) {
            return Err(self.refuse(format!("the state's `{id_field}` is not `{}`", self.lease.key.id)));
        }
        let version = self.stored_version + 1;
        let status = state.get("status").and_then(Value::as_str).map(str::to_string);
        let mut payload = state.clone();
        payload.insert("state_version".into(), json!(version));
        payload.insert("audit_seq".into(), json!(self.audit_seq));
        payload.insert("audit_hash".into(), json!(self.audit_hash));
        let text = sealed_text(&self.sealer, &self.lease.key.id, Value::Object(payload))?;
        let key = self.lease.key.clone();
        let to_i64 = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        let (expected_i, version_i) = (to_i64(expected), to_i64(version));
        let sent = self.lease.before_write()?;
        let written = self.lease.shared.call(move |pool| async move {
            let client = connect(&pool).await?;
            let params: [&(dyn ToSql + Sync); 9] =
                [&key.kind, &key.id, &key.owner, &key.token, &expected_i, &text, &status, &version_i, &key.secs];
            if execute(&client, sql::RECORD_CHECKPOINT, &params, "write the record's checkpoint").await? == 1 {
                Ok(())
            } else {
                Err(refusal(&client, &key, expected).await)
            }
        });
        self.lease.after_write(sent, written)?;
        self.stored_version = version;
        Ok(version)
    }

    fn release(mut self: Box<Self>) -> Result<(), StoreError> {
        self.lease.release()
    }
}
