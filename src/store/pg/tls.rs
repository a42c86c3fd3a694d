//! TLS for the PostgreSQL store: the connector a location's `sslmode` and
//! `sslrootcert` ask for ([`Connector::for_location`]), on rustls with the
//! `ring` provider the rest of planrun uses (`tokio-postgres-rustls`).
//!
//! libpq's semantics, as `docs/scale-out.md` lists them:
//! - `disable`: plain TCP;
//! - `prefer` (the default): TLS when the server offers it, its
//!   certificate not checked, else plain;
//! - `require`: TLS or nothing; the certificate is checked against
//!   `sslrootcert` when one is named (libpq does the same when a root file
//!   exists), else not;
//! - `verify-ca`: TLS, the certificate chain checked against `sslrootcert`;
//! - `verify-full`: as `verify-ca`, and the certificate must name the host
//!   connected to.
//!
//! The handshake's signatures are always checked, whatever the mode: an
//! unchecked certificate still proves the peer holds its key.

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::store::pg::error::PgError;
use crate::store::pg::location::{PgLocation, TlsMode, TlsOptions};

/// How the store's sessions are made: plain, or through rustls.
#[derive(Clone)]
pub enum Connector {
    Plain,
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

impl Connector {
    /// The connector for `location`; reads its `sslrootcert` file. A Unix
    /// socket never uses TLS (PostgreSQL does not offer it there).
    pub fn for_location(location: &PgLocation) -> Result<Connector, PgError> {
        let only_sockets = location.config.get_hosts().iter().all(is_socket);
        if location.tls.mode == TlsMode::Disable || only_sockets {
            return Ok(Connector::Plain);
        }
        let config = client_config(&location.tls)
            .map_err(|message| PgError::Tls { location: location.display.clone(), message })?;
        Ok(Connector::Rustls(tokio_postgres_rustls::MakeRustlsConnect::new(config)))
    }
}

#[cfg(unix)]
fn is_socket(host: &tokio_postgres::config::Host) -> bool {
    matches!(host, tokio_postgres::config::Host::Unix(_))
}

#[cfg(not(unix))]
fn is_socket(_: &tokio_postgres::config::Host) -> bool {
    false
}

/// The rustls configuration of `options` (never `Disable`).
fn client_config(options: &TlsOptions) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?;
    let roots = options.root_cert.as_deref().map(read_roots).transpose()?;
    let verifier: Arc<dyn ServerCertVerifier> = match (options.mode, roots) {
        (TlsMode::Disable | TlsMode::Prefer, _) | (TlsMode::Require, None) => {
            Arc::new(Lenient { provider, chain: None })
        }
        (TlsMode::Require | TlsMode::VerifyCa, Some(roots)) => {
            let chain = Some(web_pki(roots, Arc::clone(&provider))?);
            Arc::new(Lenient { provider, chain })
        }
        (TlsMode::VerifyFull, Some(roots)) => web_pki(roots, provider)?,
        (TlsMode::VerifyCa | TlsMode::VerifyFull, None) => {
            return Err("a certificate authority (`sslrootcert=PATH`) is needed to check the server".to_string());
        }
    };
    Ok(builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth())
}

fn web_pki(roots: RootCertStore, provider: Arc<CryptoProvider>) -> Result<Arc<WebPkiServerVerifier>, String> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().map_err(|error| error.to_string())
}

/// The certificates of the PEM file at `path`: at least one.
fn read_roots(path: &Path) -> Result<RootCertStore, String> {
    let shown = path.display();
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|error| format!("cannot read the certificate authority `sslrootcert={shown}`: {error}"))?;
    if certificates.is_empty() {
        return Err(format!("`sslrootcert={shown}` holds no PEM certificate"));
    }
    let mut roots = RootCertStore::empty();
    for certificate in certificates {
        roots.add(certificate).map_err(|error| format!("`sslrootcert={shown}`: {error}"))?;
    }
    Ok(roots)
}

/// The certificate check of `prefer`, `require` without a CA (none) and
/// `verify-ca` (`chain`: webpki checks the chain, its validity and usage;
/// only a certificate that names another host is accepted). The
/// handshake's signatures are checked either way.
#[derive(Debug)]
struct Lenient {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
