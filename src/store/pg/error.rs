//! Errors of the PostgreSQL store: setting it up ([`PgError`]: the server
//! cannot be reached, the schema cannot be used, a migration failed) and
//! the database errors of its operations, which become
//! [`StoreError::Database`].

use crate::store::StoreError;

/// Why the PostgreSQL store could not be opened or migrated. Every one is
/// bad input for the command (exit 2) and nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("cannot reach the PostgreSQL store `{location}`: {message}")]
    Unreachable { location: String, message: String },
    #[error("the PostgreSQL store's schema `{schema}` cannot be used: {reason}")]
    Schema { schema: String, reason: String },
    #[error("migration `{name}` failed, nothing was applied: {message}")]
    Migration { name: &'static str, message: String },
    #[error("cannot {action} in the PostgreSQL store: {message}")]
    Database { action: &'static str, message: String },
}

/// The message of a driver error: the server's own message and SQLSTATE,
/// or the error and its causes (a refused connection, a timeout).
pub fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{} (SQLSTATE {})", db.message(), db.code().code());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The message of a pool error (a connection that could not be made, or
/// none free in time).
pub fn describe_pool(error: &deadpool_postgres::PoolError) -> String {
    match error {
        deadpool_postgres::PoolError::Backend(error) => describe(error),
        deadpool_postgres::PoolError::Timeout(_) => "timed out waiting for a connection".to_string(),
        other => other.to_string(),
    }
}

/// Maps a driver error while doing `action` to [`PgError::Database`].
pub fn db_error(action: &'static str) -> impl FnOnce(tokio_postgres::Error) -> PgError {
    move |error| PgError::Database { action, message: describe(&error) }
}

/// Maps a driver error while doing `action` to [`StoreError::Database`].
pub fn store_error(action: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |error| StoreError::Database { action, message: describe(&error) }
}

/// Maps a pool error while doing `action` to [`StoreError::Database`].
pub fn pool_error(action: &'static str) -> impl FnOnce(deadpool_postgres::PoolError) -> StoreError {
    move |error| StoreError::Database { action, message: describe_pool(&error) }
}

impl From<PgError> for StoreError {
    fn from(error: PgError) -> StoreError {
        match error {
            PgError::Database { action, message } => StoreError::Database { action, message },
            other => StoreError::Database { action: "use the store", message: other.to_string() },
        }
    }
}
