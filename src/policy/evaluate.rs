//! Shell decisions. (Being implemented.)
pub struct ShellEvaluation;
pub fn evaluate_shell() {}
