//! The sandbox keys of a policy: `shell.sandbox`, `shell.require_sandbox`
//! and a rule's `network` / `network_ports` (see docs/effects-sandbox.md).

use crate::diag::Diagnostic;
use crate::load::node::NodeValue;
use crate::load::table::{TableReader, wrong_type};
use crate::model::{NetworkAccess, SandboxMode};

/// `shell.sandbox` and `shell.require_sandbox`; `None` after a finding.
pub(super) fn settings(reader: &mut TableReader<'_>, diagnostics: &mut Vec<Diagnostic>) -> Option<(SandboxMode, bool)> {
    let mode = reader.choice(
        "sandbox",
        "sandbox",
        &[("landlock", SandboxMode::Landlock), ("none", SandboxMode::None)],
        diagnostics,
    )?;
    let require = reader.bool("require_sandbox", diagnostics).unwrap_or(false);
    if require && mode == Some(SandboxMode::None) {
        let span = reader.key_span("require_sandbox");
        let mut diagnostic =
            Diagnostic::error("invalid-value", "`require_sandbox = true` with `sandbox = \"none\"` can never run")
                .with_label("requires a sandbox this policy switches off")
                .with_help("use `sandbox = \"landlock\"`, or drop `require_sandbox`");
        if let Some(span) = span {
            diagnostic = diagnostic.with_span(span);
        }
        diagnostics.push(diagnostic);
        return None;
    }
    Some((mode.unwrap_or_default(), require))
}

/// A rule's `network` and `network_ports`; `None` after a finding.
pub(super) fn network(reader: &mut TableReader<'_>, diagnostics: &mut Vec<Diagnostic>) -> Option<NetworkAccess> {
    let all = reader.bool("network", diagnostics);
    let Some(items) = reader.array("network_ports", diagnostics) else {
        return Some(if all == Some(true) { NetworkAccess::On } else { NetworkAccess::Off });
    };
    let mut ports = Vec::new();
    let mut ok = true;
    for item in items {
        match item.value {
            NodeValue::Integer(port) if (1..=65535).contains(&port) => {
                let port = u16::try_from(port).unwrap_or(u16::MAX);
                if !ports.contains(&port) {
                    ports.push(port);
                }
            }
            NodeValue::Integer(port) => {
                diagnostics.push(
                    Diagnostic::error("invalid-value", format!("network port {port} is not between 1 and 65535"))
                        .with_span(item.span)
                        .with_label("expected 1 to 65535"),
                );
                ok = false;
            }
            _ => {
                diagnostics.push(wrong_type(item, "a `network_ports` entry", "an integer"));
                ok = false;
            }
        }
    }
    if all == Some(true) {
        let mut diagnostic = Diagnostic::error("invalid-value", "`network = true` and `network_ports` together")
            .with_label("`network = true` already allows every port")
            .with_help("keep `network = true` for any connection, or `network_ports` for these ports only");
        if let Some(span) = reader.key_span("network_ports") {
            diagnostic = diagnostic.with_span(span);
        }
        diagnostics.push(diagnostic);
        return None;
    }
    ok.then_some(NetworkAccess::Ports(ports))
}
