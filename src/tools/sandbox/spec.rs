//! What a sandboxed program may touch, as planrun hands it to the
//! trampoline: JSON in one environment variable ([`SPEC_VAR`]) that only
//! planrun sets (it overwrites any value the policy or a step gives) and
//! the trampoline removes before it runs the program. The trampoline's
//! command line is fixed, `planrun-sandbox -- PROGRAM ARGS…`: nothing a
//! step writes is ever read as one of its options.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The environment variable that carries the [`Spec`] to the trampoline.
pub const SPEC_VAR: &str = "PLANRUN_SANDBOX_SPEC";

/// The trampoline's fixed first argument: everything after it is the
/// program and its arguments.
pub const PROGRAM_FOLLOWS: &str = "--";

/// The folders and files a sandboxed program may use, by kind of access.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Read and execute everything beneath (the system folders; symbolic
    /// links followed).
    pub system: Vec<PathBuf>,
    /// Devices opened for reading and writing (`/dev/null` …).
    pub devices: Vec<PathBuf>,
    /// Folders whose entries may be listed, and nothing more (the
    /// workspace itself).
    pub list: Vec<PathBuf>,
    /// Read (and execute) only: entries of the workspace a program may
    /// read but never change (`.git`). Never through a symbolic link.
    pub read: Vec<PathBuf>,
    /// Read and change everything beneath: the workspace's own folders
    /// and files (never a protected one) and the step's temporary folder.
    /// Never through a symbolic link.
    pub write: Vec<PathBuf>,
    pub network: SpecNetwork,
    /// Set: the program runs in a mount namespace of its own where the
    /// workspace's protected entries are covered, and may change the whole
    /// workspace, its top level included (see [`Isolation`]). Absent in a
    /// spec of before: `write` lists the workspace's own entries instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<Isolation>,
}

/// The workspace as a program in a mount namespace of its own sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Isolation {
    /// The workspace: read and change everything beneath, top level
    /// included.
    pub workspace: PathBuf,
    /// Covered by an empty read-only folder (a folder) or by `/dev/null`,
    /// read-only (a file): `runs/`, `bridge/`, `.planrun/`, what
    /// `files.deny` names at the top.
    pub hide: Vec<PathBuf>,
    /// Mounted again read-only over themselves: `.git`.
    pub read_only: Vec<PathBuf>,
    /// Also a user namespace (a process without the privilege to make a
    /// mount namespace; only the trampoline, a single thread, can).
    pub user: bool,
}

/// The network the program may use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecNetwork {
    /// No TCP connect or bind (and no UDP where the kernel can refuse it).
    #[default]
    Off,
    /// No restriction.
    On,
    /// TCP connections to these ports only; no TCP bind.
    Ports(Vec<u16>),
}
