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
use std::fmt;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::fs::{FileType, Mode, OFlags};

use super::spec::{PROGRAM_FOLLOWS, SPEC_VAR, Spec, SpecNetwork};

/// The newest ABI this trampoline asks for; the `landlock` crate lowers it
/// to what the running kernel has.
const TARGET: ABI = ABI::V10;

/// The trampoline's exit code when it cannot restrict itself or read its
/// spec (the program never ran).
pub const SANDBOX_FAILED: u8 = 125;
/// Its exit code when the program cannot be executed.
pub const EXEC_FAILED: u8 = 127;

/// Why the sandbox could not be applied.
#[derive(Debug)]
struct Failure(String);

impl fmt::Display for Failure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(error: E) -> Failure {
        Failure(error.to_string())
    }
}

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

/// Restricts this process (and everything it will run) as `spec` says.
/// Landlock must be enforced at least in part: planrun only starts the
/// trampoline where it found Landlock in the kernel.
fn restrict(spec: &Spec) -> Result<(), Failure> {
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(TARGET))?;
    let network = match &spec.network {
        SpecNetwork::On => BitFlags::EMPTY,
        SpecNetwork::Off => AccessNet::from_all(TARGET),
        SpecNetwork::Ports(_) => AccessNet::BindTcp | AccessNet::ConnectTcp,
    };
    if !network.is_empty() {
        ruleset = ruleset.handle_access(network)?;
    }
    // Signals and abstract UNIX sockets reach only processes of the same
    // sandbox (planrun itself is outside it).
    let mut created = ruleset.scope(Scope::from_all(TARGET))?.create()?;
    for path in &spec.system {
        // Symbolic links followed (`/lib` → `usr/lib`); a folder this
        // machine lacks is left out.
        if let Ok(fd) = PathFd::new(path) {
            created = created.add_rule(PathBeneath::new(fd, AccessFs::from_read(TARGET)))?;
        }
    }
    for path in &spec.devices {
        if let Ok(fd) = PathFd::new(path) {
            created = created.add_rule(PathBeneath::new(fd, AccessFs::from_file(TARGET)))?;
        }
    }
    created = add(created, &spec.list, AccessFs::ReadDir.into())?;
    created = add(created, &spec.read, AccessFs::from_read(TARGET))?;
    created = add(created, &spec.write, AccessFs::from_all(TARGET))?;
    if let SpecNetwork::Ports(ports) = &spec.network {
        for port in ports {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    let status = created.set_compatibility(CompatLevel::BestEffort).restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(Failure("the kernel enforces no Landlock rule".to_string()));
    }
    Ok(())
}

/// Adds a rule for each path that is there and is not a symbolic link
/// (opened without following one, so a link planted since planrun looked
/// cannot widen the rule).
fn add(
    mut created: RulesetCreated,
    paths: &[std::path::PathBuf],
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, Failure> {
    for path in paths {
        let Some(fd) = open_here(path) else { continue };
        created = created.add_rule(PathBeneath::new(fd, access))?;
    }
    Ok(created)
}

fn open_here(path: &Path) -> Option<OwnedFd> {
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    (FileType::from_raw_mode(stat.st_mode) != FileType::Symlink).then_some(fd)
}
