//! The workspace: a confined directory handle.
//!
//! Confinement has two layers. [`Workspace::check_path`] is the lexical layer,
//! done by path components (never by string prefixes): it refuses empty
//! paths, NUL, absolute paths, any `..`, the always-protected `.git/`, `runs/`
//! and `bridge/`, and the policy's `files.deny` globs. The second layer is the
//! operating system: every file operation goes through a cap-std [`Dir`]
//! (openat2 `RESOLVE_BENEATH` where available), which refuses `..`, absolute
//! paths and symlinks that lead outside the workspace, whatever the lexical
//! layer missed.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::model::FilePolicy;

/// First components that no tool may ever touch, whatever the policy says.
const PROTECTED: [&str; 4] = [".git", "runs", "bridge", ".planrun"];

/// Whether `name`, a first component the file tools refuse, is one a
/// sandboxed program may still read: `.git`, which a repository's own
/// tools (`git status`) read. planrun's state (`runs/`, `bridge/`,
/// `.planrun/`) and what `files.deny` names stay unreadable.
pub fn readable_protected(name: &str) -> bool {
    name.eq_ignore_ascii_case(PROTECTED[0])
}

/// The confined workspace: a directory handle plus its canonical path.
#[derive(Debug)]
pub struct Workspace {
    dir: Dir,
    root: PathBuf,
    rules: PathRules,
}

/// The lexical layer of confinement alone: what can be decided about a
/// workspace-relative path without touching the file system. Static analysis
/// (`planrun check`, `planrun plan`) uses it where no workspace exists; it is
/// never more strict than [`Workspace::check_path`], so a path it refuses is
/// certainly refused at run time.
#[derive(Debug, Clone)]
pub struct PathRules {
    deny: Vec<Glob>,
}

impl PathRules {
    pub fn new(files: &FilePolicy) -> PathRules {
        PathRules { deny: files.deny.iter().map(|pattern| Glob::new(pattern)).collect() }
    }

    /// The lexical part of confinement, by components.
    pub fn check_path(&self, rel: &str) -> Result<CheckedPath, PathDenied> {
        if rel.is_empty() {
            return Err(PathDenied::new(rel, "files.empty", "the path is empty"));
        }
        if rel.contains('\0') {
            return Err(PathDenied::new(rel, "files.nul", "the path contains NUL"));
        }
        let path = Path::new(rel);
        if path.is_absolute() || rel.starts_with('/') {
            return Err(PathDenied::new(rel, "files.absolute", "absolute paths are refused"));
        }
        let mut components = Vec::new();
        for component in path.components() {
            match component {
                Component::Normal(name) => match name.to_str() {
                    Some(name) => components.push(name.to_owned()),
                    None => {
                        return Err(PathDenied::new(rel, "files.empty", "the path is not UTF-8"));
                    }
                },
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(PathDenied::new(rel, "files.parent", "`..` components are refused"));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathDenied::new(rel, "files.absolute", "absolute paths are refused"));
                }
            }
        }
        let Some(first) = components.first() else {
            return Err(PathDenied::new(rel, "files.empty", "the path names the workspace itself"));
        };
        if let Some(protected) = PROTECTED.iter().find(|protected| first.eq_ignore_ascii_case(protected)) {
            return Err(PathDenied::new(rel, "files.protected", format!("`{protected}/` is always protected")));
        }
        for (index, glob) in self.deny.iter().enumerate() {
            if glob.matches_path_or_ancestor(&components) {
                return Err(PathDenied::new(
                    rel,
                    format!("files.deny[{index}]"),
                    format!("it matches `{}`", glob.pattern),
                ));
            }
        }
        Ok(CheckedPath { components })
    }
}

/// A workspace-relative path that passed the lexical checks: only normal
/// components, joined by `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedPath {
    components: Vec<String>,
}

impl CheckedPath {
    /// The normalised relative path (`a/./b` becomes `a/b`).
    pub fn as_path(&self) -> PathBuf {
        self.components.iter().collect()
    }

    /// The normalised relative path as text.
    pub fn as_str_path(&self) -> String {
        self.components.join("/")
    }

    /// The components.
    pub fn components(&self) -> &[String] {
        &self.components
    }

    /// The parent folder (empty for a file at the root) and the file name.
    pub fn split_last(&self) -> (PathBuf, &str) {
        match self.components.split_last() {
            Some((last, parent)) => (parent.iter().collect(), last.as_str()),
            // Never happens: a checked path has at least one component.
            None => (PathBuf::new(), ""),
        }
    }
}

/// A path the file tools refuse, naming the rule that refused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathDenied {
    /// The path as the plan gave it.
    pub path: String,
    /// `files.empty`, `files.nul`, `files.absolute`, `files.parent`,
    /// `files.protected`, `files.deny[<i>]` or `files.symlink`.
    pub rule: String,
    /// Lowercase, no final period.
    pub reason: String,
}

impl PathDenied {
    fn new(path: &str, rule: impl Into<String>, reason: impl Into<String>) -> Self {
        PathDenied { path: path.to_owned(), rule: rule.into(), reason: reason.into() }
    }

    pub(crate) fn symlink(path: &str, reason: impl Into<String>) -> Self {
        PathDenied::new(path, "files.symlink", reason)
    }
}

impl fmt::Display for PathDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = match self.rule.as_str() {
            "files.absolute" | "files.parent" => "is outside the workspace",
            "files.protected" => "is protected",
            rule if rule.starts_with("files.deny") => "is denied by policy",
            "files.symlink" => "is refused",
            _ => "is not a valid workspace path",
        };
        write!(f, "`{}` {verdict}: {}", self.path.escape_debug(), self.reason)
    }
}

impl std::error::Error for PathDenied {}

impl Workspace {
    /// Opens the workspace at `root`, which must exist and be a directory.
    pub fn open(root: &Path, files: &FilePolicy) -> io::Result<Workspace> {
        let root = std::fs::canonicalize(root)?;
        if !std::fs::metadata(&root)?.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace `{}` is not a directory", root.display()),
            ));
        }
        let dir = Dir::open_ambient_dir(&root, ambient_authority())?;
        Ok(Workspace { dir, root, rules: PathRules::new(files) })
    }

    /// The canonical absolute root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The confined directory handle every file operation goes through.
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    /// The lexical part of confinement, by components (see [`PathRules`]).
    pub fn check_path(&self, rel: &str) -> Result<CheckedPath, PathDenied> {
        self.rules.check_path(rel)
    }

    /// [`Workspace::check_path`] plus: no existing component of the path is
    /// a symlink. Used for `path` slots of shell rules, whose programs follow
    /// symlinks freely (so `cat link-to-etc-passwd` must not pass).
    pub fn check_slot_path(&self, rel: &str) -> Result<CheckedPath, PathDenied> {
        let checked = self.check_path(rel)?;
        let mut prefix = PathBuf::new();
        for component in checked.components() {
            prefix.push(component);
            match self.dir.symlink_metadata(&prefix) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(PathDenied::symlink(
                        rel,
                        format!("`{}` is a symlink and shell arguments never pass through symlinks", prefix.display()),
                    ));
                }
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => break,
                Err(err) if err.kind() == io::ErrorKind::NotFound => break,
                Err(err) => {
                    return Err(PathDenied::symlink(rel, format!("`{}` cannot be checked: {err}", prefix.display())));
                }
            }
        }
        Ok(checked)
    }
}

/// Why a shell step's `cwd` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CwdRefused {
    /// Confinement refuses the path (see [`PathDenied`]).
    Denied(PathDenied),
    /// The path is allowed but names no folder in the workspace.
    Missing { path: String },
}

impl Workspace {
    /// The absolute working directory for a shell step's `cwd`: the path
    /// passes [`Workspace::check_slot_path`] (lexical rules, protected
    /// folders, `files.deny`, no symlink anywhere on it) and names an
    /// existing folder. The one check every source of a `cwd` goes through.
    pub fn check_cwd(&self, rel: &str) -> Result<PathBuf, CwdRefused> {
        let checked = self.check_slot_path(rel).map_err(CwdRefused::Denied)?;
        match self.dir.symlink_metadata(checked.as_path()) {
            Ok(meta) if meta.is_dir() => Ok(self.root.join(checked.as_path())),
            _ => Err(CwdRefused::Missing { path: checked.as_str_path() }),
        }
    }
}

/// A tiny glob: `*` within one component, `**` across components (zero or
/// more), everything else literal.
#[derive(Debug, Clone)]
struct Glob {
    pattern: String,
    parts: Vec<String>,
}

impl Glob {
    fn new(pattern: &str) -> Glob {
        let parts = pattern.split('/').filter(|part| !part.is_empty() && *part != ".").map(str::to_owned).collect();
        Glob { pattern: pattern.to_owned(), parts }
    }

    /// Whether the pattern matches the path or one of its ancestors (a
    /// denied folder denies everything in it).
    fn matches_path_or_ancestor(&self, components: &[String]) -> bool {
        (1..=components.len()).any(|len| self.matches(&components[..len]))
    }

    fn matches(&self, components: &[String]) -> bool {
        match_parts(&self.parts, components)
    }
}

/// Whether `path` is `folder` or inside it, both made absolute (from the
/// current folder) and resolved as the kernel would: each part that exists
/// has its symlinks followed, the rest (a folder not created yet) is taken
/// as written. A search path entry that links into the workspace, or names
/// a folder the plan may create there, is inside it.
pub fn is_within(path: &Path, folder: &Path) -> bool {
    match (resolved(path), resolved(folder)) {
        (Some(path), Some(folder)) => path.starts_with(folder),
        _ => false,
    }
}

fn resolved(path: &Path) -> Option<PathBuf> {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
    let mut current = PathBuf::from("/");
    for component in absolute.components() {
        match component {
            Component::Normal(name) => {
                let next = current.join(name);
                current = std::fs::canonicalize(&next).unwrap_or(next);
            }
            Component::ParentDir => {
                current.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    Some(current)
}

fn match_parts(parts: &[String], components: &[String]) -> bool {
    match parts.split_first() {
        None => components.is_empty(),
        Some((part, rest)) if part == "**" => (0..=components.len()).any(|skip| match_parts(rest, &components[skip..])),
        Some((part, rest)) => match components.split_first() {
            Some((component, tail)) => {
                match_component(part.as_bytes(), component.as_bytes()) && match_parts(rest, tail)
            }
            None => false,
        },
    }
}

/// `*` matches any run of bytes within one component; the rest is literal.
fn match_component(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| match_component(rest, &text[skip..])),
        Some((byte, rest)) => match text.split_first() {
            Some((first, tail)) => first == byte && match_component(rest, tail),
            None => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(deny: &[&str]) -> FilePolicy {
        FilePolicy {
            deny: deny.iter().map(|s| s.to_string()).collect(),
            max_read_bytes: 1 << 20,
            max_write_bytes: 1 << 20,
        }
    }

    fn rule_of(ws: &Workspace, rel: &str) -> String {
        match ws.check_path(rel) {
            Ok(_) => "ok".to_owned(),
            Err(denied) => denied.rule,
        }
    }

    #[test]
    fn lexical_checks_by_components() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path(), &policy(&["secrets/**", "*.pem", "**/id_rsa"])).expect("open");
        let table = [
            ("notes.txt", "ok"),
            ("a/b/c.txt", "ok"),
            ("./a/./b", "ok"),
            ("workspace_evil/x", "ok"),
            ("", "files.empty"),
            (".", "files.empty"),
            ("a\0b", "files.nul"),
            ("/tmp/x", "files.absolute"),
            ("../escape.txt", "files.parent"),
            ("a/../../x", "files.parent"),
            ("a/../b", "files.parent"),
            ("../workspace_evil/x", "files.parent"),
            ("runs/x", "files.protected"),
            ("runs", "files.protected"),
            ("./runs/x/y", "files.protected"),
            (".git/config", "files.protected"),
            ("bridge/inbox", "files.protected"),
            ("docs/runs/x", "ok"),
            ("secrets/x/y", "files.deny[0]"),
            ("secrets", "files.deny[0]"),
            ("key.pem", "files.deny[1]"),
            ("a/key.pem", "ok"),
            ("a/b/id_rsa", "files.deny[2]"),
            ("id_rsa", "files.deny[2]"),
        ];
        for (rel, want) in table {
            assert_eq!(rule_of(&ws, rel), want, "path {rel:?}");
        }
    }

    #[test]
    fn globs() {
        let glob = Glob::new("runs/**");
        let path = |s: &str| s.split('/').map(str::to_owned).collect::<Vec<_>>();
        assert!(glob.matches(&path("runs/x/y")));
        assert!(glob.matches(&path("runs")));
        assert!(!glob.matches(&path("runsx/y")));
        let glob = Glob::new("a/*.txt");
        assert!(glob.matches(&path("a/b.txt")));
        assert!(!glob.matches(&path("a/b/c.txt")));
        assert!(!glob.matches(&path("a/b.txt2")));
        assert!(glob.matches_path_or_ancestor(&path("a/b.txt/c")));
    }

    #[test]
    fn denial_messages() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = Workspace::open(tmp.path(), &policy(&[])).expect("open");
        let denied = ws.check_path("../x").expect_err("denied");
        assert_eq!(denied.to_string(), "`../x` is outside the workspace: `..` components are refused");
        let denied = ws.check_path("runs/x").expect_err("denied");
        assert_eq!(denied.to_string(), "`runs/x` is protected: `runs/` is always protected");
    }

    #[test]
    fn open_requires_existing_dir() {
        let tmp = tempfile::tempdir().expect("tempdir");
        assert!(Workspace::open(&tmp.path().join("missing"), &policy(&[])).is_err());
        let ws = Workspace::open(tmp.path(), &policy(&[])).expect("open");
        assert!(ws.root().is_absolute());
    }

    #[test]
    fn slot_paths_refuse_symlinks() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("ws");
        std::fs::create_dir_all(root.join("d")).expect("mkdir");
        std::os::unix::fs::symlink("/etc", root.join("etc")).expect("symlink");
        std::os::unix::fs::symlink("/etc/passwd", root.join("d/pw")).expect("symlink");
        let ws = Workspace::open(&root, &policy(&[])).expect("open");
        assert!(ws.check_slot_path("d").is_ok());
        assert!(ws.check_slot_path("d/new.txt").is_ok());
        assert_eq!(ws.check_slot_path("etc/passwd").expect_err("denied").rule, "files.symlink");
        assert_eq!(ws.check_slot_path("d/pw").expect_err("denied").rule, "files.symlink");
    }
}
