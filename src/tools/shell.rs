//! `shell`. (Being implemented.)

use crate::model::ShellPolicy;

/// Resolves bare program names from the policy's search path, once per run.
pub struct ProgramResolver;

impl ProgramResolver {
    pub fn new(_policy: &ShellPolicy) -> Self {
        ProgramResolver
    }
}

pub fn run_shell() {}
