//! `planrun store migrate --store URL`: creates or updates the schema of a
//! database store (see `migrations/`). Idempotent: a second run applies
//! nothing.

use crate::ops::OpsError;
use crate::store::StoreLocation;

/// What `store migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The schema the tables are in.
    pub schema: String,
    /// Versions applied now (empty: it was up to date).
    pub applied: Vec<i64>,
    /// The schema's version afterwards.
    pub version: i64,
}

/// Applies the missing migrations to the store at `location`.
pub fn migrate(location: &str) -> Result<Migrated, OpsError> {
    match StoreLocation::parse(location).map_err(|error| OpsError::StoreUnavailable(error.to_string()))? {
        StoreLocation::File => Err(OpsError::Usage(
            "`store migrate` needs a database store (`--store postgres://user@host:port/database` or \
             `PLANRUN_STORE`): the file store has no schema"
                .to_string(),
        )),
        #[cfg(feature = "postgres")]
        StoreLocation::Postgres(location) => {
            let options = crate::runtime::pg_options(None).map_err(OpsError::Usage)?;
            let report = crate::store::pg::PgStores::migrate(&location, options)
                .map_err(|error| OpsError::StoreUnavailable(error.to_string()))?;
            Ok(Migrated { schema: report.schema, applied: report.applied, version: report.version })
        }
    }
}
