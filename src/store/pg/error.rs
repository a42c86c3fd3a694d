//! Errors of the PostgreSQL store: setting it up ([`PgError`]: the server
//! cannot be reached, the schema cannot be used, a migration failed) and
//! the database errors of its operations, which become
//! [`StoreError::Database`], or [`StoreError::Unavailable`] when the server
//! could not be reached or the session was lost ([`is_transient`]).

use crate::store::StoreError;

/// Why the PostgreSQL store could not be opened or migrated. Every one is
/// bad input for the command (exit 2) and nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("cannot reach the PostgreSQL store `{location}`: {message}")]
    Unreachable { location: String, message: String },
    /// As `Unreachable`, but the server may answer later (connection
    /// refused, timed out, starting up, too many clients): a worker or the
    /// service waits and tries again; a one-shot command fails (exit 2).
    #[error("cannot reach the PostgreSQL store `{location}`: {message}")]
    Unavailable { location: String, message: String },
    /// The TLS settings cannot be used (the `sslrootcert` file is missing
    /// or holds no certificate).
    #[error("cannot use TLS for the PostgreSQL store `{location}`: {message}")]
    Tls { location: String, message: String },
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
    crate::diag::error_chain(error)
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

/// SQLSTATEs that say the server may answer a new session: class 08
/// (connection exception), `57P01` (terminated by an administrator:
/// `pg_terminate_backend`, a fast shutdown), `57P02` (crash shutdown),
/// `57P03` (starting up or in recovery), `53300` (too many clients).
fn transient_state(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "53300")
}

/// Whether `error` is a lost or refused connection rather than an answer:
/// the server may be back later. A TLS refusal (a certificate that does
/// not verify, a server without TLS for `require`) is an answer.
pub fn is_transient(error: &tokio_postgres::Error) -> bool {
    if let Some(db) = error.as_db_error() {
        return transient_state(db.code().code());
    }
    if error.is_closed() {
        return true;
    }
    // The driver's kinds are private; their messages are what it exposes.
    let text = error.to_string();
    ["error connecting to server", "error communicating with the server", "timeout waiting for server"]
        .iter()
        .any(|kind| text.starts_with(kind))
}

/// [`is_transient`] for a pool error; no free connection in time is too.
pub fn is_transient_pool(error: &deadpool_postgres::PoolError) -> bool {
    match error {
        deadpool_postgres::PoolError::Backend(error) => is_transient(error),
        deadpool_postgres::PoolError::Timeout(_) => true,
        _ => false,
    }
}

/// Maps a driver error while doing `action` to [`StoreError::Database`]
/// ([`StoreError::Unavailable`] when it is transient).
pub fn store_error(action: &'static str) -> impl FnOnce(tokio_postgres::Error) -> StoreError {
    move |error| database_error(action, describe(&error), is_transient(&error))
}

/// Maps a pool error while doing `action` to [`StoreError::Database`]
/// ([`StoreError::Unavailable`] when it is transient).
pub fn pool_error(action: &'static str) -> impl FnOnce(deadpool_postgres::PoolError) -> StoreError {
    move |error| database_error(action, describe_pool(&error), is_transient_pool(&error))
}

fn database_error(action: &'static str, message: String, transient: bool) -> StoreError {
    if transient { StoreError::Unavailable { action, message } } else { StoreError::Database { action, message } }
}

/// The error of a pool that gave no connection at start-up.
pub fn unreachable(location: &str, error: &deadpool_postgres::PoolError) -> PgError {
    let (location, message) = (location.to_string(), describe_pool(error));
    if is_transient_pool(error) {
        PgError::Unavailable { location, message }
    } else {
        PgError::Unreachable { location, message }
    }
}

impl PgError {
    /// Whether the server may answer later ([`PgError::Unavailable`]).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, PgError::Unavailable { .. })
    }
}

impl From<PgError> for StoreError {
    fn from(error: PgError) -> StoreError {
        match error {
            PgError::Database { action, message } => StoreError::Database { action, message },
            PgError::Unavailable { message, .. } => StoreError::Unavailable { action: "connect", message },
            other => StoreError::Database { action: "use the store", message: other.to_string() },
        }
    }
}
