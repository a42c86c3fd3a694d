//! The trampoline: the small program (`planrun-sandbox`, src/bin) that
//! planrun starts instead of a step's program. It restricts itself with
//! Landlock as its [`Spec`] says, then replaces itself with the program
//! (`execve`: same pid, same process group, same pipes), which inherits
//! the restriction and can never lift it. No code runs between `fork` and
//! `exec` in planrun itself, so no `unsafe` is needed.
//!
//! Its command line is fixed: `planrun-sandbox -- PROGRAM ARGS…`. It reads
//! no option: a first argument other than `--` is refused, and what
//! follows is the program and its arguments, whatever they look like.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

use super::restrict::restrict;
use super::spec::{PROGRAM_FOLLOWS, SPEC_VAR, Spec};

/// The trampoline's exit code when it cannot restrict itself or read its
/// spec (the program never ran).
pub const SANDBOX_FAILED: u8 = 125;
/// Its exit code when the program cannot be executed.
pub const EXEC_FAILED: u8 = 127;

/// The trampoline's `main`: `args` is its whole command line, `spec` the
/// value of [`SPEC_VAR`].
pub fn trampoline(args: Vec<OsString>, spec: Option<String>) -> ExitCode {
    let mut args = args.into_iter().skip(1);
    if args.next().is_none_or(|first| first != PROGRAM_FOLLOWS) {
        eprintln!("planrun-sandbox: started by planrun only, as `planrun-sandbox -- PROGRAM ARGS…`");
        return ExitCode::from(SANDBOX_FAILED);
    }
    let Some(program) = args.next() else {
        eprintln!("planrun-sandbox: no program after `--`");
        return ExitCode::from(SANDBOX_FAILED);
    };
    let spec = match spec.as_deref().map(serde_json::from_str::<Spec>) {
        Some(Ok(spec)) => spec,
        Some(Err(error)) => {
            eprintln!("planrun-sandbox: unreadable `{SPEC_VAR}`: {error}");
            return ExitCode::from(SANDBOX_FAILED);
        }
        None => {
            eprintln!("planrun-sandbox: no `{SPEC_VAR}`");
            return ExitCode::from(SANDBOX_FAILED);
        }
    };
    if let Err(failure) = restrict(&spec) {
        eprintln!("planrun-sandbox: cannot apply the sandbox: {failure}");
        return ExitCode::from(SANDBOX_FAILED);
    }
    let error = Command::new(&program).args(args).env_remove(SPEC_VAR).exec();
    eprintln!("planrun-sandbox: cannot run {}: {error}", Path::new(&program).display());
    ExitCode::from(EXEC_FAILED)
}
