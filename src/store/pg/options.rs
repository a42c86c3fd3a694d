//! How a process uses the PostgreSQL store ([`PgOptions`]), from its
//! environment, and the store's [`Backend`]: `--store postgres://…` parsed
//! (`location.rs`), its settings read, the store connected.

use crate::store::StoreFactory;
use crate::store::backend::{Backend, Migration, OpenError, StoreOptions};
use crate::store::pg::location::PgLocation;
use crate::store::pg::{PgOptions, PgStores};

/// The default of `PLANRUN_LEASE_SECS`: how long a run's lease lasts
/// without a heartbeat (renewed at a third of it).
pub const DEFAULT_LEASE_SECS: u64 = 30;

/// The default of `PLANRUN_MAX_CLAIMS`: how often a run may be taken over
/// from a holder that died, without a checkpoint in between, before the
/// next claim ends it `failed` (`recovery_exhausted`).
pub const DEFAULT_MAX_CLAIMS: u64 = 5;

impl PgOptions {
    /// How this process uses a PostgreSQL store: the lease length
    /// (`PLANRUN_LEASE_SECS`, default `DEFAULT_LEASE_SECS`), the takeovers a
    /// run may take without progress (`PLANRUN_MAX_CLAIMS`, default
    /// `DEFAULT_MAX_CLAIMS`) and a fresh owner
    /// id (`[<node_id>:]<pid>:<random>`), so that a restarted process never
    /// holds the leases of the one before it. `var` reads the process
    /// environment.
    #[expect(clippy::disallowed_methods, reason = "the one source of fresh random ids")]
    pub fn from_env(node_id: Option<&str>, var: &dyn Fn(&str) -> Option<String>) -> Result<PgOptions, String> {
        let lease_secs = match var("PLANRUN_LEASE_SECS") {
            None => DEFAULT_LEASE_SECS,
            Some(text) => match text.trim().parse::<u64>() {
                Ok(secs) if (1..=86_400).contains(&secs) => secs,
                _ => {
                    return Err(format!(
                        "`PLANRUN_LEASE_SECS` must be a whole number of seconds from 1 to 86400, not `{text}`"
                    ));
                }
            },
        };
        let max_claims = match var("PLANRUN_MAX_CLAIMS") {
            None => DEFAULT_MAX_CLAIMS,
            Some(text) => match text.trim().parse::<u64>() {
                Ok(claims) if (1..=1_000).contains(&claims) => claims,
                _ => return Err(format!("`PLANRUN_MAX_CLAIMS` must be a whole number from 1 to 1000, not `{text}`")),
            },
        };
        let process = format!("{}:{}", std::process::id(), uuid::Uuid::now_v7().simple());
        let owner_id = match node_id {
            Some(node) => format!("{node}:{process}"),
            None => process,
        };
        Ok(PgOptions { lease_secs, max_claims, owner_id })
    }
}

/// `--store postgres://…`.
pub(crate) struct PgBackend;

impl Backend for PgBackend {
    fn open(&self, location: &str, options: StoreOptions<'_>) -> Result<Box<dyn StoreFactory>, OpenError> {
        let location = PgLocation::parse(location)?;
        let pg_options = PgOptions::from_env(options.node_id, options.var).map_err(OpenError::Setting)?;
        let stores = match options.on_wait {
            None => PgStores::connect(&location, pg_options),
            Some(on_wait) => PgStores::connect_waiting(&location, pg_options, &|error, delay| {
                on_wait(&error.to_string(), delay);
            }),
        }
        .map_err(|error| OpenError::Unavailable(error.to_string()))?;
        Ok(Box::new(stores))
    }

    fn migrate(&self, location: &str, options: StoreOptions<'_>) -> Result<Migration, OpenError> {
        let location = PgLocation::parse(location)?;
        let pg_options = PgOptions::from_env(None, options.var).map_err(OpenError::Setting)?;
        let report =
            PgStores::migrate(&location, pg_options).map_err(|error| OpenError::Unavailable(error.to_string()))?;
        Ok(Migration { schema: report.schema, applied: report.applied, version: report.version })
    }
}
