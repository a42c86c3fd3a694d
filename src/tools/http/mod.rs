//! The `http` tool: one request an `http` step describes, sent only where
//! the policy's `[http]` allows it (see `crate::policy::evaluate_http`).
//!
//! Order for each hop: parse and normalise the URL → `http.deny` and the
//! rules → resolve the host once ([`Resolve`]) and judge every address
//! (private ones only through a `private = true` rule; `http.deny` on the
//! addresses too) → connect to the judged address → read at most
//! `max_response_bytes` of the body. With `http.proxy` the rules and the
//! checks of IP literals run the same, but the proxy resolves a host name
//! and connects: the connection goes to the proxy (its name resolved once
//! per hop, not judged: the policy named it). A redirect is followed only when the
//! allowing rule says `redirects = N`, and each hop is judged again like
//! the first; the step's own headers (its secrets) are not sent to another
//! origin. The response is untrusted data: `output_text` is the body,
//! `output_json` holds `status`, the headers the step names, the body
//! when it is JSON, and `untrusted_fields`.

mod client;
mod resolve;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::model::{Decision, FailureClass, HttpFacts, HttpPolicy, HttpProxy, ToolFacts};
use crate::policy::{HttpEvaluation, HttpTarget, evaluate_http, restricted_address};
use crate::tools::ToolOutcome;

pub use client::UNAVAILABLE;
#[cfg(feature = "http")]
pub(crate) use client::describe;
pub use resolve::{Resolve, StubResolver, SystemResolver};

use client::{Answer, Client, Hop, SendError};

/// The response fields a step's output marks as untrusted.
const UNTRUSTED_FIELDS: &[&str] = &["body", "headers"];

/// One request as the step describes it, templates rendered.
pub struct HttpCall<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// Header values rendered, secrets included: sent, never recorded.
    pub headers: &'a BTreeMap<String, String>,
    pub body: Option<&'a str>,
    /// The body is the step's `json` (sent as `application/json`).
    pub json_body: bool,
    /// Sent as `Idempotency-Key`.
    pub idempotency_key: Option<&'a str>,
    /// Accepted statuses; empty: any 2xx.
    pub expect_status: &'a [u16],
    pub max_response_bytes: Option<u64>,
    /// Response headers the output names (lower case).
    pub response_headers: &'a [String],
    /// The step's timeout (the policy's `http.timeout_secs` may lower it).
    pub timeout: Duration,
}

/// The client and the resolver of one run.
pub struct HttpTool {
    client: Client,
    resolver: Arc<dyn Resolve>,
}

impl Default for HttpTool {
    fn default() -> Self {
        HttpTool::new(Arc::new(SystemResolver))
    }
}

/// Why a request stopped before an answer was kept.
struct Stop {
    class: FailureClass,
    message: String,
}

impl HttpTool {
    pub fn new(resolver: Arc<dyn Resolve>) -> Self {
        HttpTool { client: Client::default(), resolver }
    }

    /// Sends `call` if `policy` allows it (and every redirect hop).
    pub fn call(&mut self, policy: &HttpPolicy, call: &HttpCall<'_>) -> ToolOutcome {
        let mut facts = HttpFacts {
            method: call.method.to_string(),
            url: call.url.to_string(),
            decision: Decision::Forbidden,
            rule: None,
            refused: None,
            address: None,
            proxy: policy.proxy.as_ref().map(HttpProxy::url),
            status: None,
            redirects: 0,
            response_bytes: None,
            truncated: false,
        };
        match self.exchange(policy, call, &mut facts) {
            Ok(answer) => outcome(answer, call, facts),
            Err(stop) => {
                if stop.class == FailureClass::SecurityDenied {
                    facts.decision = Decision::Forbidden;
                    facts.refused = Some(stop.message.clone());
                }
                ToolOutcome::failure(stop.class, stop.message, ToolFacts::Http(facts))
            }
        }
    }

    fn exchange(&mut self, policy: &HttpPolicy, call: &HttpCall<'_>, facts: &mut HttpFacts) -> Result<Answer, Stop> {
        let denied = |message: String| Stop { class: FailureClass::SecurityDenied, message };
        let mut target = HttpTarget::parse(call.url).map_err(|reason| denied(format!("refused: {reason}")))?;
        facts.url = target.url();
        let first = evaluate_http(policy, call.method, &target);
        facts.rule = Some(first.rule.clone());
        if !first.is_allowed() {
            return Err(denied(format!("{} {}: {}", call.method, target.url(), first.reason)));
        }
        facts.decision = Decision::Allow;
        let max_bytes = call.max_response_bytes.unwrap_or(policy.max_response_bytes).min(policy.max_response_bytes);
        let timeout = call.timeout.min(Duration::from_secs(policy.timeout_secs));
        let deadline = Instant::now() + timeout;
        let mut method = call.method.to_string();
        let mut body = call.body.map(str::as_bytes);
        let mut step_headers: Vec<(String, String)> =
            call.headers.iter().map(|(name, value)| (name.clone(), value.clone())).collect();
        if call.json_body && !call.headers.keys().any(|name| name.eq_ignore_ascii_case("content-type")) {
            step_headers.push(("content-type".to_string(), "application/json".to_string()));
        }
        let key_header = call.idempotency_key.map(|key| ("idempotency-key".to_string(), key.to_string()));
        let mut hop_rule = first;
        loop {
            let (host, address) = match &policy.proxy {
                Some(proxy) => (proxy.host.as_str(), self.proxy_address(proxy)?),
                None => (target.host.as_str(), self.address(policy, &target, &hop_rule)?),
            };
            facts.address = Some(address.to_string());
            let headers: Vec<(String, String)> = step_headers.iter().cloned().chain(key_header.clone()).collect();
            let url = target.url();
            let proxy_url = policy.proxy.as_ref().map(HttpProxy::url);
            let hop = Hop {
                method: &method,
                url: &url,
                proxy: proxy_url.as_deref(),
                tls: target.scheme == "https",
                host,
                address,
                headers: &headers,
                body,
                timeout: deadline.saturating_duration_since(Instant::now()),
                max_bytes,
            };
            let answer = self.client.send(&hop).map_err(|error| Stop {
                class: FailureClass::ExecutionError,
                message: match error {
                    SendError::Timeout => format!("{method} {url} timed out after {}s", timeout.as_secs()),
                    SendError::Failed(reason) => format!("{method} {url} failed: {reason}"),
                    SendError::Unavailable => UNAVAILABLE.to_string(),
                },
            })?;
            let location = location(&answer).filter(|_| facts.redirects < hop_rule.redirects);
            let Some(location) = location else {
                return Ok(answer);
            };
            let next = url::Url::parse(&url)
                .and_then(|base| base.join(&location))
                .map_err(|error| denied(format!("redirect to `{location}` refused: {error}")))?;
            let next = HttpTarget::parse(next.as_str())
                .map_err(|reason| denied(format!("redirect to `{location}` refused: {reason}")))?;
            if answer.status == 303 || (matches!(answer.status, 301 | 302) && method == "POST") {
                method = "GET".to_string();
                body = None;
            }
            let verdict = evaluate_http(policy, &method, &next);
            if !verdict.is_allowed() {
                facts.rule = Some(verdict.rule.clone());
                return Err(denied(format!("redirect to {} refused: {}", next.url(), verdict.reason)));
            }
            // The step's headers (and its secrets) stay with their origin.
            if (&next.scheme, &next.host, next.port) != (&target.scheme, &target.host, target.port) {
                step_headers.clear();
            }
            facts.redirects += 1;
            target = next;
            hop_rule = HttpEvaluation { redirects: hop_rule.redirects, ..verdict };
        }
    }

    /// The proxy's address: its IP literal, or its name resolved once (the
    /// first answer; not judged: the policy named the proxy). The target's
    /// name is the proxy's to resolve, and its IP literal was judged with
    /// the rules ([`evaluate_http`]).
    fn proxy_address(&self, proxy: &HttpProxy) -> Result<SocketAddr, Stop> {
        let ip = match proxy.ip {
            Some(ip) => ip,
            None => self
                .resolver
                .lookup(&proxy.host, proxy.port)
                .map_err(|message| Stop { class: FailureClass::ExecutionError, message: format!("proxy: {message}") })?
                .first()
                .copied()
                .map(canonical)
                .ok_or_else(|| Stop {
                    class: FailureClass::ExecutionError,
                    message: format!("cannot resolve the proxy `{}`: no address", proxy.host),
                })?,
        };
        Ok(SocketAddr::new(ip, proxy.port))
    }

    /// The address to connect to: the IP literal, or the host resolved once
    /// with every answer judged.
    fn address(&self, policy: &HttpPolicy, target: &HttpTarget, rule: &HttpEvaluation) -> Result<SocketAddr, Stop> {
        let answers = match target.ip {
            Some(ip) => vec![ip],
            None => self
                .resolver
                .lookup(&target.host, target.port)
                .map_err(|message| Stop { class: FailureClass::ExecutionError, message })?,
        };
        for ip in &answers {
            let ip = canonical(*ip);
            let denied = |why: String| Stop {
                class: FailureClass::SecurityDenied,
                message: format!("{} resolves to {ip}, {why}", target.host),
            };
            if let Some(pattern) = policy.deny.iter().find(|pattern| pattern.matches(&ip.to_string())) {
                return Err(denied(format!("which `http.deny` lists (`{}`)", String::from(pattern.clone()))));
            }
            if let (false, Some(kind)) = (rule.private, restricted_address(ip)) {
                return Err(denied(format!("{kind}; rule `{}` does not say `private = true`", rule.rule)));
            }
        }
        let ip = answers.first().copied().map(canonical).ok_or_else(|| Stop {
            class: FailureClass::ExecutionError,
            message: format!("cannot resolve `{}`: no address", target.host),
        })?;
        Ok(SocketAddr::new(ip, target.port))
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// Where a redirect points, for a redirect status with a `Location`.
fn location(answer: &Answer) -> Option<String> {
    if !matches!(answer.status, 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    answer.headers.iter().find(|(name, _)| name == "location").map(|(_, value)| value.clone())
}

/// The step's output, or a failure when the status is not accepted.
fn outcome(answer: Answer, call: &HttpCall<'_>, mut facts: HttpFacts) -> ToolOutcome {
    facts.status = Some(answer.status);
    facts.response_bytes = Some(answer.body.len() as u64);
    facts.truncated = answer.truncated;
    let text = String::from_utf8_lossy(&answer.body).into_owned();
    let mut output = Map::new();
    output.insert("status".to_string(), json!(answer.status));
    let mut named = Map::new();
    for wanted in call.response_headers {
        let values: Vec<&str> =
            answer.headers.iter().filter(|(name, _)| name == wanted).map(|(_, value)| value.as_str()).collect();
        if !values.is_empty() {
            named.insert(wanted.clone(), Value::String(values.join(", ")));
        }
    }
    output.insert("headers".to_string(), Value::Object(named));
    if !answer.truncated
        && let Ok(body) = crate::strict_json::parse(&text)
    {
        output.insert("body".to_string(), body);
    }
    output.insert("untrusted_fields".to_string(), json!(UNTRUSTED_FIELDS));
    let accepted = if call.expect_status.is_empty() {
        (200..300).contains(&answer.status)
    } else {
        call.expect_status.contains(&answer.status)
    };
    if accepted {
        return ToolOutcome::success(text, Some(Value::Object(output)), ToolFacts::Http(facts));
    }
    let expected = if call.expect_status.is_empty() {
        "a 2xx status".to_string()
    } else {
        call.expect_status.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    };
    let redirect = location(&answer).map(|_| " (a redirect: the rule's `redirects` allows no more hops)").unwrap_or("");
    // A server error or "too many requests" may pass; anything else is the answer.
    let class = if answer.status >= 500 || matches!(answer.status, 408 | 429) {
        FailureClass::ExecutionError
    } else {
        FailureClass::VerificationFailed
    };
    let mut outcome = ToolOutcome::failure(
        class,
        format!("{} {} answered {}{redirect}; expected {expected}", call.method, facts.url, answer.status),
        ToolFacts::Http(facts),
    );
    if let Err(failure) = &mut outcome.result {
        failure.output_text = text;
    }
    outcome
}
