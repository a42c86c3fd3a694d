//! The egress policy (`[http]`) and the facts an `http` step records.

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::model::Decision;

/// The largest response body a step keeps when neither the policy nor the
/// step says less.
pub const DEFAULT_HTTP_MAX_RESPONSE_BYTES: u64 = 1024 * 1024;
/// The longest an HTTP request may take when the policy says nothing.
pub const DEFAULT_HTTP_TIMEOUT_SECS: u64 = 30;
/// The most redirect hops a rule may allow (`redirects`).
pub const MAX_HTTP_REDIRECTS: u32 = 5;

/// The methods an `http` step may send.
pub const HTTP_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

/// `[http]` of a policy: which requests `http` steps may send.
#[derive(Debug, Clone, Serialize)]
pub struct HttpPolicy {
    /// `[[http.allow]]` rules in file order; the first that matches allows.
    pub allow: Vec<HttpRule>,
    /// Host patterns never reached, whatever a rule says (`http.deny`).
    pub deny: Vec<HostPattern>,
    pub max_response_bytes: u64,
    pub timeout_secs: u64,
    /// `http.proxy`: the HTTP proxy every request goes through; `None`:
    /// straight to the checked address (proxies from the environment are
    /// never used).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<HttpProxy>,
}

/// `http.proxy`: a plain-HTTP proxy (`http://host:port`), named by the
/// policy. Requests to `http` URLs go to it in absolute form, requests to
/// `https` URLs through a `CONNECT` tunnel (TLS stays end to end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct HttpProxy {
    /// Lower case; an IP literal in canonical form (IPv6 without brackets).
    pub host: String,
    /// The address when the host is an IP literal.
    pub ip: Option<std::net::IpAddr>,
    pub port: u16,
}

impl HttpProxy {
    /// `http://host:port`.
    pub fn url(&self) -> String {
        match self.ip {
            Some(std::net::IpAddr::V6(_)) => format!("http://[{}]:{}", self.host, self.port),
            _ => format!("http://{}:{}", self.host, self.port),
        }
    }
}

impl From<HttpProxy> for String {
    fn from(proxy: HttpProxy) -> String {
        proxy.url()
    }
}

impl Default for HttpPolicy {
    fn default() -> Self {
        HttpPolicy {
            allow: Vec::new(),
            deny: Vec::new(),
            max_response_bytes: DEFAULT_HTTP_MAX_RESPONSE_BYTES,
            timeout_secs: DEFAULT_HTTP_TIMEOUT_SECS,
            proxy: None,
        }
    }
}

impl HttpPolicy {
    /// Whether this is the policy of a file without `[http]`.
    pub fn is_default(&self) -> bool {
        self.allow.is_empty()
            && self.deny.is_empty()
            && self.max_response_bytes == DEFAULT_HTTP_MAX_RESPONSE_BYTES
            && self.timeout_secs == DEFAULT_HTTP_TIMEOUT_SECS
            && self.proxy.is_none()
    }
}

/// One `[[http.allow]]` rule.
#[derive(Debug, Clone, Serialize)]
pub struct HttpRule {
    /// The rule's `id`, or `http.allow[<index>]`.
    pub name: String,
    /// Upper-case methods (`GET`, `POST`, …).
    pub methods: Vec<String>,
    /// `https` or `http`.
    pub scheme: String,
    pub host: HostPattern,
    /// The port; `None`: the scheme's default port only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// A path prefix the request's path must start with (`/` for any).
    pub path: String,
    /// A regex the whole path must match, when given.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "serialize_regex")]
    pub path_matches: Option<Regex>,
    /// Whether loopback, private, link-local and metadata addresses may be
    /// reached through this rule.
    pub private: bool,
    /// How many redirect hops may be followed (each checked again); 0 = none.
    pub redirects: u32,
    pub reason: Option<String>,
    /// Where the rule was written (`policies/api.toml:12`).
    #[serde(skip)]
    pub origin: Option<String>,
}

fn serialize_regex<S: serde::Serializer>(regex: &Option<Regex>, serializer: S) -> Result<S::Ok, S::Error> {
    match regex {
        Some(regex) => serializer.serialize_str(regex.as_str()),
        None => serializer.serialize_none(),
    }
}

/// A host as a rule or `http.deny` names it: exact, or `*.suffix` (any
/// name below `suffix`, never `suffix` itself). Lower case, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub enum HostPattern {
    Exact(String),
    Suffix(String),
}

impl From<HostPattern> for String {
    fn from(pattern: HostPattern) -> String {
        match pattern {
            HostPattern::Exact(host) => host,
            HostPattern::Suffix(suffix) => format!("*.{suffix}"),
        }
    }
}

impl HostPattern {
    /// Whether `host` (normalised: lower case, IP literals in canonical
    /// form) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(exact) => host == exact,
            HostPattern::Suffix(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
        }
    }
}

/// What an `http` attempt established: the request, the policy's verdict,
/// the address it went to and how the server answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpFacts {
    pub method: String,
    /// The URL of the first request (templated parts rendered).
    pub url: String,
    pub decision: Decision,
    /// The rule that allowed the request (or the `http.deny` entry that
    /// refused it); `None` when no rule matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Why it was refused, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The address connected to (`127.0.0.1:8080`) for the last hop: the
    /// proxy's when the request went through `http.proxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The proxy the request went through (`http.proxy`), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Redirect hops followed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redirects: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
    /// The body was longer than `max_response_bytes` and was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}
