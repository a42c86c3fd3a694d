//! The operating-system sandbox around every program a step starts
//! (docs/effects-sandbox.md).
//!
//! On Linux with Landlock, planrun starts a shell step's program from a
//! short-lived thread of its own that first restricts itself with Landlock
//! (`restrict.rs`; a thread's restriction is its own, and the program
//! inherits it); a long-running program (an MCP server), and every program
//! where a user namespace is needed (below), starts through the trampoline
//! (`planrun-sandbox`, installed next to `planrun`; `trampoline.rs`), which
//! restricts itself the same way and then executes the program. The
//! program may read the system folders and the workspace, change the
//! workspace (never `runs/`, `bridge/`, `.planrun/`, `.git/` or what
//! `files.deny` names at the top of the workspace) and a private temporary
//! folder (its `TMPDIR`, emptied after the step), and use no network
//! unless its rule allows it. The rules are a [`Spec`].
//!
//! The workspace's top level: where a mount namespace can be made
//! ([`top_level`]), the program gets the whole workspace, with its
//! protected entries covered in a mount namespace of its own
//! (`namespace.rs`); elsewhere only the workspace's own entries, each with
//! a rule, and the top level stays read-only.
//!
//! [`support`] says once per process what the kernel offers (the
//! documented test switch [`SIMULATE_VAR`] makes it report a kernel
//! without Landlock, or no mount namespace); [`prepare`] turns one
//! program's request into a [`Prepared`] launch and the facts its record
//! keeps; [`command_for`] is the same for a long-running program (an MCP
//! server), returning the `std::process::Command` to spawn.

mod namespace;
mod restrict;
mod spec;
mod temp;
mod top;
mod trampoline;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock};

use landlock::{LandlockStatus, RestrictSelf};
use tempfile::TempDir;

pub use spec::{Isolation, PROGRAM_FOLLOWS, SPEC_VAR, Spec, SpecNetwork};
pub use temp::remove_spare_temp_folders;
pub use top::{SIMULATE_NO_NAMESPACE, TopLevel, simulate_no_namespace, top_level};
pub use trampoline::{EXEC_FAILED, SANDBOX_FAILED, trampoline};

use crate::confine::{Workspace, readable_protected};
use crate::model::{NetworkAccess, SandboxFacts, SandboxMode, ShellPolicy};

/// The documented test switch: `PLANRUN_SANDBOX_SIMULATE=no-landlock`
/// makes planrun behave as on a kernel without Landlock, and
/// `no-mount-namespace` as where no mount namespace can be made (the
/// workspace's top level stays read-only).
pub const SIMULATE_VAR: &str = "PLANRUN_SANDBOX_SIMULATE";
/// The one value [`SIMULATE_VAR`] takes.
pub const SIMULATE_NO_LANDLOCK: &str = "no-landlock";
/// The trampoline's file name, next to `planrun`.
pub const TRAMPOLINE: &str = "planrun-sandbox";
/// The first Landlock ABI with TCP rules.
pub const NETWORK_ABI: u32 = 4;

/// Read and execute, beneath: where programs, their libraries and the
/// machine's configuration live (plus the policy's `search_path`).
pub(crate) const SYSTEM: [&str; 10] =
    ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/proc", "/sys"];
/// Devices a program may open for reading and writing.
pub(crate) const DEVICES: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

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

/// The rules of one program's sandbox and its temporary folder: emptied
/// when this is dropped and kept for the next step of this process
/// ([`remove_spare_temp_folders`] removes them), or removed, for a
/// long-running program's ([`command_for`]).
#[derive(Debug)]
pub struct Launch {
    spec: Spec,
    tmp: Option<TempDir>,
    reuse: bool,
    trampoline: PathBuf,
    /// Started through the trampoline (a user namespace needs a process of
    /// one thread), not on a thread of planrun.
    via_trampoline: bool,
    /// The protected names at the workspace's top level when the program
    /// started (see [`Launch::planted`]).
    protected_before: Vec<String>,
}

impl Drop for Launch {
    fn drop(&mut self) {
        let Some(tmp) = self.tmp.take() else { return };
        if self.reuse {
            temp::keep(tmp);
        }
    }
}

impl Launch {
    /// The command that runs `program` with `args` and exactly `env` (plus
    /// `TMPDIR`); start it with [`Launch::spawn`], which confines it.
    pub fn command(&self, program: &Path, args: &[String], env: &BTreeMap<String, String>) -> io::Result<Command> {
        if self.via_trampoline {
            return self.trampoline_command(program, args, env);
        }
        let mut command = Command::new(program);
        // `PLANRUN_SANDBOX_SPEC` is the trampoline's alone: never passed on.
        command.args(args).env_clear().envs(env).env_remove(SPEC_VAR).env("TMPDIR", self.temp_dir());
        Ok(command)
    }

    /// The command that runs `program` the other way: through the
    /// trampoline, for a caller that spawns the command itself (a
    /// long-running program: [`command_for`]). The spec travels as JSON in
    /// [`SPEC_VAR`], set last, so nothing in `env` replaces it.
    pub fn trampoline_command(
        &self,
        program: &Path,
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> io::Result<Command> {
        let spec = serde_json::to_string(&self.spec).map_err(io::Error::other)?;
        let mut command = Command::new(&self.trampoline);
        command
            .arg(PROGRAM_FOLLOWS)
            .arg(program)
            .args(args)
            .env_clear()
            .envs(env)
            .env("TMPDIR", self.temp_dir())
            .env(SPEC_VAR, spec);
        Ok(command)
    }

    /// Starts `command` confined: on a new thread of this process that
    /// restricts itself with Landlock (a thread's restriction is its own:
    /// planrun's other threads stay as they are) and then spawns the
    /// program, which inherits the restriction with the thread's
    /// credentials and can never lift it. No code of planrun runs in the
    /// child between `fork` and `exec`, and no second program is executed.
    pub fn spawn(&self, command: &mut Command) -> io::Result<Child> {
        if self.via_trampoline {
            return command.spawn();
        }
        std::thread::scope(|scope| {
            let confined = std::thread::Builder::new().name("planrun-sandbox".into()).spawn_scoped(scope, || {
                restrict::restrict(&self.spec)
                    .map_err(|failure| io::Error::other(format!("cannot apply the sandbox: {failure}")))?;
                command.spawn()
            })?;
            confined.join().unwrap_or_else(|_| Err(io::Error::other("the sandbox's thread panicked")))
        })
    }

    /// Protected entries the program created at the workspace's top level
    /// (only possible where it could change the top level): their names,
    /// each one removed but for planrun's own folders. Call it after the
    /// program (and its process group) ended.
    pub fn planted(&self, workspace: &Workspace) -> Vec<String> {
        if self.spec.isolation.is_none() {
            return Vec::new();
        }
        top::remove_planted(workspace, &self.protected_before)
    }

    /// The step's private temporary folder.
    pub fn temp_dir(&self) -> &Path {
        self.tmp.as_ref().map_or(Path::new(""), TempDir::path)
    }
}

/// How `request`'s program starts, and what its record says of it.
pub fn prepare(request: &Request<'_>) -> Result<Prepared, SandboxError> {
    prepare_with(request, true)
}

/// [`prepare`]; `reuse`: the temporary folder is a spare one and is kept,
/// emptied, for the next program (else new, and removed after).
fn prepare_with(request: &Request<'_>, reuse: bool) -> Result<Prepared, SandboxError> {
    let unconfined = |why: String| SandboxFacts {
        kind: SandboxMode::None,
        abi: None,
        unconfined: Some(why),
        network: None,
        top_level: None,
    };
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
    let tmp = if reuse { temp::spare_or_new()? } else { temp::new_folder()? };
    let top = top::top_level(&trampoline);
    let (spec, protected_before) = spec_for(request, tmp.path(), &top)?;
    let network = match request.network {
        NetworkAccess::On => "on".to_string(),
        _ if abi < NETWORK_ABI => format!("unconfined (Landlock ABI {abi} has no network rules)"),
        NetworkAccess::Off => "off".to_string(),
        NetworkAccess::Ports(ports) => {
            format!("ports {}", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", "))
        }
    };
    let facts = SandboxFacts {
        kind: SandboxMode::Landlock,
        abi: Some(abi),
        unconfined: None,
        network: Some(network),
        top_level: Some(top.fact()),
    };
    let via_trampoline = top == TopLevel::Trampoline;
    let launch = Launch { spec, tmp: Some(tmp), reuse, trampoline, via_trampoline, protected_before };
    Ok(Prepared { launch: Some(launch), facts })
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
    let prepared = prepare_with(request, false)?;
    let command = match &prepared.launch {
        Some(launch) => launch.trampoline_command(request.program, args, env)?,
        None => {
            let mut command = Command::new(request.program);
            command.args(args).env_clear().envs(env);
            command
        }
    };
    Ok(Sandboxed { command, facts: prepared.facts, temp: prepared.launch })
}

/// The rules for `request`, its temporary folder being `tmp`, the top
/// level opened as `top` says; and the protected names at the top level.
fn spec_for(request: &Request<'_>, tmp: &Path, top: &TopLevel) -> io::Result<(Spec, Vec<String>)> {
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
        system: collapse(&system),
        devices: DEVICES.iter().map(PathBuf::from).collect(),
        list: vec![root.to_path_buf()],
        read: Vec::new(),
        write: vec![tmp.to_path_buf()],
        network: match request.network {
            NetworkAccess::Off => SpecNetwork::Off,
            NetworkAccess::On => SpecNetwork::On,
            NetworkAccess::Ports(ports) => SpecNetwork::Ports(ports.clone()),
        },
        isolation: None,
    };
    if matches!(top, TopLevel::Thread | TopLevel::Trampoline) {
        // The whole workspace, its protected entries covered, in place of a
        // rule for each of its own entries.
        let (names, hide, read_only) = top::protected(request.workspace)?;
        spec.list.clear();
        let user = *top == TopLevel::Trampoline;
        spec.isolation = Some(Isolation { workspace: root.to_path_buf(), hide, read_only, user });
        return Ok((spec, names));
    }
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
    Ok((spec, Vec::new()))
}

/// `folders` as few rules need them: each one resolved (`/bin` →
/// `/usr/bin` on a merged-`/usr` system), those that are not there left
/// out, and each one beneath another left out (the other's rule covers
/// it). Resolutions are kept for the life of the process, so a run's steps
/// after its first make no system call for them.
pub(crate) fn collapse(folders: &[PathBuf]) -> Vec<PathBuf> {
    static RESOLVED: Mutex<BTreeMap<PathBuf, Option<PathBuf>>> = Mutex::new(BTreeMap::new());
    let mut resolved = RESOLVED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut real: Vec<PathBuf> = folders
        .iter()
        .filter_map(|folder| {
            resolved.entry(folder.clone()).or_insert_with(|| std::fs::canonicalize(folder).ok()).clone()
        })
        .collect();
    real.sort();
    real.dedup();
    let mut kept: Vec<PathBuf> = Vec::with_capacity(real.len());
    for folder in real {
        // Sorted: a folder's ancestors come before it.
        if !kept.iter().any(|above| folder.starts_with(above)) {
            kept.push(folder);
        }
    }
    kept
}
