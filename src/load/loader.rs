//! The [`Loader`]: files → validated plans, policies, scenarios and the
//! service policy, one file at a time, keeping every source and every
//! finding. What makes up a catalog (folders, the paths `planrun check` is
//! given) is `catalog.rs`'s; the checks that only show across files are
//! `cross_check.rs`'s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, SourceMap, display_path};
use crate::load::checked::{CheckedFile, FileKind};
use crate::load::lint_plan::lint_plan;
use crate::load::loaded_plan::LoadedPlan;
use crate::load::node::Node;
use crate::load::parse::parse;
use crate::load::read_file::{Copies, EXTENSIONS, ReadFile, read};
use crate::load::table::error_count;
use crate::load::validate_plan::validate_plan;
use crate::load::validate_scenario::validate_scenarios;
use crate::load::validate_service_policy::validate_service_policy;
use crate::model::{Plan, Policy, ScenarioFile, ServicePolicy};

/// Reads plan and policy files, keeping every source and every finding.
///
/// Files with errors yield no model; their findings stay in
/// [`Loader::diagnostics`]. Warnings do not stop a file from loading.
#[derive(Debug, Default)]
pub struct Loader {
    pub(super) sources: SourceMap,
    pub(super) diagnostics: Vec<Diagnostic>,
    /// When set, files are read from these copies only, never from disk.
    pub(super) copies: Option<Copies>,
    /// Every file asked for, in reading order.
    pub(super) checked: Vec<CheckedFile>,
    /// The workspace runs will act in, when known: a policy whose
    /// `shell.search_path` reaches into it is refused.
    pub(super) workspace: Option<PathBuf>,
    /// Policies loaded so far by path (`None`: with errors), so that a
    /// policy other policies extend is read and reported once.
    pub(super) policy_cache: BTreeMap<PathBuf, Option<Policy>>,
}

/// `<dir>/<name>.toml`, `.yaml` and `.yml`, in the order they are looked for.
fn policy_candidates(dir: &Path, name: &str) -> impl Iterator<Item = PathBuf> {
    EXTENSIONS.iter().map(move |extension| dir.join(format!("{name}.{extension}")))
}

/// `<dir>/<name>.toml` (or `.yaml`, `.yml`) when it exists.
pub(super) fn policy_file(dir: &Path, name: &str) -> Option<PathBuf> {
    policy_candidates(dir, name).find(|path| path.is_file())
}

impl Loader {
    pub fn new() -> Self {
        Self::default()
    }

    /// A loader that reads only `copies` (path → text), never the disk: a
    /// worker loads a queued run's plan and policy from the copies it was
    /// submitted with, under the paths (and so the digests) the submitter
    /// read them from, wherever the worker's current folder is.
    pub fn from_copies(copies: Copies) -> Self {
        Loader { copies: Some(copies), ..Self::default() }
    }

    /// `<dir>/<name>.toml` (or `.yaml`, `.yml`) when it exists (among the
    /// copies, for a loader made [`Loader::from_copies`]).
    pub(super) fn find_policy(&self, dir: &Path, name: &str) -> Option<PathBuf> {
        match &self.copies {
            None => policy_file(dir, name),
            Some(copies) => policy_candidates(dir, name).find(|path| copies.contains_key(path)),
        }
    }

    /// The same loader, judging policies against the workspace at
    /// `workspace` (`search-path-in-workspace`).
    pub fn in_workspace(mut self, workspace: &Path) -> Self {
        self.workspace = Some(workspace.to_path_buf());
        self
    }

    pub fn sources(&self) -> &SourceMap {
        &self.sources
    }

    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The diagnostics in reading order: by file, then by position in the
    /// file; findings without a position come last.
    pub fn sorted_diagnostics(&self) -> Vec<&Diagnostic> {
        let mut sorted: Vec<&Diagnostic> = self.diagnostics.iter().collect();
        sorted.sort_by_key(|diagnostic| match diagnostic.span {
            Some(span) => (0, span.source, span.start),
            None => (1, 0, 0),
        });
        sorted
    }

    /// Every file read (or that could not be read), in reading order, with
    /// its kind and whether it loaded.
    pub fn checked_files(&self) -> &[CheckedFile] {
        &self.checked
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub(super) fn error_count(&self) -> usize {
        error_count(&self.diagnostics)
    }

    /// Loads and validates one plan file; `None` when it has errors.
    pub fn load_plan(&mut self, path: &Path) -> Option<Plan> {
        self.plan_file(path).map(|loaded| loaded.plan)
    }

    /// Loads and validates one policy file; `None` when it has errors.
    pub fn load_policy(&mut self, path: &Path) -> Option<Policy> {
        if let Some(policy) = self.cached_policy(path) {
            return policy;
        }
        let (read, root) = self.read(path, FileKind::Policy)?;
        self.policy_from(path, read, &root)
    }

    /// Loads and validates one scenario file; `None` when it has errors.
    pub fn load_scenarios(&mut self, path: &Path) -> Option<ScenarioFile> {
        let (read, root) = self.read(path, FileKind::Scenarios)?;
        let parse_errors = self.file_has_errors(read.id);
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let shown = read.source.path.clone();
        let file = validate_scenarios(&root, dir, read.source, &mut self.diagnostics).filter(|_| !parse_errors);
        self.note(FileKind::Scenarios, shown, None, file.is_some());
        file
    }

    /// `<policies_dir>/service/service.toml` (or `.yaml`, `.yml`) when it
    /// exists: the service policy `planrun serve` reads by default and
    /// `planrun check` checks. It sits in a sub-folder so that
    /// [`Loader::load_catalog`] never reads it as a run policy.
    pub fn service_policy_file(policies_dir: &Path) -> Option<PathBuf> {
        policy_file(&policies_dir.join("service"), "service")
    }

    /// Loads and validates a service policy file (TOML or YAML); `None`
    /// when it has errors.
    pub fn load_service_policy(&mut self, path: &Path) -> Option<ServicePolicy> {
        let (read, root) = self.read(path, FileKind::ServicePolicy)?;
        self.service_policy_from(read, &root)
    }

    /// Reads and parses a file for tests: its source id and tree.
    #[cfg(test)]
    pub(crate) fn read_for_tests(&mut self, path: &Path) -> Option<(usize, Node)> {
        self.read(path, FileKind::Unreadable).map(|(read, root)| (read.id, root))
    }

    /// Reads and parses a file meant to be of `kind`; `None` (and the file
    /// noted as not loaded) when it cannot be read or parsed.
    pub(super) fn read(&mut self, path: &Path, kind: FileKind) -> Option<(ReadFile, Node)> {
        let parsed = read(&mut self.sources, &mut self.diagnostics, path, self.copies.as_ref()).and_then(|read| {
            let file = self.sources.get(read.id)?;
            let root = parse(file, read.id, read.format, &mut self.diagnostics)?;
            Some((read, root))
        });
        if parsed.is_none() {
            self.note(kind, display_path(path), None, false);
        }
        parsed
    }

    /// Notes a file read as `kind` for [`Loader::checked_files`].
    fn note(&mut self, kind: FileKind, path: String, name: Option<String>, loaded: bool) {
        self.checked.push(CheckedFile { kind, path, name, loaded });
    }

    pub(super) fn plan_file(&mut self, path: &Path) -> Option<LoadedPlan> {
        let (read, root) = self.read(path, FileKind::Plan)?;
        self.plan_from(read, &root)
    }

    pub(super) fn plan_from(&mut self, read: ReadFile, root: &Node) -> Option<LoadedPlan> {
        let shown = read.source.path.clone();
        let file = self.sources.get(read.id)?;
        let loaded = validate_plan(root, file, read.source, &mut self.diagnostics);
        if let Some(loaded) = &loaded {
            lint_plan(loaded, file, &mut self.diagnostics);
        }
        // A parse error, or a lint error (a template reference that can never
        // resolve), refuses the plan as a validation error does: nothing of it
        // may run.
        let loaded = loaded.filter(|_| !self.file_has_errors(read.id));
        let name = loaded.as_ref().map(|loaded| loaded.plan.id.clone());
        self.note(FileKind::Plan, shown, name, loaded.is_some());
        loaded
    }

    pub(super) fn policy_from(&mut self, path: &Path, read: ReadFile, root: &Node) -> Option<Policy> {
        if let Some(policy) = self.cached_policy(path) {
            return policy;
        }
        let name = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        let shown = read.source.path.clone();
        let policy = self.resolve_policy(path, read, root, &mut Vec::new());
        self.policy_cache.insert(path.to_path_buf(), policy.clone());
        self.note(FileKind::Policy, shown, Some(name), policy.is_some());
        policy
    }

    /// A policy already loaded (as the parent of another), noted as checked.
    fn cached_policy(&mut self, path: &Path) -> Option<Option<Policy>> {
        let policy = self.policy_cache.get(path)?.clone();
        let name = path.file_stem().map(|stem| stem.to_string_lossy().into_owned());
        let shown =
            policy.as_ref().map_or_else(|| crate::diag::display_path(path), |policy| policy.source.path.clone());
        if !self.checked.iter().any(|file| file.kind == FileKind::Policy && file.path == shown) {
            self.note(FileKind::Policy, shown, name, policy.is_some());
        }
        Some(policy)
    }

    pub(super) fn service_policy_from(&mut self, read: ReadFile, root: &Node) -> Option<ServicePolicy> {
        let parse_errors = self.file_has_errors(read.id);
        let policy = validate_service_policy(root, &read.source.path, &mut self.diagnostics).filter(|_| !parse_errors);
        self.note(FileKind::ServicePolicy, read.source.path, None, policy.is_some());
        policy
    }

    /// Whether the parser already reported an error in this file (a YAML
    /// anchor, say, which leaves a tree behind to validate).
    pub(super) fn file_has_errors(&self, id: usize) -> bool {
        self.diagnostics
            .iter()
            .any(|diagnostic| diagnostic.is_error() && diagnostic.span.is_some_and(|span| span.source == id))
    }
}
