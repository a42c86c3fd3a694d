//! The store factory ([`PgStores`]): connects once per process (waiting
//! for the database or not), migrates, and opens the [`PgStore`] of each
//! workspace; and how a process uses the store ([`PgOptions`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::store::backoff::Backoff;
use crate::store::pg::location::PgLocation;
use crate::store::{RunStore, Sealer, StoreFactory};

use super::error::{self, PgError};
use super::migrate::{self, MigrationReport};
use super::session::Session;
use super::store::PgStore;

/// How a process uses the store: its lease length, its owner id and how
/// often a run may be taken over without progress.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `PLANRUN_LEASE_SECS` (default 30).
    pub lease_secs: u64,
    /// `PLANRUN_MAX_CLAIMS` (default 5): how often a run may be taken over
    /// from dead holders since its last checkpoint; the claim after that
    /// ends it `recovery_exhausted` (the runtime does, asked through
    /// [`RunHandle::claims_exhausted`](crate::store::RunHandle::claims_exhausted)).
    pub max_claims: u64,
    /// Who holds the leases this process takes (`pid:random`).
    pub owner_id: String,
}

/// The [`StoreFactory`] of [`PgStore`]s: one pool for the process, opened
/// (and its schema checked) once, at start-up.
#[derive(Clone)]
pub struct PgStores {
    session: Arc<Session>,
}

impl std::fmt::Debug for PgStores {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "PgStores({})", self.session.display)
    }
}

impl PgStores {
    /// Connects to `location` and refuses a schema this planrun cannot use
    /// (never migrated, partly migrated, newer): nothing is written. A
    /// database that does not answer fails at once (after the connect
    /// timeout): the one-shot commands.
    pub fn connect(location: &PgLocation, options: PgOptions) -> Result<PgStores, PgError> {
        let session = Session::open(location, options, Duration::ZERO)?;
        session.check_schema()?;
        Ok(PgStores { session })
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
        let session = Session::open(location, options, patience)?;
        let mut backoff = Backoff::default();
        loop {
            match session.check_schema() {
                Err(error) if error.is_unavailable() => {
                    let delay = backoff.next_delay();
                    on_wait(&error, delay);
                    std::thread::sleep(delay);
                }
                outcome => return outcome.map(|()| PgStores { session }),
            }
        }
    }

    /// `planrun store migrate`: applies the missing migrations.
    pub fn migrate(location: &PgLocation, options: PgOptions) -> Result<MigrationReport, PgError> {
        let session = Session::open(location, options, Duration::ZERO)?;
        let display = session.display.clone();
        let pool = session.pool.clone();
        session
            .runtime
            .run(async move {
                let mut client = match pool.get().await {
                    Ok(client) => client,
                    Err(error) => return Ok(Err(error::unreachable(&display, &error))),
                };
                Ok(migrate::migrate(&mut client).await)
            })
            .map_err(|error| PgError::Unreachable { location: session.display.clone(), message: error.to_string() })?
    }

    /// The store of the workspace named `workspace_id` (tests).
    pub fn store_named(&self, workspace_id: &str, sealer: &Sealer) -> PgStore {
        let workspace_id = Ok(workspace_id.to_string());
        PgStore { session: self.session.clone(), workspace_id, workspace: None, sealer: sealer.clone() }
    }

    /// The store of `workspace`, which it names by its id
    /// (`<workspace>/.planrun/id`, created with `fresh()` on first use), so
    /// that the same workspace mounted at other paths on other machines has
    /// the same runs and receipts.
    pub fn store(&self, workspace: &Path, sealer: &Sealer, fresh: &dyn Fn() -> String) -> PgStore {
        let workspace_id =
            crate::store::workspace_id::read_or_create(workspace, fresh).map_err(|error| error.to_string());
        let folder = Some(workspace.to_path_buf());
        PgStore { session: self.session.clone(), workspace_id, workspace: folder, sealer: sealer.clone() }
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
        Arc::new(PgStore { session: self.session.clone(), workspace_id, workspace: folder, sealer: sealer.clone() })
    }

    fn open_identified(&self, workspace: &Path, sealer: &Sealer, fresh: &dyn Fn() -> String) -> Arc<dyn RunStore> {
        Arc::new(self.store(workspace, sealer, fresh))
    }
}
