//! A policy's `[http]` → [`HttpPolicy`]: `[[http.allow]]` rules (each
//! rule's `match` / `not_match` example URLs judged at load by the
//! runtime's own matcher, [`crate::policy::evaluate_http_url`]),
//! `http.deny`, `http.max_response_bytes`, `http.timeout_secs`,
//! `http.proxy`; and the plan-against-policy finding `http-always-denied`.

use crate::diag::Diagnostic;
use crate::load::keys::{HTTP, HTTP_METHODS, HTTP_RULE};
use crate::load::loaded_plan::LoadedPlan;
use crate::load::node::Node;
use crate::load::table::{TableReader, compile_regex, empty_table, error_count, section, strings};
use crate::model::{
    Action, DEFAULT_HTTP_MAX_RESPONSE_BYTES, DEFAULT_HTTP_TIMEOUT_SECS, HostPattern, HttpPolicy, HttpProxy, HttpRule,
    Policy,
};
use crate::policy::{HttpTarget, evaluate_http_url, rule_matches};

/// The name of an unnamed rule: `http.allow[<index>]`.
pub(crate) fn default_http_rule_id(index: usize) -> String {
    format!("http.allow[{index}]")
}

/// `[http]`; `first_index` numbers unnamed rules after a parent's.
pub(super) fn http(node: Option<&Node>, first_index: usize, diagnostics: &mut Vec<Diagnostic>) -> Option<HttpPolicy> {
    let empty = empty_table();
    let mut reader = section(node, "http", HTTP.keys, &empty, diagnostics)?;
    let deny: Vec<HostPattern> = match reader.array("deny", diagnostics) {
        Some(items) => {
            let mut patterns = Vec::new();
            strings(items, "http.deny", diagnostics, |text, node, diagnostics| {
                host_pattern(text, node, diagnostics).map(|pattern| patterns.push(pattern)).is_some()
            });
            patterns
        }
        None => Vec::new(),
    };
    let max_response_bytes = reader
        .integer("max_response_bytes", 1, diagnostics)
        .map_or(DEFAULT_HTTP_MAX_RESPONSE_BYTES, |(bytes, _)| bytes.unsigned_abs());
    let timeout_secs = reader
        .integer("timeout_secs", 1, diagnostics)
        .map_or(DEFAULT_HTTP_TIMEOUT_SECS, |(secs, _)| secs.unsigned_abs());
    let proxy = reader.string("proxy", diagnostics).map(|(text, node)| proxy(text, node, diagnostics));
    let mut allow = Vec::new();
    let mut rules_ok = true;
    if let Some(items) = reader.array("allow", diagnostics) {
        for (index, item) in items.iter().enumerate() {
            match rule(item, first_index + index, &deny, diagnostics) {
                Some(rule) => allow.push(rule),
                None => rules_ok = false,
            }
        }
    }
    reader.finish(diagnostics);
    let proxy = match proxy {
        Some(Some(proxy)) => Some(proxy),
        Some(None) => return None,
        None => None,
    };
    rules_ok.then_some(HttpPolicy { allow, deny, max_response_bytes, timeout_secs, proxy })
}

/// `http.proxy`: `http://host:port` and nothing else (no user name or
/// password, no path, query or fragment; plain HTTP to the proxy).
fn proxy(text: &str, node: &Node, diagnostics: &mut Vec<Diagnostic>) -> Option<HttpProxy> {
    let refuse = |diagnostics: &mut Vec<Diagnostic>, why: String, help: &str| {
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("`http.proxy` `{text}` {why}"))
                .with_span(node.span)
                .with_label("expected `http://host:port`")
                .with_help(help.to_string()),
        );
        None
    };
    let url = match url::Url::parse(text) {
        Ok(url) => url,
        Err(error) => {
            return refuse(diagnostics, format!("is not a URL: {error}"), "write e.g. `http://127.0.0.1:3128`");
        }
    };
    if url.scheme() != "http" {
        return refuse(
            diagnostics,
            format!("has scheme `{}`", url.scheme()),
            "planrun speaks plain HTTP to the proxy (`http://`); requests to `https` URLs go through it in a              `CONNECT` tunnel, so their TLS still runs from planrun to the server",
        );
    }
    if !url.username().is_empty() || url.password().is_some() {
        return refuse(
            diagnostics,
            "holds a user name or password".to_string(),
            "proxy credentials are not supported: name a proxy that needs none (e.g. one on loopback)",
        );
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return refuse(
            diagnostics,
            "has a path, query or fragment".to_string(),
            "write the scheme, host and port alone",
        );
    }
    let port = url.port_or_known_default().unwrap_or(80);
    let host = url.host_str().unwrap_or_default();
    match HttpTarget::parse(&format!("http://{host}:{port}/")) {
        Ok(target) => Some(HttpProxy { host: target.host, ip: target.ip, port }),
        Err(reason) => refuse(diagnostics, reason, "write e.g. `http://127.0.0.1:3128`"),
    }
}

/// A host pattern: a name, `*.suffix`, or an IP address (normalised the
/// way a URL's host is).
fn host_pattern(text: &str, node: &Node, diagnostics: &mut Vec<Diagnostic>) -> Option<HostPattern> {
    let (suffix, name) = match text.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let parsed = (!name.is_empty() && !name.contains(['/', '@', ':', '*', '?', '#']) || name.starts_with('['))
        .then(|| HttpTarget::parse(&format!("http://{name}/")).ok())
        .flatten();
    let Some(target) = parsed else {
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("`{text}` is not a host"))
                .with_span(node.span)
                .with_label("expected a host name, `*.suffix` or an IP address")
                .with_help("write the host alone, e.g. `api.example.com`, `*.example.com` or `10.0.0.1`"),
        );
        return None;
    };
    if suffix && target.ip.is_some() {
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("`{text}`: `*.` goes before a name, not an address"))
                .with_span(node.span),
        );
        return None;
    }
    Some(if suffix { HostPattern::Suffix(target.host) } else { HostPattern::Exact(target.host) })
}

fn rule(node: &Node, index: usize, deny: &[HostPattern], diagnostics: &mut Vec<Diagnostic>) -> Option<HttpRule> {
    let errors_before = error_count(diagnostics);
    let default_name = default_http_rule_id(index);
    let mut reader = TableReader::new(
        node,
        &format!("`{default_name}`"),
        format!(" in `{default_name}`"),
        HTTP_RULE.keys,
        diagnostics,
    )?;
    let name = match reader.string("id", diagnostics) {
        Some((id, _)) => {
            reader.set_context(format!(" in rule `{id}`"));
            id.to_string()
        }
        None => default_name,
    };
    let methods = match reader.array("methods", diagnostics) {
        Some(items) => strings(items, "methods", diagnostics, |text, node, diagnostics| {
            let known = HTTP_METHODS.contains(&text);
            if !known {
                diagnostics.push(
                    Diagnostic::error("invalid-value", format!("unknown method `{text}`"))
                        .with_span(node.span)
                        .with_label(format!("expected one of {}", HTTP_METHODS.join(", "))),
                );
            }
            known
        }),
        None => vec!["GET".to_string()],
    };
    let scheme = reader
        .choice("scheme", "`scheme`", &[("https", "https"), ("http", "http")], diagnostics)
        .map(|scheme| scheme.unwrap_or("https").to_string());
    let host =
        reader.required_string("host", diagnostics).and_then(|(text, node)| host_pattern(text, node, diagnostics));
    let port = reader.ranged("port", diagnostics).and_then(|(port, _)| u16::try_from(port).ok());
    let path = match reader.string("path", diagnostics) {
        Some((text, node)) if !text.starts_with('/') => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("path prefix `{text}` does not start with `/`"))
                    .with_span(node.span),
            );
            None
        }
        Some((text, _)) => Some(text.to_string()),
        None => Some("/".to_string()),
    };
    let path_matches = reader
        .string("path_matches", diagnostics)
        .and_then(|(text, node)| compile_regex(text, false, node, diagnostics));
    let private = reader.bool("private", diagnostics).unwrap_or(false);
    let redirects = reader.ranged("redirects", diagnostics).map_or(0, |(hops, _)| u32::try_from(hops).unwrap_or(0));
    let reason = reader.string("reason", diagnostics).map(|(text, _)| text.to_string());
    let matching = reader.array("match", diagnostics).unwrap_or(&[]);
    let not_matching = reader.array("not_match", diagnostics).unwrap_or(&[]);
    reader.finish(diagnostics);
    if error_count(diagnostics) > errors_before {
        return None;
    }
    let rule = HttpRule {
        name,
        methods,
        scheme: scheme?,
        host: host?,
        port,
        path: path?,
        path_matches,
        private,
        redirects,
        reason,
        origin: None,
    };
    examples(&rule, deny, matching, not_matching, diagnostics);
    (error_count(diagnostics) == errors_before).then_some(rule)
}

/// Judges the rule's example URLs with the runtime's matcher: a `match`
/// URL must be allowed by this rule (under the policy's `http.deny`), a
/// `not_match` URL must not be.
fn examples(
    rule: &HttpRule,
    deny: &[HostPattern],
    matching: &[Node],
    not_matching: &[Node],
    diagnostics: &mut Vec<Diagnostic>,
) {
    let alone = HttpPolicy { allow: vec![rule.clone()], deny: deny.to_vec(), ..HttpPolicy::default() };
    let method = rule.methods.first().map_or("GET", String::as_str);
    for (list, items, want) in [("`match`", matching, true), ("`not_match`", not_matching, false)] {
        for (index, item) in items.iter().enumerate() {
            let Some(url) = item.as_str() else {
                diagnostics.push(crate::load::table::wrong_type(item, &format!("{list}[{index}]"), "a string"));
                continue;
            };
            let evaluation = evaluate_http_url(&alone, method, url);
            if evaluation.is_allowed() != want {
                let what = if want { "is not allowed by this rule" } else { "is allowed by this rule" };
                diagnostics.push(
                    Diagnostic::error("rule-example-mismatch", format!("{list} example {what}"))
                        .with_span(item.span)
                        .with_label(evaluation.reason)
                        .with_help("fix the rule's `host`, `port`, `path` or `methods`, or the example"),
                );
            }
        }
    }
}

/// `http-always-denied`: an `http` step whose method and URL no rule of
/// its policy can allow (a literal URL judged whole; a templated one by
/// its literal scheme, host and port).
pub(super) fn http_always_denied(loaded: &LoadedPlan, policy: &Policy, diagnostics: &mut Vec<Diagnostic>) {
    for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
        let Action::Http { method, url, .. } = &step.action else {
            continue;
        };
        let reason = if url.is_literal() {
            let evaluation = evaluate_http_url(&policy.http, method, url.source());
            (!evaluation.is_allowed()).then(|| format!("rule `{}`: {}", evaluation.rule, evaluation.reason))
        } else {
            let origin_only = HttpTarget::parse(&origin_of(url.source())).ok();
            let possible = origin_only.as_ref().is_some_and(|target| {
                policy.http.allow.iter().any(|rule| {
                    let any_path = HttpRule { path: "/".to_string(), path_matches: None, ..rule.clone() };
                    rule_matches(&any_path, method, target)
                }) && !policy.http.deny.iter().any(|pattern| pattern.matches(&target.host))
            });
            (!possible).then(|| format!("no `[[http.allow]]` rule allows {method} to this scheme, host and port"))
        };
        let Some(reason) = reason else {
            continue;
        };
        let diagnostic = Diagnostic::warning(
            "http-always-denied",
            format!("policy `{}` always denies step `{}` ({method} `{}`)", policy.name, step.id, url.source()),
        )
        .with_span(spans.command.unwrap_or(spans.id))
        .with_label(reason)
        .with_help(format!(
            "add an `[[http.allow]]` rule to the policy; check it with `planrun policy check --policy {} --method {method} --url URL`",
            policy.name
        ));
        diagnostics.push(loaded.soften(diagnostic));
    }
}

/// `scheme://authority/` of a URL whose path may hold templates.
fn origin_of(url: &str) -> String {
    let after = url.find("://").map_or(0, |at| at + 3);
    let end = url[after..].find(['/', '?', '#']).map_or(url.len(), |at| after + at);
    format!("{}/", &url[..end])
}
