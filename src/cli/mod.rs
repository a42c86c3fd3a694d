//! The command line.

use std::process::ExitCode;

/// Entry point called by `main.rs`.
pub fn main() -> ExitCode {
    ExitCode::SUCCESS
}
