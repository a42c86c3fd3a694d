//! Policy decisions: given a resolved action and a [`crate::model::Policy`],
//! decide `allow` or `forbidden`, naming the rule that decided.

mod evaluate;

pub use evaluate::{ShellEvaluation, display_argv, evaluate_shell};
