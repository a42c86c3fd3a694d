//! The one HTTP client of `http` steps: reqwest (rustls on `ring`) on a
//! current-thread tokio runtime the tool owns, so the synchronous engine
//! calls it with `block_on` (a run executes on a plain or blocking thread,
//! never inside an async task). One client per (host, checked address):
//! the client is told to connect to the address the policy judged
//! (`resolve`), never to resolve the name itself, follows no redirect
//! (the tool judges each hop) and ignores proxies from the environment.
//! With `http.proxy` one client per (proxy, its address) sends every
//! request to the proxy: absolute form for `http` URLs, a `CONNECT`
//! tunnel for `https` ones.
//!
//! Without the `http` feature the client refuses every request with a
//! message naming the feature; plans with `http` steps still load and check.

use std::net::SocketAddr;
use std::time::Duration;

/// One request to one checked address.
#[cfg_attr(not(feature = "http"), expect(dead_code, reason = "a build without the client sends nothing"))]
pub struct Hop<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// `http.proxy`'s URL when the request goes through the proxy.
    pub proxy: Option<&'a str>,
    /// The URL is `https` (the client needs TLS and its trust roots).
    pub tls: bool,
    /// The host the connection is for (a name or an IP literal): the URL's,
    /// or the proxy's with `proxy`.
    pub host: &'a str,
    /// Where to connect: the address the policy judged, or the proxy's.
    pub address: SocketAddr,
    pub headers: &'a [(String, String)],
    pub body: Option<&'a [u8]>,
    pub timeout: Duration,
    pub max_bytes: u64,
}

/// What the server answered.
pub struct Answer {
    pub status: u16,
    /// Names lower case, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was longer than `max_bytes`; the rest was not read.
    pub truncated: bool,
}

/// Why no answer came.
pub enum SendError {
    #[cfg_attr(not(feature = "http"), expect(dead_code, reason = "a build without the client sends nothing"))]
    Timeout,
    #[cfg_attr(not(feature = "http"), expect(dead_code, reason = "a build without the client sends nothing"))]
    Failed(String),
    /// Built without the `http` feature.
    #[cfg_attr(feature = "http", expect(dead_code, reason = "only the build without the client refuses this way"))]
    Unavailable,
}

#[cfg(feature = "http")]
pub use with_reqwest::Client;
#[cfg(feature = "http")]
pub(crate) use with_reqwest::describe;

#[cfg(not(feature = "http"))]
pub use without::Client;

#[cfg(feature = "http")]
mod with_reqwest {
    use std::net::SocketAddr;

    use super::{Answer, Hop, SendError};

    /// The runtime and the clients, made on first use and kept for the run
    /// (a run's steps reuse them, and their connections: nothing is built
    /// per request).
    #[derive(Default)]
    pub struct Client {
        runtime: Option<tokio::runtime::Runtime>,
        /// A few per run: looked up by a scan, without allocating.
        clients: Vec<(Key, reqwest::Client)>,
    }

    /// What a client is made for: through the proxy or not, with TLS or
    /// not, the host and the address it may connect to.
    #[derive(PartialEq, Eq)]
    struct Key {
        proxy: bool,
        tls: bool,
        host: String,
        address: SocketAddr,
    }

    impl Key {
        fn fits(&self, hop: &Hop<'_>) -> bool {
            self.proxy == hop.proxy.is_some()
                && self.tls == hop.tls
                && self.address == hop.address
                && self.host == hop.host
        }
    }

    impl Client {
        pub fn send(&mut self, hop: &Hop<'_>) -> Result<Answer, SendError> {
            if self.runtime.is_none() {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|error| SendError::Failed(format!("cannot start the HTTP client: {error}")))?;
                self.runtime = Some(runtime);
            }
            if !self.clients.iter().any(|(key, _)| key.fits(hop)) {
                let client = build(hop)?;
                let key =
                    Key { proxy: hop.proxy.is_some(), tls: hop.tls, host: hop.host.to_string(), address: hop.address };
                self.clients.push((key, client));
            }
            let found = self.clients.iter().find(|(key, _)| key.fits(hop)).map(|(_, client)| client);
            let (Some(runtime), Some(client)) = (&self.runtime, found) else {
                return Err(SendError::Failed("the HTTP client is missing".to_string()));
            };
            // One timer bounds the whole exchange, body included.
            runtime.block_on(async {
                match tokio::time::timeout(hop.timeout, exchange(client, hop)).await {
                    Ok(answer) => answer,
                    Err(_) => Err(SendError::Timeout),
                }
            })
        }
    }

    fn build(hop: &Hop<'_>) -> Result<reqwest::Client, SendError> {
        // One crypto provider for the tree; a second install is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("planrun/", env!("CARGO_PKG_VERSION")));
        if let Some(proxy) = hop.proxy {
            // `Proxy::all` without `no_proxy`: `NO_PROXY` is not read either.
            let proxy = reqwest::Proxy::all(proxy)
                .map_err(|error| SendError::Failed(format!("invalid proxy `{proxy}`: {error}")))?;
            builder = builder.proxy(proxy);
        }
        if hop.host.parse::<std::net::IpAddr>().is_err() {
            builder = builder.resolve(hop.host, hop.address);
        }
        if !hop.tls {
            // A client for `http://` URLs never speaks TLS: no trust roots
            // (loading the system's reads every file of /etc/ssl/certs), so
            // a TLS handshake through it could only fail.
            let config = rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            builder = builder.tls_backend_preconfigured(config);
        }
        builder.build().map_err(|error| SendError::Failed(format!("cannot build the HTTP client: {error}")))
    }

    async fn exchange(client: &reqwest::Client, hop: &Hop<'_>) -> Result<Answer, SendError> {
        let method = reqwest::Method::from_bytes(hop.method.as_bytes())
            .map_err(|_| SendError::Failed(format!("invalid method `{}`", hop.method)))?;
        let mut request = client.request(method, hop.url);
        for (name, value) in hop.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(body) = hop.body {
            request = request.body(body.to_vec());
        }
        let failed = |error: reqwest::Error| {
            if error.is_timeout() { SendError::Timeout } else { SendError::Failed(describe(&error)) }
        };
        let mut response = request.send().await.map_err(failed)?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str().to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect();
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            let room = usize::try_from(hop.max_bytes).unwrap_or(usize::MAX).saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer { status, headers, body, truncated })
    }

    /// The error and its causes, one line.
    pub(crate) fn describe(error: &reqwest::Error) -> String {
        crate::diag::error_chain(error)
    }
}

#[cfg(not(feature = "http"))]
mod without {
    use super::{Answer, Hop, SendError};

    /// Refuses every request: this build has no HTTP client.
    #[derive(Default)]
    pub struct Client;

    impl Client {
        pub fn send(&mut self, _hop: &Hop<'_>) -> Result<Answer, SendError> {
            Err(SendError::Unavailable)
        }
    }
}

/// The message of `SendError::Unavailable`.
pub const UNAVAILABLE: &str =
    "`http` steps need planrun built with the `http` feature (on by default); this build has no HTTP client";
