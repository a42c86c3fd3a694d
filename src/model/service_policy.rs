//! A validated service policy: the prompt guard, the controller limits and
//! the recovery rewrite rules of `planrun serve`. The only way to get one
//! from a file is `crate::load::Loader::load_service_policy`; without a file
//! the service runs on [`ServicePolicy::default`].

use regex::Regex;

use crate::model::FailureClass;

/// The longest goal a recovery rule may write (the decision goal limit).
pub const MAX_REWRITE_CHARS: usize = 500;

/// The validated service policy.
#[derive(Debug, Clone)]
pub struct ServicePolicy {
    /// Where it came from, as shown to users (`built-in defaults` when no
    /// file was read).
    pub source: String,
    pub guard: GuardRules,
    pub controller: ControllerLimits,
    pub recovery: Vec<RecoveryRule>,
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

/// The defaults, also of every key a file leaves out.
impl Default for ServicePolicy {
    fn default() -> Self {
        ServicePolicy {
            source: "built-in defaults".to_string(),
            guard: GuardRules { max_goal_chars: 2000, forbidden_patterns: Vec::new() },
            controller: ControllerLimits { max_iterations: 3, max_consecutive_failures: 2 },
            recovery: Vec::new(),
        }
    }
}
