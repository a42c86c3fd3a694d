//! A PostgreSQL store's `--store` value:
//! `postgres://user[:password]@host[:port]/database[?option=value&…]` (or
//! `postgresql://`), with the usual libpq-style options (`sslmode`,
//! `sslrootcert`, `connect_timeout`, `application_name`, `options`, …).
//! `sslmode` and `sslrootcert` are taken out of the URL here
//! ([`TlsOptions`]; the driver knows neither `verify-ca` nor `verify-full`
//! nor a CA file), the rest is the driver's.
//!
//! Parsing touches nothing (the CA file is read when the store connects):
//! a malformed location is refused before any command reads or writes a
//! run.

use crate::store::LocationError;
use crate::store::backend::without_password;

/// A PostgreSQL location: the driver's configuration and a display form
/// without the password (for messages and `run_state_location`).
#[derive(Debug, Clone)]
pub struct PgLocation {
    pub config: tokio_postgres::Config,
    pub display: String,
    pub tls: TlsOptions,
}

/// libpq's `sslmode`: whether the session is encrypted and what of the
/// server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it (certificate unchecked), else plain:
    /// libpq's default, and the default here.
    Prefer,
    /// TLS or nothing; the certificate is checked against `sslrootcert`
    /// when one is named (as libpq does with a root file), else not.
    Require,
    /// TLS, the certificate chain checked against `sslrootcert`.
    VerifyCa,
    /// As `VerifyCa`, and the certificate must name the host connected to.
    VerifyFull,
}

impl TlsMode {
    fn parse(text: &str) -> Option<TlsMode> {
        Some(match text {
            "disable" => TlsMode::Disable,
            "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            _ => return None,
        })
    }

    /// What the driver is told: it only knows whether TLS is off, tried or
    /// required (the checks are the connector's).
    fn driver_mode(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode;
        match self {
            TlsMode::Disable => SslMode::Disable,
            TlsMode::Prefer => SslMode::Prefer,
            TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
        }
    }
}

/// The TLS part of a PostgreSQL URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    pub mode: TlsMode,
    /// `sslrootcert=PATH`: the PEM file of the certificate authorities the
    /// server's certificate must chain to.
    pub root_cert: Option<std::path::PathBuf>,
}

/// What the driver could not read in `url` (the driver only says "invalid
/// connection string"): the address part, or the first option of the query
/// it refuses on its own.
fn culprit(url: &str, error: &tokio_postgres::Error) -> String {
    let reads = |text: &str| text.parse::<tokio_postgres::Config>().is_ok();
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    if !reads(base) {
        return format!("{error}: the address `user@host:port/database` cannot be read (a port is 1 to 65535)");
    }
    match query.split('&').find(|pair| !reads(&format!("{base}?{pair}"))) {
        Some(pair) if pair.starts_with("password=") => format!("{error}: option `password` is not valid"),
        Some(pair) => format!("{error}: option `{pair}` is unknown or its value is not valid"),
        None => error.to_string(),
    }
}

/// Takes `sslmode` and `sslrootcert` out of the query of `url` (the last
/// one wins, as in libpq); returns the URL without them and their values,
/// percent-decoded.
fn split_tls_options(url: &str) -> Result<(String, Option<String>, Option<String>), String> {
    let Some((base, query)) = url.split_once('?') else { return Ok((url.to_string(), None, None)) };
    let (mut mode, mut root_cert, mut kept) = (None, None, Vec::new());
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decoded = || {
            percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map(|text| text.into_owned())
                .map_err(|_| format!("the value of `{key}` is not UTF-8"))
        };
        match key {
            "sslmode" => mode = Some(decoded()?),
            "sslrootcert" => root_cert = Some(decoded()?),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
    Ok((rest, mode, root_cert))
}

fn tls_options(mode: Option<String>, root_cert: Option<String>) -> Result<TlsOptions, String> {
    let mode = match mode {
        None => TlsMode::Prefer,
        Some(text) => TlsMode::parse(&text).ok_or_else(|| {
            format!("`sslmode={text}` is not one of `disable`, `prefer`, `require`, `verify-ca`, `verify-full`")
        })?,
    };
    let root_cert = match root_cert.as_deref() {
        None | Some("") => None,
        Some("system") => {
            return Err("`sslrootcert=system` (the system's certificate store) is not supported: \
                        name the PEM file of the certificate authority"
                .to_string());
        }
        Some(path) => Some(std::path::PathBuf::from(path)),
    };
    if matches!(mode, TlsMode::VerifyCa | TlsMode::VerifyFull) && root_cert.is_none() {
        return Err(format!(
            "`sslmode={}` checks the server's certificate against a certificate authority: \
             name its PEM file with `sslrootcert=PATH`",
            if mode == TlsMode::VerifyCa { "verify-ca" } else { "verify-full" }
        ));
    }
    if mode == TlsMode::Disable && root_cert.is_some() {
        return Err("`sslrootcert` is given but `sslmode=disable` never uses TLS".to_string());
    }
    Ok(TlsOptions { mode, root_cert })
}

impl PgLocation {
    /// Parses a `postgres://` (or `postgresql://`) URL.
    pub fn parse(text: &str) -> Result<PgLocation, LocationError> {
        let display = without_password(text);
        let malformed = |reason: String| LocationError::Malformed { url: display.clone(), reason };
        let (rest, mode, root_cert) = split_tls_options(text).map_err(malformed)?;
        let tls = tls_options(mode, root_cert).map_err(malformed)?;
        let mut config: tokio_postgres::Config =
            rest.parse().map_err(|error: tokio_postgres::Error| malformed(culprit(&rest, &error)))?;
        config.ssl_mode(tls.mode.driver_mode());
        if config.get_hosts().is_empty() {
            return Err(malformed("it names no host (`postgres://user@host:port/database`)".to_string()));
        }
        if config.get_user().is_none() {
            return Err(malformed("it names no user (`postgres://user@host:port/database`)".to_string()));
        }
        Ok(PgLocation { config, display, tls })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_urls_parse_and_bad_ones_are_refused_with_the_password_hidden() {
        let location =
            PgLocation::parse("postgres://planrun:secret@db.example:5433/runs?sslmode=disable").expect("a URL");
        assert_eq!(location.display, "postgres://planrun:***@db.example:5433/runs?sslmode=disable");
        assert_eq!(location.config.get_ports(), [5433]);
        assert_eq!(location.tls, TlsOptions { mode: TlsMode::Disable, root_cert: None });
        for bad in [
            "postgres://u@h/db?sslmode=verify-full",
            "postgres://u@h/db?sslmode=verify-ca&application_name=x",
            "postgres://u@h/db?sslmode=allow",
            "postgres://u@h/db?sslmode=disable&sslrootcert=/ca.pem",
            "postgres://u@h/db?sslmode=require&sslrootcert=system",
            "postgres://u@h/db?sslcert=/client.pem",
            "postgres://u@h/db?no_such_option=1",
            "postgres://u@h:notaport/db",
            "postgres:///db",
            "postgres://h/db",
        ] {
            let refused = PgLocation::parse(bad);
            assert!(matches!(refused, Err(LocationError::Malformed { .. })), "{bad}: {refused:?}");
        }
        // The driver says only "invalid connection string": the message
        // names what it could not read.
        for (bad, named) in [
            ("postgres://u@h/db?application_name=a&foo=bar", "option `foo=bar` is unknown"),
            ("postgres://u@h/db?connect_timeout=abc", "option `connect_timeout=abc`"),
            ("postgres://u@h:99999/db", "the address `user@host:port/database` cannot be read"),
        ] {
            let message = PgLocation::parse(bad).expect_err(bad).to_string();
            assert!(message.contains(named), "{bad}: {message}");
        }
    }

    #[test]
    fn tls_modes_and_the_ca_file_are_taken_out_of_the_url() {
        let tls = |url: &str| match PgLocation::parse(url) {
            Ok(location) => (location.tls, location.config),
            other => panic!("{url}: {other:?}"),
        };
        let (default, config) = tls("postgres://u@h/db");
        assert_eq!(default, TlsOptions { mode: TlsMode::Prefer, root_cert: None }, "libpq's default");
        assert_eq!(config.get_ssl_mode(), tokio_postgres::config::SslMode::Prefer);
        let (full, config) =
            tls("postgres://u@h/db?application_name=w&sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20one.pem");
        assert_eq!(
            full,
            TlsOptions { mode: TlsMode::VerifyFull, root_cert: Some("/etc/ca one.pem".into()) },
            "percent-decoded"
        );
        assert_eq!(config.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
        assert_eq!(config.get_application_name(), Some("w"), "the other options stay the driver's");
        let (require, _) = tls("postgres://u@h/db?sslmode=prefer&sslmode=require");
        assert_eq!(require.mode, TlsMode::Require, "the last one wins");
        let (ca, _) = tls("postgres://u@h/db?sslmode=verify-ca&sslrootcert=ca.pem");
        assert_eq!(ca, TlsOptions { mode: TlsMode::VerifyCa, root_cert: Some("ca.pem".into()) });
        let Err(LocationError::Malformed { reason, .. }) = PgLocation::parse("postgres://u@h/db?sslmode=verify-ca")
        else {
            panic!("refused")
        };
        assert!(reason.contains("sslrootcert=PATH"), "{reason}");
    }
}
