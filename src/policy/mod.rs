//! Policy decisions: given a resolved action and a [`crate::model::Policy`],
//! decide `allow` or `forbidden`, naming the rule that decided.

mod evaluate;
mod http;

pub use evaluate::{
    PathSlots, ShellEvaluation, args_match, display_argv, evaluate_argv, evaluate_shell, evaluate_shell_with,
};
pub use http::{HttpEvaluation, HttpTarget, evaluate_http, evaluate_http_url, restricted_address, rule_matches};
