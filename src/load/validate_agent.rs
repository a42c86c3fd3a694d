//! Agent steps in files: a `kind = "agent"` step's payload
//! ([`ActionBuilder::agent`]), a policy's `[models.NAME]` ([`models`]), and
//! the cross-check of a plan's agent steps against its policy
//! ([`agent_findings`]: a tool or a model the policy does not have).

use std::collections::BTreeMap;
use std::path::Path;

use crate::diag::Diagnostic;
use crate::load::keys::MODEL;
use crate::load::loaded_plan::LoadedPlan;
use crate::load::node::Node;
use crate::load::table::{TableReader, error_count, is_name, strings, wrong_type};
use crate::load::validate_step::ActionBuilder;
use crate::model::{AGENT_BUILTIN_TOOLS, Action, AgentSpec, DEFAULT_MAX_REFUSALS, ModelBackend, ModelProfile, Policy};

impl ActionBuilder<'_, '_, '_> {
    /// The payload of a `kind = "agent"` step.
    pub(super) fn agent(&mut self) -> Option<Action> {
        let goal = self.reader.required("goal", self.diagnostics).and_then(|node| {
            if node.as_str().is_none() {
                self.diagnostics.push(wrong_type(node, "`goal`", "a string"));
                return None;
            }
            self.template(node, "`goal`")
        });
        let tools = self.reader.required("tools", self.diagnostics).and_then(|node| {
            let Some(items) = node.as_array().filter(|items| !items.is_empty()) else {
                self.diagnostics.push(wrong_type(node, "`tools`", "a non-empty array of tool names"));
                return None;
            };
            let before = error_count(self.diagnostics);
            let names = strings(items, "tools", self.diagnostics, |_, _, _| true);
            (error_count(self.diagnostics) == before).then_some(names)
        });
        let model = self.reader.required_string("model", self.diagnostics).map(|(name, _)| name.to_string());
        let max_turns = self
            .reader
            .required("max_turns", self.diagnostics)
            .and(self.reader.ranged("max_turns", self.diagnostics).map(|(turns, _)| turns.unsigned_abs() as u32));
        let max_model_calls =
            self.reader.ranged("max_model_calls", self.diagnostics).map(|(calls, _)| calls.unsigned_abs() as u32);
        let max_tokens_in = self.reader.integer("max_tokens_in", 1, self.diagnostics).map(|(n, _)| n.unsigned_abs());
        let max_tokens_out = self.reader.integer("max_tokens_out", 1, self.diagnostics).map(|(n, _)| n.unsigned_abs());
        let max_refusals = self
            .reader
            .ranged("max_refusals", self.diagnostics)
            .map_or(DEFAULT_MAX_REFUSALS, |(refusals, _)| refusals.unsigned_abs() as u32);
        Some(Action::Agent(AgentSpec {
            goal: goal?,
            tools: tools?,
            model: model?,
            max_turns: max_turns?,
            max_model_calls,
            max_tokens_in,
            max_tokens_out,
            max_refusals,
        }))
    }
}

/// `[models]`: one [`ModelProfile`] per name, or `None` after an error.
pub(super) fn models(
    node: Option<&Node>,
    policy_path: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<BTreeMap<String, ModelProfile>> {
    let folder = Path::new(policy_path).parent().unwrap_or(Path::new(""));
    let Some(node) = node else {
        return Some(BTreeMap::new());
    };
    let Some(entries) = node.as_table() else {
        diagnostics.push(wrong_type(node, "`models`", "a table of `[models.NAME]` tables"));
        return None;
    };
    let before = error_count(diagnostics);
    let mut found = BTreeMap::new();
    for (key, value) in entries {
        if !is_name(&key.name, 64) {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("`{}` is not a valid model profile name", key.name))
                    .with_span(key.span)
                    .with_label("expected a name such as `local`"),
            );
            continue;
        }
        if let Some(profile) = model(&key.name, value, folder, diagnostics) {
            found.insert(key.name.clone(), profile);
        }
    }
    (error_count(diagnostics) == before).then_some(found)
}

fn model(name: &str, node: &Node, folder: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<ModelProfile> {
    let what = format!("`models.{name}`");
    let mut reader = TableReader::new(node, &what, format!(" in {what}"), MODEL.keys, diagnostics)?;
    let backend = reader.required("backend", diagnostics).and(
        reader
            .choice(
                "backend",
                "`backend`",
                &[("openai", ModelBackend::Openai), ("ollama", ModelBackend::Ollama)],
                diagnostics,
            )
            .flatten(),
    );
    let endpoint = reader.required_string("endpoint", diagnostics).and_then(|(text, node)| {
        let rest = text.strip_prefix("http://").or_else(|| text.strip_prefix("https://"));
        if !rest.is_some_and(|rest| !rest.is_empty() && !rest.starts_with('/')) {
            diagnostics.push(
                Diagnostic::error(
                    "invalid-value",
                    format!("`endpoint` `{text}` is not an `http://` or `https://` URL"),
                )
                .with_span(node.span)
                .with_label("expected `http://host:port/v1` or `https://host/v1`"),
            );
            return None;
        }
        Some(text.trim_end_matches('/').to_string())
    });
    let model = reader.required_string("model", diagnostics).map(|(text, _)| text.to_string());
    let temperature = reader.number("temperature", diagnostics).map_or(0.0, |(value, _)| value);
    let max_tokens = reader.ranged("max_tokens", diagnostics).map_or(512, |(value, _)| value.unsigned_abs() as u32);
    let timeout_secs = reader.ranged("timeout_secs", diagnostics).map_or(60, |(value, _)| value.unsigned_abs());
    let api_key = reader.string("api_key", diagnostics).map(|(text, _)| text.to_string());
    let tls = endpoint.as_deref().is_none_or(|endpoint| endpoint.starts_with("https://"));
    let ca_file = reader.string("ca_file", diagnostics).and_then(|(text, node)| {
        if text.is_empty() || !tls {
            let why = if text.is_empty() { "`ca_file` is empty" } else { "`ca_file` is for an `https://` endpoint" };
            diagnostics.push(
                Diagnostic::error("invalid-value", why.to_string())
                    .with_span(node.span)
                    .with_label("expected the path of a PEM file, with an `https://` endpoint"),
            );
            return None;
        }
        let path = Path::new(text);
        let joined = if path.is_absolute() { path.to_path_buf() } else { folder.join(path) };
        Some(std::path::absolute(&joined).unwrap_or(joined))
    });
    reader.finish(diagnostics);
    Some(ModelProfile {
        backend: backend?,
        endpoint: endpoint?,
        model: model?,
        temperature,
        max_tokens,
        timeout_secs,
        api_key,
        ca_file,
    })
}

/// A plan's agent steps against its policy: every tool is a shell rule id
/// of the policy or a built-in tool, the model profile exists, and its
/// `api_key` names a declared secret.
pub(super) fn agent_findings(loaded: &LoadedPlan, policy: &Policy, diagnostics: &mut Vec<Diagnostic>) {
    for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
        let Action::Agent(agent) = &step.action else {
            continue;
        };
        for tool in &agent.tools {
            if policy.agent_tool(tool).is_none() {
                let rules: Vec<String> = policy.shell.allow.iter().map(|rule| format!("`{}`", rule.name)).collect();
                let builtin: Vec<String> = AGENT_BUILTIN_TOOLS.iter().map(|name| format!("`{name}`")).collect();
                let mcp: Vec<String> = policy
                    .mcp
                    .servers
                    .iter()
                    .flat_map(|(server, declared)| declared.tools.keys().map(move |tool| format!("`{server}.{tool}`")))
                    .collect();
                diagnostics.push(
                    Diagnostic::error(
                        "unknown-agent-tool",
                        format!(
                            "step `{}` offers tool `{tool}`, which policy `{}` does not have",
                            step.id, policy.name
                        ),
                    )
                    .with_span(spans.id)
                    .with_help(format!(
                        "known tools: {}",
                        rules.into_iter().chain(mcp).chain(builtin).collect::<Vec<_>>().join(", ")
                    )),
                );
            }
        }
        match policy.models.get(&agent.model) {
            None => {
                let known: Vec<String> = policy.models.keys().map(|name| format!("`{name}`")).collect();
                diagnostics.push(
                    Diagnostic::error(
                        "unknown-model",
                        format!(
                            "step `{}` names model `{}`, which policy `{}` does not have",
                            step.id, agent.model, policy.name
                        ),
                    )
                    .with_span(spans.id)
                    .with_help(if known.is_empty() {
                        "declare it in the policy: `[models.NAME]` with `backend`, `endpoint` and `model`".to_string()
                    } else {
                        format!("known models: {}", known.join(", "))
                    }),
                );
            }
            Some(profile) => {
                if let Some(secret) = profile.api_key.as_ref().filter(|secret| !policy.secrets.contains_key(*secret)) {
                    diagnostics.push(
                        Diagnostic::error(
                            "unknown-secret",
                            format!(
                                "model `{}` reads its key from secret `{secret}`, which policy `{}` does not declare",
                                agent.model, policy.name
                            ),
                        )
                        .with_span(spans.id)
                        .with_help("declare it: `[secrets.NAME]` with `from_env` or `from_file`"),
                    );
                }
            }
        }
    }
}
