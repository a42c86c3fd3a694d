//! The service policy file (`policies/service/service.toml` by default): the
//! prompt guard, the controller limits and the recovery rewrite rules.
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
//! [decision]                               # decision requests (defaults suit a CPU model)
//! timeout_secs = 60
//! max_tokens = 128
//! temperature = 0.0
//! system_prompt = "…"
//! ```
//!
//! It lives in a sub-folder so that the plan loader, which reads every file
//! of `policies/` as a run policy, never sees it. The validator here reports
//! every finding of the file in one pass (unknown keys with the allowed
//! list, wrong types, bad regexes, out-of-range values) as
//! [`Diagnostic`]s with `file:line:column`. A new key is one entry in the
//! section's allowed list plus one read.

use std::ops::Range;
use std::path::Path;

use regex::Regex;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diagnostic, SourceFile, SourceId, SourceMap, Span};
use crate::model::FailureClass;
use crate::server::decision::settings::DecisionSettings;

/// The longest goal a recovery rule may write (the decision goal limit).
pub const MAX_REWRITE_CHARS: usize = 500;
/// The longest `decision.system_prompt`, in characters.
pub const MAX_SYSTEM_PROMPT_CHARS: usize = 4000;

/// The validated service policy.
#[derive(Debug, Clone)]
pub struct ServicePolicy {
    /// Where it came from (`built-in defaults` when no file was read).
    pub source: String,
    pub guard: GuardRules,
    pub controller: ControllerLimits,
    pub recovery: Vec<RecoveryRule>,
    /// How decision requests are made (`[decision]`).
    pub decision: DecisionSettings,
}

/// Prompt guard rules, checked before anything executes.
#[derive(Debug, Clone)]
pub struct GuardRules {
    pub max_goal_chars: usize,
    pub forbidden_patterns: Vec<Regex>,
}

/// Limits of the controller loop.
#[derive(Debug, Clone, Copy)]
pub struct ControllerLimits {
    pub max_iterations: u32,
    pub max_consecutive_failures: u32,
}

/// A recovery rewrite: when a bridge run fails and the rule matches (every
/// condition it names holds), the controller retries with `rewrite`.
#[derive(Debug, Clone)]
pub struct RecoveryRule {
    pub id: String,
    pub when_failure_class: Option<FailureClass>,
    pub goal_match: Option<Regex>,
    pub rewrite: String,
    pub reason: String,
}

impl RecoveryRule {
    pub fn matches(&self, goal: &str, failure_class: Option<FailureClass>) -> bool {
        let class_ok = self.when_failure_class.is_none_or(|class| Some(class) == failure_class);
        let goal_ok = self.goal_match.as_ref().is_none_or(|regex| regex.is_match(goal));
        class_ok && goal_ok
    }
}

impl Default for ServicePolicy {
    fn default() -> Self {
        ServicePolicy {
            source: "built-in defaults".to_string(),
            guard: GuardRules { max_goal_chars: 2000, forbidden_patterns: Vec::new() },
            controller: ControllerLimits { max_iterations: 3, max_consecutive_failures: 2 },
            recovery: Vec::new(),
            decision: DecisionSettings::default(),
        }
    }
}

/// Reads and validates a service policy file. On failure the findings are
/// in `diagnostics`, with their sources in `sources`.
pub fn load(path: &Path, sources: &mut SourceMap, diagnostics: &mut Vec<Diagnostic>) -> Option<ServicePolicy> {
    let name = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) => {
            diagnostics.push(Diagnostic::error("io-error", format!("cannot read `{name}`: {error}")));
            return None;
        }
    };
    let id = sources.add(SourceFile::new(name.clone(), text.clone()));
    let before = diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count();
    let policy = parse(&text, id, &name, diagnostics);
    let after = diagnostics.iter().filter(|diagnostic| diagnostic.is_error()).count();
    policy.filter(|_| after == before)
}

fn parse(text: &str, id: SourceId, name: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<ServicePolicy> {
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(error) => {
            diagnostics.push(
                Diagnostic::error("syntax-error", first_line(error.message()))
                    .with_span(Span::new(id, error.span().unwrap_or(0..0)))
                    .with_label("invalid TOML"),
            );
            return None;
        }
    };
    let mut reader = Reader { id, diagnostics };
    let mut policy = ServicePolicy { source: name.to_string(), ..ServicePolicy::default() };
    let table = root.get_ref();
    reader.unknown_keys(table, "", &["version", "description", "guard", "controller", "recovery", "decision"]);
    match table.get("version") {
        Some(value) => {
            if let Some(version) = reader.integer(value, "`version`", 1, 1) {
                let _ = version;
            }
        }
        None => reader.error("missing-key", "missing key `version`", root.span(), "`version = 1` is required here"),
    }
    if let Some(value) = table.get("description") {
        reader.string(value, "`description`");
    }
    if let Some(guard) = table.get("guard").and_then(|value| reader.table(value, "`guard`")) {
        reader.unknown_keys(guard, " in `guard`", &["max_goal_chars", "forbidden_patterns"]);
        if let Some(value) = guard.get("max_goal_chars")
            && let Some(max) = reader.integer(value, "`guard.max_goal_chars`", 1, 100_000)
        {
            policy.guard.max_goal_chars = max as usize;
        }
        if let Some(value) = guard.get("forbidden_patterns")
            && let Some(items) = reader.array(value, "`guard.forbidden_patterns`")
        {
            for item in items {
                if let Some(regex) = reader.regex(item, "a forbidden pattern") {
                    policy.guard.forbidden_patterns.push(regex);
                }
            }
        }
    }
    if let Some(controller) = table.get("controller").and_then(|value| reader.table(value, "`controller`")) {
        reader.unknown_keys(controller, " in `controller`", &["max_iterations", "max_consecutive_failures"]);
        if let Some(value) = controller.get("max_iterations")
            && let Some(max) = reader.integer(value, "`controller.max_iterations`", 1, 20)
        {
            policy.controller.max_iterations = max as u32;
        }
        if let Some(value) = controller.get("max_consecutive_failures")
            && let Some(max) = reader.integer(value, "`controller.max_consecutive_failures`", 1, 20)
        {
            policy.controller.max_consecutive_failures = max as u32;
        }
    }
    if let Some(decision) = table.get("decision").and_then(|value| reader.table(value, "`decision`")) {
        reader.decision(decision, &mut policy.decision);
    }
    if let Some(value) = table.get("recovery")
        && let Some(items) = reader.array(value, "`recovery`")
    {
        for item in items {
            if let Some(rule) = reader.recovery_rule(item) {
                if policy.recovery.iter().any(|other| other.id == rule.id) {
                    reader.error(
                        "duplicate-rule-id",
                        format!("recovery rule id `{}` is used twice", rule.id),
                        item.span(),
                        "give every rule its own id",
                    );
                }
                policy.recovery.push(rule);
            }
        }
    }
    Some(policy)
}

fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or("invalid TOML").trim().trim_end_matches('.');
    let mut chars = line.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => "invalid TOML".to_string(),
    }
}

type Value<'a> = Spanned<DeValue<'a>>;

struct Reader<'d> {
    id: SourceId,
    diagnostics: &'d mut Vec<Diagnostic>,
}

impl Reader<'_> {
    fn error(&mut self, code: &'static str, message: impl Into<String>, span: Range<usize>, label: &str) {
        self.diagnostics.push(Diagnostic::error(code, message).with_span(Span::new(self.id, span)).with_label(label));
    }

    fn wrong_type(&mut self, value: &Value<'_>, what: &str, expected: &str) {
        let found = match value.get_ref() {
            DeValue::String(_) => "a string",
            DeValue::Integer(_) => "an integer",
            DeValue::Float(_) => "a float",
            DeValue::Boolean(_) => "a boolean",
            DeValue::Datetime(_) => "a datetime",
            DeValue::Array(_) => "an array",
            DeValue::Table(_) => "a table",
        };
        self.error(
            "wrong-type",
            format!("{what} must be {expected}, found {found}"),
            value.span(),
            &format!("expected {expected}"),
        );
    }

    fn unknown_keys(&mut self, table: &DeTable<'_>, context: &str, allowed: &[&str]) {
        let list = allowed.iter().map(|key| format!("`{key}`")).collect::<Vec<_>>().join(", ");
        for key in table.keys() {
            if !allowed.contains(&key.get_ref().as_ref()) {
                self.diagnostics.push(
                    Diagnostic::error("unknown-key", format!("unknown key `{}`{context}", key.get_ref()))
                        .with_span(Span::new(self.id, key.span()))
                        .with_help(format!("allowed keys: {list}")),
                );
            }
        }
    }

    fn table<'v, 'a>(&mut self, value: &'v Value<'a>, what: &str) -> Option<&'v DeTable<'a>> {
        match value.get_ref() {
            DeValue::Table(table) => Some(table),
            _ => {
                self.wrong_type(value, what, "a table");
                None
            }
        }
    }

    fn array<'v, 'a>(&mut self, value: &'v Value<'a>, what: &str) -> Option<&'v [Value<'a>]> {
        match value.get_ref() {
            DeValue::Array(items) => Some(items),
            _ => {
                self.wrong_type(value, what, "an array");
                None
            }
        }
    }

    fn string<'v>(&mut self, value: &'v Value<'_>, what: &str) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(text) => Some(text),
            _ => {
                self.wrong_type(value, what, "a string");
                None
            }
        }
    }

    fn integer(&mut self, value: &Value<'_>, what: &str, min: i64, max: i64) -> Option<i64> {
        let DeValue::Integer(integer) = value.get_ref() else {
            self.wrong_type(value, what, "an integer");
            return None;
        };
        match i64::from_str_radix(integer.as_str(), integer.radix()) {
            Ok(number) if (min..=max).contains(&number) => Some(number),
            _ => {
                self.error(
                    "invalid-value",
                    format!("{what} must be between {min} and {max}"),
                    value.span(),
                    "out of range",
                );
                None
            }
        }
    }

    fn regex(&mut self, value: &Value<'_>, what: &str) -> Option<Regex> {
        let pattern = self.string(value, what)?;
        match Regex::new(pattern) {
            Ok(regex) => Some(regex),
            Err(error) => {
                let message = error.to_string();
                let last = message.lines().last().unwrap_or("invalid regex").trim().to_string();
                self.error("invalid-regex", format!("{what} is not a valid regex: {last}"), value.span(), "here");
                None
            }
        }
    }

    /// `[decision]`: the settings of decision requests.
    fn decision(&mut self, table: &DeTable<'_>, settings: &mut DecisionSettings) {
        self.unknown_keys(table, " in `decision`", &["timeout_secs", "max_tokens", "temperature", "system_prompt"]);
        if let Some(value) = table.get("timeout_secs")
            && let Some(secs) = self.integer(value, "`decision.timeout_secs`", 1, 3600)
        {
            settings.timeout = std::time::Duration::from_secs(secs as u64);
        }
        if let Some(value) = table.get("max_tokens")
            && let Some(tokens) = self.integer(value, "`decision.max_tokens`", 16, 4096)
        {
            settings.max_tokens = tokens as u32;
        }
        if let Some(value) = table.get("temperature") {
            let number = match value.get_ref() {
                DeValue::Float(float) => float.as_str().replace('_', "").parse::<f64>().ok(),
                DeValue::Integer(integer) => {
                    i64::from_str_radix(integer.as_str(), integer.radix()).ok().map(|n| n as f64)
                }
                _ => {
                    self.wrong_type(value, "`decision.temperature`", "a number");
                    return;
                }
            };
            match number {
                Some(temperature) if (0.0..=2.0).contains(&temperature) => settings.temperature = temperature,
                _ => self.error(
                    "invalid-value",
                    "`decision.temperature` must be between 0.0 and 2.0",
                    value.span(),
                    "out of range",
                ),
            }
        }
        if let Some(value) = table.get("system_prompt")
            && let Some(text) = self.string(value, "`decision.system_prompt`")
        {
            if text.trim().is_empty() || text.chars().count() > MAX_SYSTEM_PROMPT_CHARS {
                self.error(
                    "invalid-value",
                    format!("`decision.system_prompt` must hold 1 to {MAX_SYSTEM_PROMPT_CHARS} characters"),
                    value.span(),
                    "here",
                );
            } else {
                settings.system_prompt = text.to_string();
            }
        }
    }

    fn recovery_rule(&mut self, value: &Value<'_>) -> Option<RecoveryRule> {
        let table = self.table(value, "a `[[recovery]]` entry")?;
        self.unknown_keys(table, " in `[[recovery]]`", &["id", "when_failure_class", "match", "rewrite", "reason"]);
        let required = |reader: &mut Self, key: &str| {
            let found = table.get(key);
            if found.is_none() {
                reader.error(
                    "missing-key",
                    format!("missing key `{key}` in `[[recovery]]`"),
                    value.span(),
                    &format!("`{key}` is required here"),
                );
            }
            found
        };
        let id = required(self, "id").and_then(|node| self.string(node, "`recovery.id`")).map(str::to_string);
        let rewrite =
            required(self, "rewrite").and_then(|node| self.string(node, "`recovery.rewrite`")).map(str::to_string);
        if let (Some(text), Some(node)) = (&rewrite, table.get("rewrite"))
            && (text.trim().is_empty() || text.chars().count() > MAX_REWRITE_CHARS)
        {
            self.error(
                "invalid-value",
                format!("`recovery.rewrite` must hold 1 to {MAX_REWRITE_CHARS} characters"),
                node.span(),
                "here",
            );
        }
        let reason = match table.get("reason") {
            Some(node) => self.string(node, "`recovery.reason`").map(str::to_string),
            None => None,
        };
        let when_failure_class = match table.get("when_failure_class") {
            Some(node) => {
                let name = self.string(node, "`recovery.when_failure_class`")?;
                let class = FailureClass::ALL.into_iter().find(|class| class.as_str() == name);
                if class.is_none() {
                    let known = FailureClass::ALL.map(|class| format!("`{}`", class.as_str())).join(", ");
                    self.diagnostics.push(
                        Diagnostic::error("invalid-value", format!("unknown failure class `{name}`"))
                            .with_span(Span::new(self.id, node.span()))
                            .with_help(format!("known classes: {known}")),
                    );
                }
                class
            }
            None => None,
        };
        let goal_match = match table.get("match") {
            Some(node) => self.regex(node, "`recovery.match`"),
            None => None,
        };
        if !table.contains_key("when_failure_class") && !table.contains_key("match") {
            self.error(
                "missing-key",
                "a recovery rule needs `when_failure_class` or `match`",
                value.span(),
                "this rule would match every failure",
            );
        }
        let id = id?;
        let rewrite = rewrite?;
        let reason = reason.unwrap_or_else(|| format!("recovery rule `{id}`"));
        Some(RecoveryRule { id, when_failure_class, goal_match, rewrite, reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::render_all;

    fn check(text: &str) -> (Option<ServicePolicy>, String) {
        let temp = tempfile::tempdir().expect("temp dir");
        let path = temp.path().join("service.toml");
        std::fs::write(&path, text).expect("write");
        let mut sources = SourceMap::new();
        let mut diagnostics = Vec::new();
        let policy = load(&path, &mut sources, &mut diagnostics);
        let rendered = render_all(&sources, &diagnostics).replace(&path.display().to_string(), "service.toml");
        (policy, rendered)
    }

    #[test]
    fn the_shipped_service_policy_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/service/service.toml");
        let mut sources = SourceMap::new();
        let mut diagnostics = Vec::new();
        let policy = load(&path, &mut sources, &mut diagnostics).expect("valid");
        assert!(diagnostics.is_empty());
        assert_eq!(policy.controller.max_iterations, 3);
        assert_eq!(policy.controller.max_consecutive_failures, 2);
        assert!(!policy.guard.forbidden_patterns.is_empty());
        assert!(policy.recovery[0].matches("test flow bad template", Some(FailureClass::TemplateError)));
        assert!(!policy.recovery[0].matches("test flow bad template", Some(FailureClass::SecurityDenied)));
    }

    #[test]
    fn every_finding_of_a_bad_file_is_reported() {
        let (policy, rendered) = check(
            "version = 2\nextra = 1\n[guard]\nmax_goal_chars = 0\nforbidden_patterns = [\"(\"]\n\
             [controller]\nmax_iterations = \"3\"\n[[recovery]]\nid = \"a\"\nwhen_failure_class = \"nope\"\n\
             rewrite = \"x\"\n[[recovery]]\nid = \"b\"\nrewrite = \"y\"\n",
        );
        assert!(policy.is_none());
        for expected in [
            "`version` must be between 1 and 1",
            "unknown key `extra`",
            "`guard.max_goal_chars` must be between 1 and 100000",
            "a forbidden pattern is not a valid regex",
            "`controller.max_iterations` must be an integer, found a string",
            "unknown failure class `nope`",
            "a recovery rule needs `when_failure_class` or `match`",
            "service.toml:1:11",
        ] {
            assert!(rendered.contains(expected), "missing {expected:?} in:\n{rendered}");
        }
    }

    #[test]
    fn decision_settings_are_read_and_checked() {
        let (policy, rendered) = check(
            "version = 1\n[decision]\ntimeout_secs = 300\nmax_tokens = 64\ntemperature = 0.2\nsystem_prompt = \"decide\"\n",
        );
        assert_eq!(rendered, "");
        let decision = policy.expect("valid").decision;
        assert_eq!(decision.timeout, std::time::Duration::from_secs(300));
        assert_eq!((decision.max_tokens, decision.temperature, decision.system_prompt.as_str()), (64, 0.2, "decide"));
        let (policy, rendered) = check(
            "version = 1\n[decision]\ntimeout_secs = 0\nmax_tokens = 8\ntemperature = 3\nsystem_prompt = \" \"\nseed = 1\n",
        );
        assert!(policy.is_none());
        for expected in [
            "`decision.timeout_secs` must be between 1 and 3600",
            "`decision.max_tokens` must be between 16 and 4096",
            "`decision.temperature` must be between 0.0 and 2.0",
            "`decision.system_prompt` must hold 1 to 4000 characters",
            "unknown key `seed` in `decision`",
        ] {
            assert!(rendered.contains(expected), "missing {expected:?} in:\n{rendered}");
        }
    }

    #[test]
    fn a_minimal_file_takes_the_defaults() {
        let (policy, rendered) = check("version = 1\n");
        let policy = policy.expect("valid");
        assert_eq!(rendered, "");
        assert_eq!(policy.guard.max_goal_chars, 2000);
        assert_eq!(policy.controller.max_iterations, 3);
        assert!(policy.recovery.is_empty());
        assert_eq!(policy.decision, DecisionSettings::default());
    }
}
