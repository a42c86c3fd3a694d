//! Bare program names and their resolution from the policy's search path.
//!
//! A plan names a bare program (`git`, never `/usr/bin/git`); the resolver
//! finds it once per run on the policy's fixed search path (never the
//! workspace, never the caller's `PATH`) and reports every name met along
//! its symlink chain, so that deny can be checked on what the program
//! really is. Policy, the loader, preview and the shell tool all use it.

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::model::ShellPolicy;

/// A program found on the policy's search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedProgram {
    /// Where it was found (`<search dir>/<name>`).
    pub path: PathBuf,
    /// `fs::canonicalize(path)`: what it really is.
    pub canonical: PathBuf,
    /// The file names met while following symlinks from `path` to
    /// `canonical`, both included (`ok` → `sh` → `dash`). Deny is checked
    /// on every one of them.
    pub names: Vec<String>,
}

/// Why a program name could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveError {
    /// Not a bare ASCII name.
    InvalidName(String),
    /// No executable regular file of that name on the search path.
    NotFound(String),
    /// Found, but the file is inside the workspace (a search path folder in
    /// it, or a link into it): programs never run from the workspace.
    InWorkspace { name: String, path: PathBuf },
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::InvalidName(name) => {
                write!(f, "`{}` is not a bare program name", name.escape_debug())
            }
            ResolveError::NotFound(name) => {
                write!(f, "`{name}` was not found in the policy's search path")
            }
            ResolveError::InWorkspace { name, path } => write!(
                f,
                "`{name}` resolves to `{}`, inside the workspace: programs are never run from the workspace",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ResolveError {}

/// Whether `name` is a bare program name: non-empty ASCII, no `/`, no
/// whitespace or control characters, not `.` or `..`.
pub fn is_bare_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.bytes().all(|b| b.is_ascii_graphic() && b != b'/' && b != b'\\')
}

/// Resolves bare program names from the policy's search path, once per run.
#[derive(Debug, Clone)]
pub struct ProgramResolver {
    search_path: Vec<PathBuf>,
    /// The workspace's canonical root, when known: nothing inside it is
    /// ever resolved.
    workspace: Option<PathBuf>,
    cache: HashMap<String, Result<ResolvedProgram, ResolveError>>,
}

impl ProgramResolver {
    pub fn new(policy: &ShellPolicy) -> Self {
        ProgramResolver { search_path: policy.search_path.clone(), workspace: None, cache: HashMap::new() }
    }

    /// The same resolver, refusing any program whose file is inside the
    /// workspace at `root` (canonical), whatever the search path says.
    pub fn outside(mut self, root: &Path) -> Self {
        self.workspace = Some(root.to_path_buf());
        self
    }

    /// Resolves `name` (cached: each name is looked up once per run).
    pub fn resolve(&mut self, name: &str) -> Result<ResolvedProgram, ResolveError> {
        if let Some(found) = self.cache.get(name) {
            return found.clone();
        }
        let found = self.lookup(name);
        self.cache.insert(name.to_owned(), found.clone());
        found
    }

    fn lookup(&self, name: &str) -> Result<ResolvedProgram, ResolveError> {
        if !is_bare_name(name) {
            return Err(ResolveError::InvalidName(name.to_owned()));
        }
        for dir in self.search_path.iter().filter(|dir| dir.is_absolute()) {
            let path = dir.join(name);
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                continue;
            }
            let Ok(canonical) = std::fs::canonicalize(&path) else {
                continue;
            };
            if self.workspace.as_ref().is_some_and(|root| canonical.starts_with(root)) {
                return Err(ResolveError::InWorkspace { name: name.to_owned(), path: canonical });
            }
            let names = symlink_chain_names(&path, &canonical);
            return Ok(ResolvedProgram { path, canonical, names });
        }
        Err(ResolveError::NotFound(name.to_owned()))
    }
}

/// The file names met following the symlink chain from `path` (bounded),
/// plus the canonical file name.
fn symlink_chain_names(path: &Path, canonical: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut push = |p: &Path| {
        if let Some(name) = p.file_name().and_then(|n| n.to_str())
            && !names.iter().any(|known| known == name)
        {
            names.push(name.to_owned());
        }
    };
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        push(&current);
        match std::fs::read_link(&current) {
            Ok(target) => {
                current = match current.parent() {
                    Some(parent) => parent.join(target),
                    None => target,
                };
            }
            Err(_) => break,
        }
    }
    push(canonical);
    names
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn which(name: &str) -> PathBuf {
        ["/usr/bin", "/bin"].iter().map(|dir| Path::new(dir).join(name)).find(|path| path.exists()).expect("program")
    }

    #[test]
    fn resolver_finds_executables_in_order_and_caches() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        std::fs::create_dir_all(&a).expect("mkdir");
        std::fs::create_dir_all(&b).expect("mkdir");
        std::fs::write(a.join("tool"), "not executable").expect("write");
        std::fs::write(b.join("tool"), "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(b.join("tool"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::os::unix::fs::symlink(which("sh"), a.join("alias")).expect("symlink");
        let policy = ShellPolicy {
            blocked: vec![],
            allow: vec![],
            search_path: vec![a.clone(), b.clone()],
            env: BTreeMap::new(),
            env_allow: vec![],
            sandbox: crate::model::SandboxMode::None,
            require_sandbox: false,
        };
        let mut resolver = ProgramResolver::new(&policy);
        let found = resolver.resolve("tool").expect("found");
        assert_eq!(found.path, b.join("tool"));
        let alias = resolver.resolve("alias").expect("found");
        assert_eq!(alias.path, a.join("alias"));
        assert_eq!(alias.names.first().map(String::as_str), Some("alias"));
        assert!(alias.names.contains(&"sh".to_owned()), "{:?}", alias.names);
        // Cached: removing the file does not change the answer in this run.
        std::fs::remove_file(b.join("tool")).expect("rm");
        assert_eq!(resolver.resolve("tool").expect("cached"), found);
        assert_eq!(resolver.resolve("missing"), Err(ResolveError::NotFound("missing".into())));
        for bad in ["", ".", "..", "/bin/sh", "./sh", "sh\u{e9}", "a b"] {
            assert!(matches!(resolver.resolve(bad), Err(ResolveError::InvalidName(_))), "{bad:?}");
        }
    }
}
