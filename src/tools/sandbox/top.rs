//! Whether a program may create and remove entries at the workspace's top
//! level, and how (docs/effects-sandbox.md, "The workspace's top level"):
//! asked once per process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::spec::{Isolation, SPEC_VAR, Spec, SpecNetwork};
use super::{DEVICES, SIMULATE_VAR, SYSTEM, collapse};
use crate::confine::{Workspace, readable_protected};

/// The documented test switch's value that makes planrun behave as where
/// no mount namespace can be made ([`SIMULATE_VAR`]).
pub const SIMULATE_NO_NAMESPACE: &str = "no-mount-namespace";

/// How the top level is opened on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopLevel {
    /// A mount namespace made on planrun's spawning thread (planrun has
    /// the privilege, e.g. runs as root).
    Thread,
    /// A user and a mount namespace made by the trampoline (a process of
    /// one thread), for a process without that privilege.
    Trampoline,
    /// Neither: the top level stays read-only, and why.
    ReadOnly(String),
}

impl TopLevel {
    /// What a step's record says (`top_level`).
    pub fn fact(&self) -> String {
        match self {
            TopLevel::Thread => "writable (mount namespace)".into(),
            TopLevel::Trampoline => "writable (user and mount namespaces)".into(),
            TopLevel::ReadOnly(why) => format!("read-only ({why})"),
        }
    }
}

static SIMULATED: OnceLock<()> = OnceLock::new();

/// From now on this process behaves as where no namespace can be made.
pub fn simulate_no_namespace() {
    let _ = SIMULATED.set(());
}

/// How the top level is opened here, `trampoline` being the installed
/// trampoline: probed once.
pub fn top_level(trampoline: &Path) -> TopLevel {
    static PROBED: OnceLock<TopLevel> = OnceLock::new();
    if SIMULATED.get().is_some() {
        return TopLevel::ReadOnly(format!(
            "no mount namespace can be made (simulated: {SIMULATE_VAR}={SIMULATE_NO_NAMESPACE})"
        ));
    }
    PROBED.get_or_init(|| probe(trampoline)).clone()
}

fn probe(trampoline: &Path) -> TopLevel {
    let Ok(scratch) = tempfile::Builder::new().prefix("planrun-probe-").tempdir() else {
        return TopLevel::ReadOnly("no temporary folder to try a mount namespace in".into());
    };
    let (hidden, kept) = (scratch.path().join("hidden"), scratch.path().join("kept"));
    if std::fs::create_dir(&hidden).and_then(|()| std::fs::create_dir(&kept)).is_err() {
        return TopLevel::ReadOnly("no temporary folder to try a mount namespace in".into());
    }
    let mut isolation =
        Isolation { workspace: scratch.path().to_path_buf(), hide: vec![hidden], read_only: vec![kept], user: false };
    // On a throwaway thread: its namespace ends with it.
    let on_thread = {
        let isolation = isolation.clone();
        std::thread::spawn(move || super::namespace::isolate(&isolation).is_ok()).join().unwrap_or(false)
    };
    if on_thread {
        return TopLevel::Thread;
    }
    isolation.user = true;
    let Some(program) = ["/bin/true", "/usr/bin/true"].into_iter().map(Path::new).find(|path| path.is_file()) else {
        return TopLevel::ReadOnly("no `true` program to try a user namespace with".into());
    };
    let spec = Spec {
        system: collapse(&SYSTEM.iter().map(PathBuf::from).collect::<Vec<_>>()),
        devices: DEVICES.iter().map(PathBuf::from).collect(),
        list: Vec::new(),
        read: Vec::new(),
        write: Vec::new(),
        network: SpecNetwork::Off,
        isolation: Some(isolation),
    };
    let Ok(spec) = serde_json::to_string(&spec) else {
        return TopLevel::ReadOnly("the trampoline's spec could not be written".into());
    };
    let status = Command::new(trampoline)
        .arg(super::PROGRAM_FOLLOWS)
        .arg(program)
        .env_clear()
        .env(SPEC_VAR, spec)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(status) if status.success() => TopLevel::Trampoline,
        _ => TopLevel::ReadOnly("this process cannot make a mount namespace, nor a user namespace".into()),
    }
}

/// The workspace's protected entries at its top level (names), and the
/// paths to cover: hidden ones and read-only ones. Symbolic links are left
/// alone: Landlock does not follow them out of the workspace's rule.
pub fn protected(workspace: &Workspace) -> std::io::Result<(Vec<String>, Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut names, mut hide, mut read_only) = (Vec::new(), Vec::new(), Vec::new());
    for entry in std::fs::read_dir(workspace.root())? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if workspace.check_path(&name).is_ok() {
            continue;
        }
        names.push(name.clone());
        if entry.file_type()?.is_symlink() {
            continue;
        }
        if readable_protected(&name) { read_only.push(entry.path()) } else { hide.push(entry.path()) }
    }
    Ok((names, hide, read_only))
}

/// planrun's own folders: one may appear while a step runs because
/// another run in the same workspace made it, so it is never removed.
const OWN_FOLDERS: [&str; 3] = ["runs", "bridge", ".planrun"];

/// Protected entries at the top level that were not there before
/// (`before`): their names. Each one a program may have created, which is
/// removed, but for planrun's own folders ([`OWN_FOLDERS`]).
pub fn remove_planted(workspace: &Workspace, before: &[String]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(workspace.root()) else { return Vec::new() };
    let mut planted = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if workspace.check_path(&name).is_ok() || before.contains(&name) {
            continue;
        }
        planted.push(name.clone());
        if OWN_FOLDERS.iter().any(|own| own.eq_ignore_ascii_case(&name)) {
            continue;
        }
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        let _ = if is_dir { std::fs::remove_dir_all(entry.path()) } else { std::fs::remove_file(entry.path()) };
    }
    planted.sort();
    planted
}
