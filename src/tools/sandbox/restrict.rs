//! Landlock as a [`Spec`] says, applied to the calling thread (and so to
//! every process it starts afterwards, which inherits the thread's
//! credentials). planrun calls [`restrict`] on a short-lived thread of its
//! own that then spawns the step's program (see `Launch::spawn`); the
//! trampoline (`trampoline.rs`) calls it on its only thread before it
//! executes the program.

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};
use rustix::fs::{FileType, Mode, OFlags};

use super::spec::{Spec, SpecNetwork};

/// The newest ABI asked for; the `landlock` crate lowers it to what the
/// running kernel has.
const TARGET: ABI = ABI::V10;

/// Why the sandbox could not be applied.
#[derive(Debug)]
pub struct Failure(String);

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

/// Restricts the calling thread (and everything it will start) as `spec` says.
/// Landlock must be enforced at least in part: planrun only starts the
/// trampoline where it found Landlock in the kernel.
pub fn restrict(spec: &Spec) -> Result<(), Failure> {
    // The mounts first: under Landlock the thread may not change them.
    if let Some(isolation) = &spec.isolation {
        super::namespace::isolate(isolation)?;
    }
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
    if let Some(isolation) = &spec.isolation {
        created = add(created, std::slice::from_ref(&isolation.workspace), AccessFs::from_all(TARGET))?;
    }
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
