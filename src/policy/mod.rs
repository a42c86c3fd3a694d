//! Policy decisions: given a resolved action and a [`crate::model::Policy`],
//! decide `allow` or `forbidden`, naming the rule that decided.

mod evaluate;

pub use evaluate::{
    PathSlots, ShellEvaluation, args_match, display_argv, evaluate_argv, evaluate_shell, evaluate_shell_with,
};
