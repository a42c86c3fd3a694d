//! `planrun-sandbox -- PROGRAM ARGS…`: the trampoline planrun starts
//! instead of a step's program (see `planrun::tools::sandbox`). Not a
//! command a person types.

use std::process::ExitCode;

#[expect(clippy::disallowed_methods, reason = "the trampoline reads its one variable before it executes the program")]
fn main() -> ExitCode {
    let spec = std::env::var(planrun::tools::sandbox::SPEC_VAR).ok();
    planrun::tools::sandbox::trampoline(std::env::args_os().collect(), spec)
}
