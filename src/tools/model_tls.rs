//! `https://` model endpoints: one `POST` over TLS, as
//! [`crate::tools::model_call`] makes it over plain HTTP (which stays the
//! path for `http://`, a local server on loopback). The client is the one
//! `http` steps use: reqwest with rustls on `ring`, on a current-thread
//! tokio runtime (a run executes on a plain or blocking thread, never
//! inside an async task). The runtime and one client per set of trusted
//! certificates (the contents of `ca_file`, read at every call, or the
//! system's roots) are made on a thread's first call and kept for its next
//! ones: an agent step calls its model every turn, and building a client
//! reads the trust roots (the system's are every file of /etc/ssl/certs),
//! while a kept client also keeps its connection. The server's certificate must chain
//! to the system's roots, or, with the profile's `ca_file`, to the
//! certificates of that file only. Proxies from the environment are not
//! used and redirects are not followed.
//!
//! Without the `http` feature every call fails with a message naming it.

use std::path::Path;
use std::time::Duration;

/// Why a call gave no answer (`model_call` turns it into its `ModelError`).
#[derive(Debug)]
pub(crate) enum TlsError {
    /// Not connected, the TLS handshake refused (the certificate), the
    /// request failed, or no client in this build.
    Unreachable(String),
    /// The call's own timeout.
    #[cfg_attr(not(feature = "http"), expect(dead_code, reason = "a build without the client sends nothing"))]
    Timeout,
    /// The answer was too large.
    #[cfg_attr(not(feature = "http"), expect(dead_code, reason = "a build without the client sends nothing"))]
    Protocol(String),
}

// The error and its causes, one line (a refused certificate is named in
// the innermost one: `invalid peer certificate: UnknownIssuer`).
#[cfg(feature = "http")]
use crate::tools::http::describe;

/// One call: the endpoint's full URL, the JSON body, the bearer token.
#[cfg_attr(not(feature = "http"), expect(dead_code, reason = "a build without the client sends nothing"))]
pub(crate) struct TlsPost<'a> {
    pub url: &'a str,
    pub body: &'a [u8],
    pub bearer: Option<&'a str>,
    pub timeout: Duration,
    pub ca_file: Option<&'a Path>,
    /// The largest body read.
    pub max_bytes: usize,
}

/// The message of a call in a build without the client.
#[cfg_attr(feature = "http", expect(dead_code, reason = "only the build without the client refuses this way"))]
pub(crate) const UNAVAILABLE: &str = "`https://` model endpoints need planrun built with the `http` feature (on by \
                                      default); this build speaks plain `http://` only";

/// Sends `call`; the status and body of the answer.
#[cfg(not(feature = "http"))]
pub(crate) fn post(_call: &TlsPost<'_>) -> Result<(u16, Vec<u8>), TlsError> {
    Err(TlsError::Unreachable(UNAVAILABLE.to_string()))
}

/// A thread's runtime and its clients, by the certificates of `ca_file`
/// (`None`: the system's roots).
#[cfg(feature = "http")]
struct Kept {
    runtime: tokio::runtime::Runtime,
    clients: Vec<(Option<Vec<u8>>, reqwest::Client)>,
}

#[cfg(feature = "http")]
thread_local! {
    static KEPT: std::cell::RefCell<Option<Kept>> = const { std::cell::RefCell::new(None) };
}

/// Sends `call`; the status and body of the answer.
#[cfg(feature = "http")]
pub(crate) fn post(call: &TlsPost<'_>) -> Result<(u16, Vec<u8>), TlsError> {
    KEPT.with_borrow_mut(|kept| {
        if kept.is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| TlsError::Unreachable(format!("cannot start the HTTPS client: {error}")))?;
            *kept = Some(Kept { runtime, clients: Vec::new() });
        }
        let Some(Kept { runtime, clients }) = kept.as_mut() else {
            return Err(TlsError::Unreachable("the HTTPS client is missing".to_string()));
        };
        let pem = ca_pem(call)?;
        let index = match clients.iter().position(|(kept, _)| *kept == pem) {
            Some(index) => index,
            None => {
                let made = client(call, pem.as_deref())?;
                clients.push((pem, made));
                clients.len() - 1
            }
        };
        let client = &clients[index].1;
        runtime.block_on(async {
            match tokio::time::timeout(call.timeout, exchange(client, call)).await {
                Ok(answer) => answer,
                Err(_) => Err(TlsError::Timeout),
            }
        })
    })
}

#[cfg(feature = "http")]
fn client(call: &TlsPost<'_>, pem: Option<&[u8]>) -> Result<reqwest::Client, TlsError> {
    // One crypto provider for the tree; a second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .https_only(true)
        .user_agent(concat!("planrun/", env!("CARGO_PKG_VERSION")));
    if let (Some(path), Some(pem)) = (call.ca_file, pem) {
        let shown = crate::diag::display_path(path);
        let certificates = reqwest::Certificate::from_pem_bundle(pem)
            .ok()
            .filter(|certificates| !certificates.is_empty())
            .ok_or_else(|| TlsError::Unreachable(format!("`ca_file` `{shown}` holds no PEM certificate")))?;
        builder = builder.tls_certs_only(certificates);
    }
    builder
        .build()
        .map_err(|error| TlsError::Unreachable(format!("cannot build the HTTPS client: {}", describe(&error))))
}

/// The bytes of the profile's `ca_file`, read at every call (a kept client
/// is one for exactly these certificates).
#[cfg(feature = "http")]
fn ca_pem(call: &TlsPost<'_>) -> Result<Option<Vec<u8>>, TlsError> {
    let Some(path) = call.ca_file else { return Ok(None) };
    std::fs::read(path).map(Some).map_err(|error| {
        TlsError::Unreachable(format!("cannot read `ca_file` `{}`: {error}", crate::diag::display_path(path)))
    })
}

#[cfg(feature = "http")]
async fn exchange(client: &reqwest::Client, call: &TlsPost<'_>) -> Result<(u16, Vec<u8>), TlsError> {
    let mut request = client
        .post(call.url)
        .timeout(call.timeout)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(call.body.to_vec());
    if let Some(token) = call.bearer {
        request = request.bearer_auth(token);
    }
    let failed = |error: reqwest::Error| {
        if error.is_timeout() { TlsError::Timeout } else { TlsError::Unreachable(describe(&error)) }
    };
    let mut response = request.send().await.map_err(failed)?;
    let status = response.status().as_u16();
    let mut body = Vec::new();
    while let Some(piece) = response.chunk().await.map_err(failed)? {
        body.extend_from_slice(&piece);
        if body.len() > call.max_bytes {
            return Err(TlsError::Protocol(format!("response larger than {} bytes", call.max_bytes)));
        }
    }
    Ok((status, body))
}
