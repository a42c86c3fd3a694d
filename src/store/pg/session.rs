//! The session with the database: the process's one pool and runtime
//! ([`Session`]), how a call waits for a database that went away and
//! retries what may be done twice, and the statement helpers (`connect`,
//! `execute`, `query`) every room uses.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;

use crate::store::StoreError;
use crate::store::backoff::Backoff;
use crate::store::pg::location::PgLocation;

use super::error::{self, PgError, is_transient_pool, pool_error, store_error};
use super::migrate::{self};
use super::runtime::{Pending, StoreRuntime};
use super::stores::PgOptions;
use super::tls;
use super::wake::WakeUps;

/// Every statement may take this long (`statement_timeout`).
const STATEMENT_TIMEOUT_MS: u64 = 30_000;

/// A session idle inside a transaction this long is ended by the server
/// (`idle_in_transaction_session_timeout`): a frozen holder cannot keep
/// row locks.
const IDLE_IN_TRANSACTION_MS: u64 = 60_000;

/// Connections per process.
const POOL_SIZE: usize = 8;

/// The process's one pool and runtime, shared by every [`super::PgStore`].
pub(super) struct Session {
    pub(super) runtime: StoreRuntime,
    pub(super) pool: Pool,
    pub(super) display: String,
    pub(super) options: PgOptions,
    /// The session configuration, for the unpooled listening session.
    pub(super) config: tokio_postgres::Config,
    /// Plain or TLS sessions, as the URL's `sslmode` asks.
    pub(super) connector: tls::Connector,
    /// How long a call waits for the database to answer again before it
    /// fails with [`StoreError::Unavailable`]: zero for one-shot commands
    /// (they fail fast), the lease length for workers and the service.
    pub(super) patience: Duration,
    /// Wake-ups (`LISTEN planrun_runnable`), once a worker waits for them.
    pub(super) wake_ups: std::sync::Mutex<WakeUps>,
}

impl Session {
    pub(super) fn open(location: &PgLocation, options: PgOptions, patience: Duration) -> Result<Arc<Session>, PgError> {
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
        Ok(Arc::new(Session {
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
    /// to [`Session::patience`], jittered exponential backoff), so that a
    /// restart between two statements costs a pause, not the run; a
    /// session lost while a statement runs still fails the call
    /// ([`StoreError::Unavailable`]: its outcome is read back, never
    /// guessed).
    pub(super) fn call<T, F>(&self, make: impl FnOnce(Pool) -> F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.begin(make).wait()
    }

    /// [`Session::call`] without waiting: the answer is waited for later.
    pub(super) fn begin<T, F>(&self, make: impl FnOnce(Pool) -> F) -> Pending<T>
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
    /// the database is unavailable (up to [`Session::patience`]): doing
    /// it twice is doing it once, and a check that reads (a receipt) must
    /// not fail a run because one session was lost.
    pub(super) fn idempotent<T, F>(&self, make: impl Fn(Pool) -> F) -> Result<T, StoreError>
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

    /// Refuses a schema this planrun cannot use; [`PgError::Unavailable`]
    /// when the database does not answer.
    pub(super) fn check_schema(&self) -> Result<(), PgError> {
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

    pub(super) fn lease_secs(&self) -> i64 {
        i64::try_from(self.options.lease_secs.max(1)).unwrap_or(i64::MAX)
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
pub(super) async fn connect(pool: &Pool) -> Result<deadpool_postgres::Object, StoreError> {
    pool.get().await.map_err(pool_error("connect"))
}

pub(super) async fn execute<C: GenericClient + Sync>(
    client: &C,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
    action: &'static str,
) -> Result<u64, StoreError> {
    let prepared = client.prepare_cached(statement).await.map_err(store_error(action))?;
    client.execute(&prepared, params).await.map_err(store_error(action))
}

pub(super) async fn query<C: GenericClient + Sync>(
    client: &C,
    statement: &str,
    params: &[&(dyn ToSql + Sync)],
    action: &'static str,
) -> Result<Vec<tokio_postgres::Row>, StoreError> {
    let prepared = client.prepare_cached(statement).await.map_err(store_error(action))?;
    client.query(&prepared, params).await.map_err(store_error(action))
}
