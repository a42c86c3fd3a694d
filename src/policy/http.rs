//! Egress decisions for `http` steps: a URL is parsed and normalised once
//! ([`HttpTarget::parse`]: userinfo refused, decimal, octal, hexadecimal and
//! IPv4-mapped IPv6 host forms turned into the one address they name), then
//! judged: `http.deny` wins, then the first `[[http.allow]]` rule that
//! matches method, scheme, host, port and path allows; nothing else does.
//! An address the host resolves to is judged by [`restricted_address`]:
//! loopback, private, link-local and cloud-metadata addresses only through
//! a rule that says `private = true`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::model::{Decision, HttpPolicy, HttpRule};

/// Host names of cloud metadata services, refused like their addresses.
const METADATA_HOSTS: &[&str] = &["metadata.google.internal", "metadata", "instance-data", "metadata.azure.internal"];

/// A URL after parsing and normalisation: what the policy judges and what
/// the client connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    pub scheme: String,
    /// Lower case; an IP literal in its canonical form (IPv6 without
    /// brackets; an IPv4-mapped IPv6 address as the IPv4 address).
    pub host: String,
    /// The address when the host is an IP literal.
    pub ip: Option<IpAddr>,
    /// The port, the scheme's default when the URL names none.
    pub port: u16,
    /// The path, dot segments resolved, percent-encoded as sent.
    pub path: String,
    /// The query without `?`, when there is one.
    pub query: Option<String>,
}

impl HttpTarget {
    /// Parses and normalises `text`; the error says why it cannot be sent.
    pub fn parse(text: &str) -> Result<HttpTarget, String> {
        let url = url::Url::parse(text).map_err(|error| format!("`{text}` is not a valid URL: {error}"))?;
        let scheme = url.scheme().to_string();
        if scheme != "http" && scheme != "https" {
            return Err(format!("scheme `{scheme}` is not `http` or `https`"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("the URL holds a user name or password (userinfo), which is never sent".to_string());
        }
        let (host, ip) = match url.host() {
            Some(url::Host::Domain(name)) => (name.trim_end_matches('.').to_ascii_lowercase(), None),
            Some(url::Host::Ipv4(address)) => (address.to_string(), Some(IpAddr::V4(address))),
            Some(url::Host::Ipv6(address)) => match address.to_ipv4_mapped() {
                Some(v4) => (v4.to_string(), Some(IpAddr::V4(v4))),
                None => (address.to_string(), Some(IpAddr::V6(address))),
            },
            None => return Err("the URL has no host".to_string()),
        };
        if host.is_empty() {
            return Err("the URL has no host".to_string());
        }
        let port = url.port_or_known_default().unwrap_or(if scheme == "https" { 443 } else { 80 });
        Ok(HttpTarget { scheme, host, ip, port, path: url.path().to_string(), query: url.query().map(str::to_string) })
    }

    /// The URL as sent: normalised host, explicit port only when it is not
    /// the scheme's default, no fragment.
    pub fn url(&self) -> String {
        let host = match self.ip {
            Some(IpAddr::V6(_)) => format!("[{}]", self.host),
            _ => self.host.clone(),
        };
        let default_port = if self.scheme == "https" { 443 } else { 80 };
        let port = if self.port == default_port { String::new() } else { format!(":{}", self.port) };
        let query = self.query.as_ref().map(|query| format!("?{query}")).unwrap_or_default();
        format!("{}://{host}{port}{}{query}", self.scheme, self.path)
    }
}

/// The decision on one request, naming the rule that decided and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpEvaluation {
    pub decision: Decision,
    /// The allowing rule's name, `http.deny[<pattern>]`, `http.url`,
    /// `http.metadata`, `http.private` or `http.default-deny`.
    pub rule: String,
    /// Lowercase, no final period.
    pub reason: String,
    /// The URL as it would be sent (normalised), when it parsed.
    pub url: Option<String>,
    /// Whether the allowing rule lets the request reach private addresses.
    #[serde(skip)]
    pub private: bool,
    /// Redirect hops the allowing rule lets the client follow.
    #[serde(skip)]
    pub redirects: u32,
}

impl HttpEvaluation {
    fn forbidden(rule: &str, reason: String, url: Option<String>) -> Self {
        HttpEvaluation {
            decision: Decision::Forbidden,
            rule: rule.to_string(),
            reason,
            url,
            private: false,
            redirects: 0,
        }
    }

    pub fn is_allowed(&self) -> bool {
        self.decision == Decision::Allow
    }
}

/// Judges `method` on the URL `text` (parsed with [`HttpTarget::parse`]).
pub fn evaluate_http_url(policy: &HttpPolicy, method: &str, text: &str) -> HttpEvaluation {
    match HttpTarget::parse(text) {
        Ok(target) => evaluate_http(policy, method, &target),
        Err(reason) => HttpEvaluation::forbidden("http.url", reason, None),
    }
}

/// Judges `method` on `target`: `http.deny` first, then the rules in file
/// order; an IP literal must also pass [`restricted_address`].
pub fn evaluate_http(policy: &HttpPolicy, method: &str, target: &HttpTarget) -> HttpEvaluation {
    let url = Some(target.url());
    if let Some(pattern) = policy.deny.iter().find(|pattern| pattern.matches(&target.host)) {
        let shown = String::from(pattern.clone());
        let reason = format!("host `{}` is denied by `http.deny` (`{shown}`)", target.host);
        return HttpEvaluation::forbidden(&format!("http.deny[{shown}]"), reason, url);
    }
    let Some(rule) = policy.allow.iter().find(|rule| rule_matches(rule, method, target)) else {
        let reason = format!("no `[[http.allow]]` rule allows {method} {}", target.url());
        return HttpEvaluation::forbidden("http.default-deny", reason, url);
    };
    if !rule.private {
        if METADATA_HOSTS.contains(&target.host.as_str()) {
            let reason = format!("`{}` is a cloud metadata service", target.host);
            return HttpEvaluation::forbidden("http.metadata", reason, url);
        }
        if let Some(kind) = target.ip.and_then(restricted_address) {
            let reason = format!("{} is {kind}; rule `{}` does not say `private = true`", target.host, rule.name);
            return HttpEvaluation::forbidden("http.private", reason, url);
        }
    }
    HttpEvaluation {
        decision: Decision::Allow,
        rule: rule.name.clone(),
        reason: rule.reason.clone().unwrap_or_else(|| format!("allowed by rule `{}`", rule.name)),
        url,
        private: rule.private,
        redirects: rule.redirects,
    }
}

/// Whether `rule` accepts `method` on `target` (addresses aside).
pub fn rule_matches(rule: &HttpRule, method: &str, target: &HttpTarget) -> bool {
    let default_port = if rule.scheme == "https" { 443 } else { 80 };
    rule.methods.iter().any(|allowed| allowed.eq_ignore_ascii_case(method))
        && rule.scheme == target.scheme
        && rule.host.matches(&target.host)
        && rule.port.unwrap_or(default_port) == target.port
        && path_prefix(&rule.path, &target.path)
        && rule.path_matches.as_ref().is_none_or(|regex| regex.is_match(&target.path))
}

/// `/v1` accepts `/v1` and `/v1/…`, never `/v1beta`; `/v1/` accepts what
/// starts with it.
fn path_prefix(prefix: &str, path: &str) -> bool {
    if prefix.ends_with('/') {
        return path.starts_with(prefix);
    }
    path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
}

/// What kind of address `ip` is when only a `private = true` rule may
/// reach it; `None` for a public address.
pub fn restricted_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => restricted_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => restricted_v4(v4),
            None => restricted_v6(v6),
        },
    }
}

fn restricted_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        Some("a cloud metadata address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        Some("a link-local address")
    } else if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("a multicast, broadcast or reserved address")
    } else {
        None
    }
}

fn restricted_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_unspecified() {
        Some("an unspecified address")
    } else if segments[0] & 0xfe00 == 0xfc00 {
        Some("a private (unique local) address")
    } else if segments[0] & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || segments[..6] == [0, 0, 0, 0, 0, 0] {
        // NAT64 and IPv4-compatible forms embed an IPv4 address.
        let [.., high, low] = segments;
        let v4 = Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
        restricted_v4(v4)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::HostPattern;

    fn rule(host: HostPattern, private: bool) -> HttpRule {
        HttpRule {
            name: "api".into(),
            methods: vec!["GET".into()],
            scheme: "http".into(),
            host,
            port: Some(8080),
            path: "/v1".into(),
            path_matches: None,
            private,
            redirects: 0,
            reason: None,
            origin: None,
        }
    }

    fn policy(rules: Vec<HttpRule>) -> HttpPolicy {
        HttpPolicy { allow: rules, ..HttpPolicy::default() }
    }

    #[test]
    fn decimal_octal_hex_and_mapped_forms_name_one_address() {
        for form in [
            "http://2130706433:8080/v1",
            "http://0177.0.0.1:8080/v1",
            "http://0x7f.1:8080/v1",
            "http://[::ffff:127.0.0.1]:8080/v1",
            "http://127.1:8080/v1",
        ] {
            let target = HttpTarget::parse(form).expect(form);
            assert_eq!(target.host, "127.0.0.1", "{form}");
            let refused =
                evaluate_http(&policy(vec![rule(HostPattern::Exact("127.0.0.1".into()), false)]), "GET", &target);
            assert_eq!(refused.rule, "http.private", "{form}");
            let allowed =
                evaluate_http(&policy(vec![rule(HostPattern::Exact("127.0.0.1".into()), true)]), "GET", &target);
            assert!(allowed.is_allowed(), "{form}");
        }
    }

    #[test]
    fn userinfo_and_other_schemes_are_refused() {
        assert!(HttpTarget::parse("http://user:pw@example.com/").expect_err("userinfo").contains("userinfo"));
        assert!(HttpTarget::parse("http://user@example.com/").is_err());
        assert!(HttpTarget::parse("file:///etc/passwd").is_err());
        assert!(HttpTarget::parse("gopher://example.com/").is_err());
    }

    #[test]
    fn paths_are_matched_by_segment_after_dot_segments_resolve() {
        let policy = policy(vec![rule(HostPattern::Suffix("example.com".into()), false)]);
        let judge = |url: &str| evaluate_http(&policy, "GET", &HttpTarget::parse(url).expect(url)).rule;
        assert_eq!(judge("http://api.example.com:8080/v1/items"), "api");
        assert_eq!(judge("http://api.example.com:8080/v1"), "api");
        assert_eq!(judge("http://api.example.com:8080/v1beta"), "http.default-deny");
        assert_eq!(judge("http://api.example.com:8080/v1/../admin"), "http.default-deny");
        assert_eq!(judge("http://api.example.com:8080/v1/%2e%2e/admin"), "http.default-deny");
        assert_eq!(judge("http://example.com:8080/v1"), "http.default-deny");
        assert_eq!(judge("http://evilexample.com:8080/v1"), "http.default-deny");
        assert_eq!(judge("http://api.example.com/v1"), "http.default-deny");
        assert_eq!(judge("https://api.example.com:8080/v1"), "http.default-deny");
    }

    #[test]
    fn deny_wins_over_a_rule() {
        let mut policy = policy(vec![rule(HostPattern::Suffix("example.com".into()), false)]);
        policy.deny.push(HostPattern::Exact("admin.example.com".into()));
        let evaluation = evaluate_http_url(&policy, "GET", "http://ADMIN.example.com.:8080/v1");
        assert_eq!(evaluation.rule, "http.deny[admin.example.com]");
    }

    #[test]
    fn restricted_addresses_are_named() {
        for (address, kind) in [
            ("169.254.169.254", "a cloud metadata address"),
            ("10.1.2.3", "a private address"),
            ("192.168.0.1", "a private address"),
            ("172.16.0.1", "a private address"),
            ("169.254.1.1", "a link-local address"),
            ("0.0.0.0", "an unspecified address"),
            ("::1", "a loopback address"),
            ("fd00:ec2::254", "a private (unique local) address"),
            ("fe80::1", "a link-local address"),
            ("::ffff:10.0.0.1", "a private address"),
            ("64:ff9b::a9fe:a9fe", "a cloud metadata address"),
        ] {
            assert_eq!(restricted_address(address.parse().expect(address)), Some(kind), "{address}");
        }
        assert_eq!(restricted_address("93.184.216.34".parse().expect("public")), None);
        assert_eq!(restricted_address("2606:4700::1111".parse().expect("public")), None);
    }
}
