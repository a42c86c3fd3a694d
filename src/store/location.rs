//! `--store URL` / `PLANRUN_STORE`: where runs are kept.
//!
//! - `file` (the default): the folders under `--workspace` (`runs/`,
//!   `bridge/`, `.planrun/`), as the README documents;
//! - `postgres://user[:password]@host[:port]/database[?option=value&…]`
//!   (or `postgresql://`): the shared PostgreSQL store, with the usual
//!   libpq-style options (`sslmode`, `connect_timeout`, `application_name`,
//!   `options`, …). This build speaks plain TCP or a Unix socket:
//!   `sslmode=disable` and `sslmode=prefer` (which then connects without
//!   TLS) are accepted, `require` is refused up front.
//!
//! Parsing touches nothing: a malformed location is refused before any
//! command reads or writes a run.

/// A parsed store location.
#[derive(Debug, Clone)]
pub enum StoreLocation {
    File,
    #[cfg(feature = "postgres")]
    Postgres(Box<PgLocation>),
}

/// A PostgreSQL location: the driver's configuration and a display form
/// without the password (for messages and `run_state_location`).
#[cfg(feature = "postgres")]
#[derive(Debug, Clone)]
pub struct PgLocation {
    pub config: tokio_postgres::Config,
    pub display: String,
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

/// Hides the password of a URL, for messages.
fn without_password(url: &str) -> String {
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

impl StoreLocation {
    /// Parses `file` or a `postgres://` URL.
    pub fn parse(text: &str) -> Result<StoreLocation, LocationError> {
        let text = text.trim();
        if text == "file" || text.is_empty() {
            return Ok(StoreLocation::File);
        }
        if !(text.starts_with("postgres://") || text.starts_with("postgresql://")) {
            return Err(LocationError::Unknown(without_password(text)));
        }
        Self::parse_postgres(text)
    }

    #[cfg(not(feature = "postgres"))]
    fn parse_postgres(text: &str) -> Result<StoreLocation, LocationError> {
        Err(LocationError::NoPostgres(without_password(text)))
    }

    #[cfg(feature = "postgres")]
    fn parse_postgres(text: &str) -> Result<StoreLocation, LocationError> {
        use tokio_postgres::config::SslMode;
        let display = without_password(text);
        let malformed = |reason: String| LocationError::Malformed { url: display.clone(), reason };
        let config: tokio_postgres::Config =
            text.parse().map_err(|error: tokio_postgres::Error| malformed(error.to_string()))?;
        if config.get_hosts().is_empty() {
            return Err(malformed("it names no host (`postgres://user@host:port/database`)".to_string()));
        }
        if config.get_user().is_none() {
            return Err(malformed("it names no user (`postgres://user@host:port/database`)".to_string()));
        }
        if !matches!(config.get_ssl_mode(), SslMode::Disable | SslMode::Prefer) {
            return Err(malformed(
                "this build connects without TLS: use `sslmode=disable` or `sslmode=prefer` \
                 (or reach the server through a local socket or a tunnel)"
                    .to_string(),
            ));
        }
        Ok(StoreLocation::Postgres(Box::new(PgLocation { config, display })))
    }

    /// Whether this is the file store.
    pub fn is_file(&self) -> bool {
        matches!(self, StoreLocation::File)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_postgres_urls_parse_and_bad_ones_are_refused_with_the_password_hidden() {
        assert!(StoreLocation::parse("file").expect("file").is_file());
        let unknown = StoreLocation::parse("mysql://u:secret@h/db").expect_err("unknown");
        assert_eq!(unknown, LocationError::Unknown("mysql://u:***@h/db".to_string()));
        #[cfg(feature = "postgres")]
        {
            let parsed =
                StoreLocation::parse("postgres://planrun:secret@db.example:5433/runs?sslmode=disable").expect("a URL");
            let StoreLocation::Postgres(location) = parsed else { panic!("postgres") };
            assert_eq!(location.display, "postgres://planrun:***@db.example:5433/runs?sslmode=disable");
            assert_eq!(location.config.get_ports(), [5433]);
            for bad in [
                "postgres://u@h/db?sslmode=require",
                "postgres://u@h/db?no_such_option=1",
                "postgres://u@h:notaport/db",
                "postgres:///db",
                "postgres://h/db",
            ] {
                let refused = StoreLocation::parse(bad);
                assert!(matches!(refused, Err(LocationError::Malformed { .. })), "{bad}: {refused:?}");
            }
        }
    }
}
