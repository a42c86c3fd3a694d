//! What a backend is to the rest of the store: a [`Backend`] turns its
//! `--store` value into the store factory the runtime uses, given the
//! [`StoreOptions`] of the process; [`OpenError`] and [`LocationError`]
//! say why it could not. `open.rs` picks the backend.

use std::time::Duration;

use crate::store::StoreFactory;

/// Told of each failed attempt to reach a store that is not up yet: the
/// reason and the delay before the next attempt.
pub type OnWait<'a> = &'a dyn Fn(&str, Duration);

/// How this process uses its store, whichever it is.
#[derive(Clone, Copy)]
pub struct StoreOptions<'a> {
    /// A worker's `--node-id`: a shared store prefixes the owner id of the
    /// leases this process takes with it, so that an operator sees which
    /// machine holds a run.
    pub node_id: Option<&'a str>,
    /// For a process that runs until it is stopped (`worker`, `serve`): a
    /// store that does not answer yet (refused, timed out, starting up) is
    /// waited for, and this hears each failed attempt. `None`: every
    /// refusal is immediate.
    pub on_wait: Option<OnWait<'a>>,
    /// The process environment, as the runtime reads it
    /// (`runtime::process_var`): a backend reads its settings through it.
    pub var: &'a dyn Fn(&str) -> Option<String>,
}

/// What `store migrate` did to a store's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The schema the tables are in.
    pub schema: String,
    /// Versions applied now (empty: it was up to date).
    pub applied: Vec<i64>,
    /// The schema's version afterwards.
    pub version: i64,
}

/// Why a store could not be opened (or migrated).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The location is unknown or malformed.
    #[error(transparent)]
    Location(#[from] LocationError),
    /// A setting of the backend (an environment variable) is invalid.
    #[error("{0}")]
    Setting(String),
    /// The store could not be reached or used.
    #[error("{0}")]
    Unavailable(String),
    /// The store has no schema to migrate (the file store).
    #[error("this store has no schema")]
    NoSchema,
}

/// Why a store location was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    #[error("unknown store `{0}`: use `file` or `postgres://user@host:port/database`")]
    Unknown(String),
    #[error("malformed PostgreSQL store URL `{url}`: {reason}")]
    Malformed { url: String, reason: String },
    #[error(
        "this planrun was built without PostgreSQL support: `{0}` cannot be used (build it with `--features postgres`, e.g. `cargo install --path . --features postgres`)"
    )]
    NoPostgres(String),
}

/// A kind of store: how a `--store` value of its scheme becomes the store
/// factory the runtime uses. Each backend parses its own location.
pub(crate) trait Backend: Sync {
    /// Opens the store at `location` (the whole `--store` value): refuses
    /// a malformed location, an unreachable store and one this planrun
    /// cannot use, before anything is written.
    fn open(&self, location: &str, options: StoreOptions<'_>) -> Result<Box<dyn StoreFactory>, OpenError>;

    /// Creates or updates the store's schema. The default: there is none.
    fn migrate(&self, location: &str, options: StoreOptions<'_>) -> Result<Migration, OpenError> {
        let _ = (location, options);
        Err(OpenError::NoSchema)
    }
}

/// Hides the password of a URL, for messages.
pub(crate) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (authority, tail) = rest.find(['/', '?']).map_or((rest, ""), |at| rest.split_at(at));
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}
