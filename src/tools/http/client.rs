//! The one HTTP client of `http` steps: reqwest (rustls on `ring`) on a
//! current-thread tokio runtime the tool owns, so the synchronous engine
//! calls it with `block_on` (a run executes on a plain or blocking thread,
//! never inside an async task). One client per (host, checked address):
//! the client is told to connect to the address the policy judged
//! (`resolve`), never to resolve the name itself, follows no redirect
//! (the tool judges each hop) and ignores proxies from the environment.
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
    /// The URL's host as written (a name or an IP literal).
    pub host: &'a str,
    /// Where to connect: the address the policy judged.
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
    use std::collections::HashMap;
    use std::net::SocketAddr;

    use super::{Answer, Hop, SendError};

    /// The runtime and the clients, made on first use and kept for the run.
    #[derive(Default)]
    pub struct Client {
        runtime: Option<tokio::runtime::Runtime>,
        clients: HashMap<(String, SocketAddr), reqwest::Client>,
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
            let key = (hop.host.to_string(), hop.address);
            if !self.clients.contains_key(&key) {
                let client = build(hop)?;
                self.clients.insert(key.clone(), client);
            }
            let (Some(runtime), Some(client)) = (&self.runtime, self.clients.get(&key)) else {
                return Err(SendError::Failed("the HTTP client is missing".to_string()));
            };
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
        if hop.host.parse::<std::net::IpAddr>().is_err() {
            builder = builder.resolve(hop.host, hop.address);
        }
        builder.build().map_err(|error| SendError::Failed(format!("cannot build the HTTP client: {error}")))
    }

    async fn exchange(client: &reqwest::Client, hop: &Hop<'_>) -> Result<Answer, SendError> {
        let method = reqwest::Method::from_bytes(hop.method.as_bytes())
            .map_err(|_| SendError::Failed(format!("invalid method `{}`", hop.method)))?;
        let mut request = client.request(method, hop.url).timeout(hop.timeout);
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
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
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

/// The message of [`SendError::Unavailable`].
pub const UNAVAILABLE: &str =
    "`http` steps need planrun built with the `http` feature (on by default); this build has no HTTP client";
