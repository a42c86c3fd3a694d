//! `planrun store migrate --store URL`: creates or updates the schema of a
//! database store (see `migrations/`). Idempotent: a second run applies
//! nothing.

use crate::ops::OpsError;
use crate::store::{self, Migration, OpenError, StoreOptions};

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
    let options = StoreOptions { node_id: None, on_wait: None, var: &crate::runtime::process_var };
    match store::migrate(location, options) {
        Ok(Migration { schema, applied, version }) => Ok(Migrated { schema, applied, version }),
        Err(OpenError::NoSchema) => Err(OpsError::Usage(
            "`store migrate` needs a database store (`--store postgres://user@host:port/database` or \
             `PLANRUN_STORE`): the file store has no schema"
                .to_string(),
        )),
        Err(OpenError::Setting(message)) => Err(OpsError::Usage(message)),
        Err(error @ (OpenError::Location(_) | OpenError::Unavailable(_))) => {
            Err(OpsError::StoreUnavailable(error.to_string()))
        }
    }
}
