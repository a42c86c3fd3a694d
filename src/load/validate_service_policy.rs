//! Service policy tree → [`ServicePolicy`], collecting every finding of the
//! file in one pass, through the same [`TableReader`] as plans and policies
//! (wrong types, missing and unknown keys with the allowed list and a
//! did-you-mean, `file:line:column`), in TOML or YAML.
//!
//! ```toml
//! version = 1
//! [guard]
//! max_goal_chars = 2000
//! forbidden_patterns = ["(?i)ignore (all )?previous instructions"]
//! [controller]
//! max_iterations = 3
//! max_consecutive_failures = 2
//! [[recovery]]
//! id = "bad-template-to-pwd"
//! when_failure_class = "template_error"   # and/or
//! match = "(?i)flow bad template"         # a regex on the goal
//! rewrite = "test flow pwd to file"
//! reason = "…"
//! [decision]                              # decision requests (defaults suit a CPU model)
//! timeout_secs = 60
//! max_tokens = 128
//! temperature = 0.0
//! system_prompt = "…"
//! ```
//!
//! Every section is optional; a key left out keeps its default
//! ([`ServicePolicy::default`]). Adding a key: add it to its section in
//! `keys.rs` (with its range, for an integer) and read it in the section's
//! function below.

use crate::diag::Diagnostic;
use crate::load::did_you_mean::did_you_mean;
use crate::load::keys::{CONTROLLER, DECISION, FAILURE_CLASSES, GUARD, RECOVERY, SERVICE};
use crate::load::node::Node;
use crate::load::table::{TableReader, check_version, compile_regex, empty_table, error_count, section, strings};
use crate::model::{
    ControllerLimits, DecisionSettings, FailureClass, GuardRules, MAX_REWRITE_CHARS, MAX_SYSTEM_PROMPT_CHARS,
    RecoveryRule, ServicePolicy,
};

/// Builds the service policy read from `source` (its name as shown to
/// users), or returns `None` when the file has errors (all of them
/// reported).
pub(crate) fn validate_service_policy(
    root: &Node,
    source: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ServicePolicy> {
    let errors_before = error_count(diagnostics);
    let defaults = ServicePolicy::default();
    let mut reader = TableReader::new(root, "a service policy file", "", SERVICE.keys, diagnostics)?;
    check_version(&mut reader, diagnostics);
    reader.string("description", diagnostics);
    let guard = guard(reader.get("guard"), defaults.guard, diagnostics);
    let controller = controller(reader.get("controller"), defaults.controller, diagnostics);
    let recovery = recovery(&mut reader, diagnostics);
    let decision = decision(reader.get("decision"), defaults.decision, diagnostics);
    reader.finish(diagnostics);
    if error_count(diagnostics) > errors_before {
        return None;
    }
    Some(ServicePolicy {
        source: source.to_string(),
        guard: guard?,
        controller: controller?,
        recovery,
        decision: decision?,
    })
}

fn decision(
    node: Option<&Node>,
    defaults: DecisionSettings,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<DecisionSettings> {
    let empty = empty_table();
    let mut reader = section(node, "decision", DECISION.keys, &empty, diagnostics)?;
    let default_secs = u32::try_from(defaults.timeout.as_secs()).unwrap_or(u32::MAX);
    let timeout_secs = ranged_or(&mut reader, "timeout_secs", default_secs, diagnostics);
    let max_tokens = ranged_or(&mut reader, "max_tokens", defaults.max_tokens, diagnostics);
    let temperature = reader.number("temperature", diagnostics).map_or(defaults.temperature, |(value, _)| value);
    let mut system_prompt = defaults.system_prompt;
    if let Some((text, node)) = reader.string("system_prompt", diagnostics) {
        let chars = text.chars().count();
        if text.trim().is_empty() || chars > MAX_SYSTEM_PROMPT_CHARS {
            diagnostics.push(
                Diagnostic::error(
                    "invalid-value",
                    format!("{} must hold 1 to {MAX_SYSTEM_PROMPT_CHARS} characters", reader.describe("system_prompt")),
                )
                .with_span(node.span)
                .with_label(format!("{chars} characters")),
            );
        } else {
            system_prompt = text.to_string();
        }
    }
    reader.finish(diagnostics);
    Some(DecisionSettings {
        timeout: std::time::Duration::from_secs(u64::from(timeout_secs)),
        max_tokens,
        temperature,
        system_prompt,
    })
}

/// An integer key of a section, or `default` when it is absent (or after
/// a reported error).
fn ranged_or(reader: &mut TableReader<'_>, key: &str, default: u32, diagnostics: &mut Vec<Diagnostic>) -> u32 {
    reader.ranged(key, diagnostics).map_or(default, |(value, _)| u32::try_from(value).unwrap_or(default))
}

fn guard(node: Option<&Node>, defaults: GuardRules, diagnostics: &mut Vec<Diagnostic>) -> Option<GuardRules> {
    let empty = empty_table();
    let mut reader = section(node, "guard", GUARD.keys, &empty, diagnostics)?;
    let default_max = u32::try_from(defaults.max_goal_chars).unwrap_or(u32::MAX);
    let max_goal_chars = ranged_or(&mut reader, "max_goal_chars", default_max, diagnostics) as usize;
    let mut forbidden_patterns = defaults.forbidden_patterns;
    if let Some(items) = reader.array("forbidden_patterns", diagnostics) {
        let mut compiled = Vec::new();
        strings(items, "guard.forbidden_patterns", diagnostics, |pattern, node, diagnostics| {
            // Not anchored: a pattern is looked for anywhere in the goal.
            let regex = compile_regex(pattern, false, node, diagnostics);
            let valid = regex.is_some();
            compiled.extend(regex);
            valid
        });
        forbidden_patterns = compiled;
    }
    reader.finish(diagnostics);
    Some(GuardRules { max_goal_chars, forbidden_patterns })
}

fn controller(
    node: Option<&Node>,
    defaults: ControllerLimits,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<ControllerLimits> {
    let empty = empty_table();
    let mut reader = section(node, "controller", CONTROLLER.keys, &empty, diagnostics)?;
    let limits = ControllerLimits {
        max_iterations: ranged_or(&mut reader, "max_iterations", defaults.max_iterations, diagnostics),
        max_consecutive_failures: ranged_or(
            &mut reader,
            "max_consecutive_failures",
            defaults.max_consecutive_failures,
            diagnostics,
        ),
    };
    reader.finish(diagnostics);
    Some(limits)
}

/// The `[[recovery]]` rules; rules with errors are left out (and reported).
fn recovery(reader: &mut TableReader<'_>, diagnostics: &mut Vec<Diagnostic>) -> Vec<RecoveryRule> {
    let Some(items) = reader.array("recovery", diagnostics) else {
        return Vec::new();
    };
    let mut rules: Vec<RecoveryRule> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Some(rule) = recovery_rule(item, index, diagnostics) else {
            continue;
        };
        if rules.iter().any(|other| other.id == rule.id) {
            let span = item.get("id").map_or(item.span, |id| id.span);
            diagnostics.push(
                Diagnostic::error("duplicate-rule-id", format!("recovery rule id `{}` is used twice", rule.id))
                    .with_span(span)
                    .with_label("used again here")
                    .with_help("give every rule its own id"),
            );
        }
        rules.push(rule);
    }
    rules
}

fn recovery_rule(node: &Node, index: usize, diagnostics: &mut Vec<Diagnostic>) -> Option<RecoveryRule> {
    let errors_before = error_count(diagnostics);
    let what = format!("`recovery[{index}]`");
    let mut reader = TableReader::new(node, &what, format!(" in {what}"), RECOVERY.keys, diagnostics)?;
    let id = reader.required_string("id", diagnostics).map(|(id, _)| {
        reader.set_context(format!(" in recovery rule `{id}`"));
        id.to_string()
    });
    let rewrite = reader.required_string("rewrite", diagnostics).and_then(|(text, node)| {
        if text.trim().is_empty() || text.chars().count() > MAX_REWRITE_CHARS {
            diagnostics.push(
                Diagnostic::error(
                    "invalid-value",
                    format!("{} must hold 1 to {MAX_REWRITE_CHARS} characters", reader.describe("rewrite")),
                )
                .with_span(node.span)
                .with_label(format!("{} characters", text.chars().count())),
            );
            return None;
        }
        Some(text.to_string())
    });
    let reason = reader.string("reason", diagnostics).map(|(text, _)| text.to_string());
    let has_class = reader.has("when_failure_class");
    let when_failure_class = reader.string("when_failure_class", diagnostics).and_then(|(name, node)| {
        let class = FailureClass::from_name(name);
        if class.is_none() {
            let known = FAILURE_CLASSES.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
            let mut diagnostic = Diagnostic::error("invalid-value", format!("unknown failure class `{name}`"))
                .with_span(node.span)
                .with_help(format!("known classes: {known}"));
            if let Some(suggestion) = did_you_mean(name, FAILURE_CLASSES.iter().copied()) {
                diagnostic = diagnostic.with_label(format!("did you mean `{suggestion}`?"));
            }
            diagnostics.push(diagnostic);
        }
        class
    });
    let has_match = reader.has("match");
    let goal_match = reader
        .string("match", diagnostics)
        .and_then(|(pattern, node)| compile_regex(pattern, false, node, diagnostics));
    if !has_class && !has_match {
        diagnostics.push(
            Diagnostic::error("missing-key", "a recovery rule needs `when_failure_class` or `match`")
                .with_span(node.span)
                .with_label("this rule would match every failure"),
        );
    }
    reader.finish(diagnostics);
    if error_count(diagnostics) > errors_before {
        return None;
    }
    let id = id?;
    let reason = reason.unwrap_or_else(|| format!("recovery rule `{id}`"));
    Some(RecoveryRule { id, when_failure_class, goal_match, rewrite: rewrite?, reason })
}
