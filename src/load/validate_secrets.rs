//! A policy's `[secrets.NAME]` tables and `shell.env_allow` list.
//!
//! A secret names where its value comes from, never the value: exactly one
//! of `from_env` (a variable of planrun's own environment) and `from_file`
//! (a path; a relative one is resolved against the policy file's folder
//! here, once, so a run reads the same file whatever its current folder).

use std::collections::BTreeMap;
use std::path::Path;

use crate::diag::Diagnostic;
use crate::load::keys::SECRET;
use crate::load::node::Node;
use crate::load::table::{TableReader, error_count, is_name, strings, wrong_type};
use crate::model::{SecretSource, SecretSpec};

/// The longest secret or variable name.
const MAX_NAME: usize = 64;

/// Whether `text` is an environment variable name: ASCII letters, digits
/// and `_`, not starting with a digit.
pub(crate) fn is_env_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_NAME
        && !text.starts_with(|character: char| character.is_ascii_digit())
        && text.chars().all(|character| character.is_ascii_alphanumeric() || character == '_')
}

fn env_name_error(text: &str, node: &Node, what: &str) -> Diagnostic {
    Diagnostic::error("invalid-value", format!("`{text}` is not a valid {what}"))
        .with_span(node.span)
        .with_label("expected an environment variable name")
        .with_help("use ASCII letters, digits and `_`, not starting with a digit")
}

/// `shell.env_allow`: variable names a step's `env` may set.
pub(super) fn env_allow(items: &[Node], diagnostics: &mut Vec<Diagnostic>) -> Vec<String> {
    strings(items, "shell.env_allow", diagnostics, |text, node, diagnostics| {
        let valid = is_env_name(text);
        if !valid {
            diagnostics.push(env_name_error(text, node, "variable name"));
        }
        valid
    })
}

/// `[secrets]`: one [`SecretSpec`] per name, or `None` after an error.
pub(super) fn secrets(
    node: Option<&Node>,
    policy_path: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<BTreeMap<String, SecretSpec>> {
    let Some(node) = node else {
        return Some(BTreeMap::new());
    };
    let Some(entries) = node.as_table() else {
        diagnostics.push(wrong_type(node, "`secrets`", "a table of `[secrets.NAME]` tables"));
        return None;
    };
    let errors_before = error_count(diagnostics);
    let folder = Path::new(policy_path).parent().unwrap_or(Path::new(""));
    let mut found = BTreeMap::new();
    for (key, value) in entries {
        if !is_name(&key.name, MAX_NAME) || key.name.contains('-') {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("`{}` is not a valid secret name", key.name))
                    .with_span(key.span)
                    .with_label("expected a name such as `API_TOKEN`")
                    .with_help(format!("use ASCII letters, digits and `_` (at most {MAX_NAME})")),
            );
            continue;
        }
        if let Some(spec) = secret(&key.name, value, folder, diagnostics) {
            found.insert(key.name.clone(), spec);
        }
    }
    (error_count(diagnostics) == errors_before).then_some(found)
}

fn secret(name: &str, node: &Node, folder: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<SecretSpec> {
    let what = format!("`secrets.{name}`");
    let mut reader = TableReader::new(node, &what, format!(" in {what}"), SECRET.keys, diagnostics)?;
    let from_env = reader.string("from_env", diagnostics);
    let from_file = reader.string("from_file", diagnostics);
    let description = reader.string("description", diagnostics).map(|(text, _)| text.to_string());
    reader.finish(diagnostics);
    let source = match (from_env, from_file) {
        (Some((variable, variable_node)), None) => {
            if !is_env_name(variable) {
                diagnostics.push(env_name_error(variable, variable_node, "variable name in `from_env`"));
                return None;
            }
            SecretSource::FromEnv(variable.to_string())
        }
        (None, Some((path, path_node))) => {
            if path.is_empty() {
                diagnostics.push(
                    Diagnostic::error("invalid-value", "`from_file` is empty")
                        .with_span(path_node.span)
                        .with_help("name the file that holds the secret's value"),
                );
                return None;
            }
            let path = Path::new(path);
            let joined = if path.is_absolute() { path.to_path_buf() } else { folder.join(path) };
            SecretSource::FromFile(std::path::absolute(&joined).unwrap_or(joined))
        }
        (Some(_), Some(_)) | (None, None) => {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("{what} needs exactly one of `from_env` and `from_file`"))
                    .with_span(node.span)
                    .with_help("write `from_env = \"VARIABLE\"` or `from_file = \"path/to/file\"`"),
            );
            return None;
        }
    };
    Some(SecretSpec { source, description })
}

/// A plan against its policy: every name of a step's `env` is in
/// `shell.env_allow` (`env-not-allowed`), every `{{ secrets.NAME }}` names
/// a `[secrets.NAME]` of the policy (`unknown-secret`).
pub(super) fn plan_env_findings(
    loaded: &crate::load::loaded_plan::LoadedPlan,
    policy: &crate::model::Policy,
    diagnostics: &mut Vec<Diagnostic>,
) {
    use crate::load::did_you_mean::did_you_mean;
    use crate::template::RefTarget;
    for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
        for (name, span) in &spans.env {
            if policy.shell.env_allow.contains(name) {
                continue;
            }
            let mut diagnostic = Diagnostic::error(
                "env-not-allowed",
                format!("step `{}` sets `{name}`, which policy `{}` does not allow", step.id, policy.name),
            )
            .with_span(*span)
            .with_help(format!("add `{name}` to `shell.env_allow` in the policy, or remove it from the step's `env`"));
            if let Some(suggestion) = did_you_mean(name, policy.shell.env_allow.iter().map(String::as_str)) {
                diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
            }
            diagnostics.push(diagnostic);
        }
    }
    for site in &loaded.spans.templates {
        for reference in site.template.references() {
            let RefTarget::Secret(name) = &reference.target else {
                continue;
            };
            if policy.secrets.contains_key(name) {
                continue;
            }
            let mut diagnostic = Diagnostic::error(
                "unknown-secret",
                format!("`{{{{ {} }}}}` names no secret of policy `{}`", reference.expr, policy.name),
            )
            .with_span(site.node.span)
            .with_help(format!("declare it in the policy: `[secrets.{name}]` with `from_env` or `from_file`"));
            if let Some(suggestion) = did_you_mean(name, policy.secrets.keys().map(String::as_str)) {
                diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
            }
            diagnostics.push(diagnostic);
        }
    }
}
