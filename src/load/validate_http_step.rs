//! An `http` step's payload: `method`, `url` (scheme, host and port
//! literal; path and query may hold templates), `headers` (values may use
//! secrets), `body` or `json`, `max_response_bytes`, `response_headers`.

use std::collections::BTreeMap;

use crate::diag::Diagnostic;
use crate::load::keys::HTTP_METHODS;
use crate::load::loaded_plan::SiteKind;
use crate::load::node::Node;
use crate::load::table::{expect_string, strings, value_span, wrong_type};
use crate::load::validate_step::ActionBuilder;
use crate::model::Action;
use crate::policy::HttpTarget;
use crate::template::Template;

/// Headers planrun sets itself or that would change how the request is
/// framed: a step may not set them.
const RESERVED_HEADERS: &[&str] = &["host", "content-length", "transfer-encoding", "connection", "idempotency-key"];

impl ActionBuilder<'_, '_, '_> {
    pub(super) fn http(&mut self) -> Option<Action> {
        let methods: Vec<(&str, &str)> = HTTP_METHODS.iter().map(|method| (*method, *method)).collect();
        let method = match self.reader.choice("method", "`method`", &methods, self.diagnostics) {
            Some(Some(method)) => Some(method.to_string()),
            Some(None) => {
                self.reader.required("method", self.diagnostics);
                None
            }
            None => None,
        };
        let url = self.url();
        let headers = self.headers();
        let body = self.reader.string("body", self.diagnostics).map(|(_, node)| self.template(node, "`body`"));
        let json = match self.reader.get("json") {
            Some(node) if node.as_table().is_none() && node.as_array().is_none() => {
                self.diagnostics.push(wrong_type(node, "`json`", "a table or an array"));
                Some(None)
            }
            Some(node) => Some(self.json_template(node)),
            None => None,
        };
        if let (Some(_), Some(_)) = (&body, &json) {
            self.diagnostics.push(
                Diagnostic::error("conflicting-keys", "`body` and `json` are both given")
                    .with_span(self.reader.key_span("json").unwrap_or_default())
                    .with_label("one of the two")
                    .with_help("`json` sends a document built from templates; `body` sends text: keep one"),
            );
            return None;
        }
        let max_response_bytes =
            self.reader.integer("max_response_bytes", 1, self.diagnostics).map(|(bytes, _)| bytes.unsigned_abs());
        let response_headers = match self.reader.array("response_headers", self.diagnostics) {
            Some(items) => {
                let names = strings(items, "response_headers", self.diagnostics, header_name);
                (names.len() == items.len()).then(|| names.iter().map(|name| name.to_ascii_lowercase()).collect())
            }
            None => Some(Vec::new()),
        };
        let body = match body {
            Some(body) => Some(body?),
            None => None,
        };
        let json = match json {
            Some(json) => Some(json?),
            None => None,
        };
        Some(Action::Http {
            method: method?,
            url: url?,
            headers: headers?,
            body,
            json,
            max_response_bytes,
            response_headers: response_headers?,
        })
    }

    /// `url`: scheme, host and port literal and valid (no userinfo), the
    /// rest a template.
    fn url(&mut self) -> Option<Template> {
        let (text, node) = self.reader.required_string("url", self.diagnostics)?;
        *self.command_span = Some(node.span);
        let Some(after_scheme) = text.strip_prefix("https://").or_else(|| text.strip_prefix("http://")) else {
            self.diagnostics.push(
                Diagnostic::error("invalid-url", "`url` must start with `http://` or `https://`")
                    .with_span(node.span)
                    .with_help("write the scheme, host and port literally: `url = \"https://api.example.com/v1/…\"`"),
            );
            return None;
        };
        let authority_end = after_scheme.find(['/', '?', '#']).unwrap_or(after_scheme.len());
        let origin_len = text.len() - after_scheme.len() + authority_end;
        if let Some(at) = text[..origin_len].find("{{") {
            self.diagnostics.push(
                Diagnostic::error("untrusted-control-field", "the scheme, host and port of `url` must be literal")
                    .with_span(value_span(&self.file.text, node, at, origin_len))
                    .with_label("no template here")
                    .with_help("a target never comes from step output: templates may fill the path and query only"),
            );
            return None;
        }
        if let Some(at) = text.find('#') {
            self.diagnostics.push(
                Diagnostic::error("invalid-url", "`url` has a fragment (`#…`), which is never sent")
                    .with_span(value_span(&self.file.text, node, at, text.len()))
                    .with_help("remove the fragment"),
            );
            return None;
        }
        if let Err(reason) = HttpTarget::parse(&format!("{}/", &text[..origin_len])) {
            self.diagnostics.push(
                Diagnostic::error("invalid-url", format!("invalid `url`: {reason}"))
                    .with_span(value_span(&self.file.text, node, 0, origin_len))
                    .with_help("write `scheme://host[:port]/path`, without a user name or password"),
            );
            return None;
        }
        self.template(node, "`url`")
    }

    /// `headers`: valid names planrun does not set itself; values are
    /// templates that may use secrets.
    fn headers(&mut self) -> Option<BTreeMap<String, Template>> {
        let mut headers = BTreeMap::new();
        let Some(node) = self.reader.get("headers") else {
            return Some(headers);
        };
        let Some(entries) = node.as_table() else {
            self.diagnostics.push(wrong_type(node, "`headers`", "a table of strings"));
            return None;
        };
        let mut ok = true;
        for (key, value) in entries {
            let lower = key.name.to_ascii_lowercase();
            let problem = if !is_token(&key.name) {
                Some("is not a valid header name".to_string())
            } else if RESERVED_HEADERS.contains(&lower.as_str()) {
                Some(match lower.as_str() {
                    "idempotency-key" => "is set from the step's `idempotency_key`".to_string(),
                    _ => "is set by planrun".to_string(),
                })
            } else {
                None
            };
            if let Some(problem) = problem {
                self.diagnostics.push(
                    Diagnostic::error("invalid-value", format!("header `{}` {problem}", key.name))
                        .with_span(key.span)
                        .with_help("header names are ASCII letters, digits and `-`; remove the header"),
                );
                ok = false;
                continue;
            }
            let what = format!("`headers.{}`", key.name);
            let Some(_) = expect_string(value, &what, self.diagnostics) else {
                ok = false;
                continue;
            };
            match self.template_in(value, &what, SiteKind::Header) {
                Some(template) => {
                    headers.insert(key.name.clone(), template);
                }
                None => ok = false,
            }
        }
        ok.then_some(headers)
    }
}

/// A header name: an HTTP token.
fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

fn header_name(text: &str, node: &Node, diagnostics: &mut Vec<Diagnostic>) -> bool {
    let valid = is_token(text);
    if !valid {
        diagnostics.push(
            Diagnostic::error("invalid-value", format!("`{text}` is not a valid header name")).with_span(node.span),
        );
    }
    valid
}
