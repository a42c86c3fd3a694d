//! What a [`crate::load::Loader`] read: every file it was asked to load,
//! its kind, and whether it loaded, so that `planrun check` counts and names
//! what it checked (a file with errors included).

use serde::Serialize;

/// What a file was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    Plan,
    Policy,
    ServicePolicy,
    Scenarios,
    /// A file given by path that could not be read or parsed, so whether
    /// it is a plan or a policy is unknown.
    Unreadable,
}

impl FileKind {
    /// How a summary counts files of this kind.
    pub fn plural(self) -> &'static str {
        match self {
            FileKind::Plan => "plan(s)",
            FileKind::Policy => "policy file(s)",
            FileKind::ServicePolicy => "service policy file(s)",
            FileKind::Scenarios => "scenario file(s)",
            FileKind::Unreadable => "unreadable file(s)",
        }
    }
}

/// One file read: its kind, its path as shown in findings, its name (a
/// plan's id, a policy's name) when known, and whether it loaded (no
/// errors).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckedFile {
    pub kind: FileKind,
    pub path: String,
    pub name: Option<String>,
    pub loaded: bool,
}
