//! The operating-system sandbox around every program a step starts
//! (docs/effects-sandbox.md).
//!
//! On Linux with Landlock, planrun does not start a step's program itself
//! but the trampoline (`planrun-sandbox`, installed next to `planrun`; see
//! `trampoline.rs`), which restricts itself and then executes the program:
//! it may read the system folders and the workspace, change only the
//! workspace's own folders and files (never `runs/`, `bridge/`,
//! `.planrun/`, `.git/` or what `files.deny` names at the top of the
//! workspace) and a private temporary folder (its `TMPDIR`, removed after
//! the step), and use no network unless its rule allows it. The rules, as
//! the trampoline receives them, are a [`Spec`].
//!
//! [`support`] says once per process what the kernel offers (the
//! documented test switch [`SIMULATE_VAR`] makes it report a kernel
//! without Landlock); [`prepare`] turns one program's request into a
//! [`Prepared`] launch and the facts its record keeps; [`command_for`] is
//! the same for a long-running program (an MCP server), returning the
//! `std::process::Command` to spawn.

mod spec;
mod trampoline;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use landlock::{LandlockStatus, RestrictSelf};
use tempfile::TempDir;

pub use spec::{PROGRAM_FOLLOWS, SPEC_VAR, Spec, SpecNetwork};
pub use trampoline::{EXEC_FAILED, SANDBOX_FAILED, trampoline};

use crate::confine::{Workspace, readable_protected};
use crate::model::{NetworkAccess, SandboxFacts, SandboxMode, ShellPolicy};

/// The documented test switch: `PLANRUN_SANDBOX_SIMULATE=no-landlock`
/// makes planrun behave as on a kernel without Landlock.
pub const SIMULATE_VAR: &str = "PLANRUN_SANDBOX_SIMULATE";
/// The one value [`SIMULATE_VAR`] takes.
pub const SIMULATE_NO_LANDLOCK: &str = "no-landlock";
/// The trampoline's file name, next to `planrun`.
pub const TRAMPOLINE: &str = "planrun-sandbox";
/// The first Landlock ABI with TCP rules.
pub const NETWORK_ABI: u32 = 4;

/// Read and execute, beneath: where programs, their libraries and the
/// machine's configuration live (plus the policy's `search_path`).
const SYSTEM: [&str; 10] = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys"];
/// Devices a program may open for reading and writing.
const DEVICES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// What the kernel (and this installation) offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock at this ABI version, and the trampoline to apply it.
    Landlock { abi: u32, trampoline: PathBuf },
    /// No sandbox can be applied, and why (a sentence's end: "the kernel
    /// has no Landlock").
    Missing(String),
}

static SIMULATED: OnceLock<()> = OnceLock::new();

/// From now on this process behaves as on a kernel without Landlock (the
/// front end calls it when [`SIMULATE_VAR`] is `no-landlock`).
pub fn simulate_no_landlock() {
    let _ = SIMULATED.set(());
}

/// What this process can apply: asked of the kernel once.
pub fn support() -> Support {
    static PROBED: OnceLock<Support> = OnceLock::new();
    if SIMULATED.get().is_some() {
        return Support::Missing(format!(
            "the kernel has no Landlock (simulated: {SIMULATE_VAR}={SIMULATE_NO_LANDLOCK})"
        ));
    }
    PROBED.get_or_init(probe).clone()
}

fn probe() -> Support {
    // No flag and no `no_new_privs`: asks the kernel's ABI version and
    // restricts nothing.
    let status = RestrictSelf::default().no_new_privs(false).apply().map(|status| status.landlock);
    let abi = match status {
        Ok(LandlockStatus::Available { effective_abi, kernel_abi }) => {
            kernel_abi.and_then(|abi| u32::try_from(abi).ok()).unwrap_or(effective_abi as u32)
        }
        Ok(LandlockStatus::NotEnabled) => return Support::Missing("Landlock is not enabled in the kernel".into()),
        Ok(LandlockStatus::NotImplemented) | Err(_) => return Support::Missing("the kernel has no Landlock".into()),
    };
    match find_trampoline() {
        Some(trampoline) => Support::Landlock { abi, trampoline },
        None => Support::Missing(format!("`{TRAMPOLINE}` is not installed next to planrun")),
    }
}

/// `planrun-sandbox` next to this executable, or one folder up (Cargo's
/// test binaries live in `target/<profile>/deps/`).
fn find_trampoline() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [Some(dir), dir.parent()].into_iter().flatten().map(|dir| dir.join(TRAMPOLINE)).find(|path| path.is_file())
}

/// Why a run must not start under `shell`: it requires a sandbox
/// (`require_sandbox`) this process cannot apply in full. `None` when it
/// may run.
pub fn refusal(shell: &ShellPolicy) -> Option<String> {
    if !shell.require_sandbox {
        return None;
    }
    let why = match support() {
        Support::Missing(why) => why,
        Support::Landlock { abi, .. } if abi < NETWORK_ABI => {
            format!("the kernel's Landlock ABI {abi} cannot restrict network connections (ABI {NETWORK_ABI} can)")
        }
        Support::Landlock { .. } => return None,
    };
    Some(format!("the policy requires a sandbox (`shell.require_sandbox = true`), but {why}"))
}

/// One program to confine.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The policy's `shell` section (`sandbox`, `require_sandbox`,
    /// `search_path`).
    pub shell: &'a ShellPolicy,
    pub workspace: &'a Workspace,
    /// The program's canonical path.
    pub program: &'a Path,
    pub network: &'a NetworkAccess,
}

/// A sandbox that cannot be applied where the policy requires one.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{0}")]
    Required(String),
    #[error("cannot prepare the sandbox: {0}")]
    Io(#[from] io::Error),
}

/// How one program starts: through the trampoline, or (`launch` is
/// `None`) unconfined; `facts` is what its record says.
#[derive(Debug)]
pub struct Prepared {
    pub launch: Option<Launch>,
    pub facts: SandboxFacts,
}

/// The trampoline, its spec and the step's temporary folder (removed when
/// this is dropped).
#[derive(Debug)]
pub struct Launch {
    trampoline: PathBuf,
    spec: String,
    tmp: TempDir,
}

impl Launch {
    /// The command that runs `program` with `args` and exactly `env` (plus
    /// `TMPDIR`) under the sandbox.
    pub fn command(&self, program: &Path, args: &[String], env: &BTreeMap<String, String>) -> Command {
        let mut command = Command::new(&self.trampoline);
        command
            .arg(PROGRAM_FOLLOWS)
            .arg(program)
            .args(args)
            .env_clear()
            .envs(env)
            .env("TMPDIR", self.tmp.path())
            .env(SPEC_VAR, &self.spec);
        command
    }

    /// The step's private temporary folder.
    pub fn temp_dir(&self) -> &Path {
        self.tmp.path()
    }
}

/// How `request`'s program starts, and what its record says of it.
pub fn prepare(request: &Request<'_>) -> Result<Prepared, SandboxError> {
    let unconfined =
        |why: String| SandboxFacts { kind: SandboxMode::None, abi: None, unconfined: Some(why), network: None };
    if request.shell.sandbox == SandboxMode::None {
        return Ok(Prepared { launch: None, facts: unconfined("policy".into()) });
    }
    if let Some(refused) = refusal(request.shell) {
        return Err(SandboxError::Required(refused));
    }
    let (abi, trampoline) = match support() {
        Support::Landlock { abi, trampoline } => (abi, trampoline),
        Support::Missing(why) => return Ok(Prepared { launch: None, facts: unconfined(why) }),
    };
    let tmp = tempfile::Builder::new().prefix("planrun-step-").tempdir()?;
    let spec = spec_for(request, tmp.path())?;
    let network = match request.network {
        NetworkAccess::On => "on".to_string(),
        _ if abi < NETWORK_ABI => format!("unconfined (Landlock ABI {abi} has no network rules)"),
        NetworkAccess::Off => "off".to_string(),
        NetworkAccess::Ports(ports) => {
            format!("ports {}", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", "))
        }
    };
    let facts = SandboxFacts { kind: SandboxMode::Landlock, abi: Some(abi), unconfined: None, network: Some(network) };
    let spec = serde_json::to_string(&spec).map_err(io::Error::other)?;
    Ok(Prepared { launch: Some(Launch { trampoline, spec, tmp }), facts })
}

/// A long-running program (an MCP server) started under the sandbox, as a
/// shell step's program is: the command to spawn (its working directory,
/// stdio and process group are the caller's), what its record says, and
/// the temporary folder, which must outlive the program.
#[derive(Debug)]
pub struct Sandboxed {
    pub command: Command,
    pub facts: SandboxFacts,
    /// The trampoline's launch, holding the temporary folder (`None`
    /// when unconfined): keep it until the program has ended.
    pub temp: Option<Launch>,
}

/// The `std::process::Command` that runs `request`'s program with `args`
/// and exactly `env` under the sandbox (or unconfined where the policy or
/// the kernel says so, as [`prepare`] decides).
pub fn command_for(
    request: &Request<'_>,
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<Sandboxed, SandboxError> {
    let prepared = prepare(request)?;
    let command = match &prepared.launch {
        Some(launch) => launch.command(request.program, args, env),
        None => {
            let mut command = Command::new(request.program);
            command.args(args).env_clear().envs(env);
            command
        }
    };
    Ok(Sandboxed { command, facts: prepared.facts, temp: prepared.launch })
}

/// The rules for `request`, its temporary folder being `tmp`.
fn spec_for(request: &Request<'_>, tmp: &Path) -> io::Result<Spec> {
    let mut system: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    system.extend(request.shell.search_path.iter().cloned());
    // The program's installation (`…/versions/3.11/bin/python3` →
    // `…/versions/3.11`): its libraries live beside its `bin/`.
    if let Some(folder) = request.program.parent() {
        let prefix = folder.file_name().is_some_and(|name| name == "bin").then(|| folder.parent()).flatten();
        system.push(prefix.unwrap_or(folder).to_path_buf());
    }
    let root = request.workspace.root();
    let mut spec = Spec {
        system,
        devices: DEVICES.iter().map(PathBuf::from).collect(),
        list: vec![root.to_path_buf()],
        read: Vec::new(),
        write: vec![tmp.to_path_buf()],
        network: match request.network {
            NetworkAccess::Off => SpecNetwork::Off,
            NetworkAccess::On => SpecNetwork::On,
            NetworkAccess::Ports(ports) => SpecNetwork::Ports(ports.clone()),
        },
    };
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        // Never through a symbolic link: its target is confined by its own
        // place, inside the workspace or not.
        if entry.file_type()?.is_symlink() {
            continue;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        match request.workspace.check_path(&name) {
            Ok(_) => spec.write.push(entry.path()),
            Err(_) if readable_protected(&name) => spec.read.push(entry.path()),
            Err(_) => {}
        }
    }
    Ok(spec)
}
