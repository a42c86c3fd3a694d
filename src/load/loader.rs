//! The [`Loader`]: files → validated plans, policies and the service
//! policy, plus the checks that only show across files.
//!
//! Cross-file checks: plan ids and keywords are unique (routing must be
//! unambiguous), exactly one plan is the default (these routing checks are
//! in `route_checks.rs`), every plan names an existing policy, and a plan's
//! step settings stay within its policy (`retry` ≤ `retry.cap`,
//! `timeout_secs` ≤ `budget.step_timeout_secs`). A new check goes in
//! `cross_check` (or `plan_vs_policy` when it needs the plan's policy, or
//! `route_findings` when it is about routing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::confine::PathRules;
use crate::diag::{Diagnostic, SourceMap, display_path};
use crate::load::checked::{CheckedFile, FileKind};
use crate::load::lint_plan::lint_plan;
use crate::load::loaded_plan::LoadedPlan;
use crate::load::node::Node;
use crate::load::parse_yaml::{self as loader, Copies, ReadFile};
use crate::load::route_checks::{recovery_plan_findings, route_findings};
use crate::load::table::error_count;
use crate::load::validate_plan::validate_plan;
use crate::load::validate_policy::validate_policy;
use crate::load::validate_scenario::{is_scenario_file, validate_scenarios};
use crate::load::validate_service_policy::validate_service_policy;
use crate::model::{Action, DEFAULT_POLICY, Plan, Policy, ScenarioFile, ServicePolicy};
use crate::policy::{display_argv, evaluate_argv};

/// Valid plans and policies, by file.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// In the order loaded (file name order within a folder).
    pub plans: Vec<Plan>,
    /// By name (the file stem).
    pub policies: BTreeMap<String, Policy>,
}

/// Reads plan and policy files, keeping every source and every finding.
///
/// Files with errors yield no model; their findings stay in
/// [`Loader::diagnostics`]. Warnings do not stop a file from loading.
#[derive(Debug, Default)]
pub struct Loader {
    sources: SourceMap,
    diagnostics: Vec<Diagnostic>,
    /// When set, files are read from these copies only, never from disk.
    copies: Option<Copies>,
    /// Every file asked for, in reading order.
    checked: Vec<CheckedFile>,
    /// The workspace runs will act in, when known: a policy whose
    /// `shell.search_path` reaches into it is refused.
    workspace: Option<PathBuf>,
}

/// `<dir>/<name>.toml` (or `.yaml`, `.yml`) when it exists.
fn policy_file(dir: &Path, name: &str) -> Option<PathBuf> {
    ["toml", "yaml", "yml"].iter().map(|extension| dir.join(format!("{name}.{extension}"))).find(|path| path.is_file())
}

/// Whether a file given to `planrun check` that is not a plan is a service
/// policy: it sits in a folder named `service` (where `planrun serve` looks
/// for it) or has a section only a service policy has.
fn is_service_policy(path: &Path, root: &Node) -> bool {
    let in_service_folder = path.parent().and_then(Path::file_name).is_some_and(|name| name == "service");
    in_service_folder || ["guard", "controller", "recovery"].iter().any(|key| root.get(key).is_some())
}

/// A path to compare files by: canonical when it can be resolved, so that
/// `plans/x.toml` and `./plans/x.toml` are the same file.
fn same_file_key(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Which checks `cross_check` runs.
struct Checks {
    /// Report `no-default-plan` and `unknown-recovery-plan` (only when the
    /// whole catalog is known).
    default_required: bool,
    /// Report `unknown-policy` for policies not in the loaded set.
    policies_known: bool,
}

/// `unknown-policy`: `loaded` names a policy that was not found.
fn unknown_policy(loaded: &LoadedPlan, help: String) -> Diagnostic {
    let plan = &loaded.plan;
    Diagnostic::error(
        "unknown-policy",
        format!("plan `{}` names policy `{}`, which does not exist", plan.id, plan.policy),
    )
    .with_span(loaded.spans.policy.unwrap_or(loaded.spans.id))
    .with_help(help)
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
    fn find_policy(&self, dir: &Path, name: &str) -> Option<PathBuf> {
        match &self.copies {
            None => policy_file(dir, name),
            Some(copies) => ["toml", "yaml", "yml"]
                .iter()
                .map(|extension| dir.join(format!("{name}.{extension}")))
                .find(|path| copies.contains_key(path)),
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

    fn error_count(&self) -> usize {
        error_count(&self.diagnostics)
    }

    /// Loads and validates one plan file; `None` when it has errors.
    pub fn load_plan(&mut self, path: &Path) -> Option<Plan> {
        self.plan_file(path).map(|loaded| loaded.plan)
    }

    /// Loads and validates one policy file; `None` when it has errors.
    pub fn load_policy(&mut self, path: &Path) -> Option<Policy> {
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

    /// Loads every `*.toml`, `*.yaml`, `*.yml` in `plans_dir` (sorted by file
    /// name) and every policy in `policies_dir`, then runs the cross-file
    /// checks.
    pub fn load_catalog(&mut self, plans_dir: &Path, policies_dir: &Path) -> Catalog {
        let mut plans = Vec::new();
        for path in self.list(plans_dir) {
            plans.extend(self.plan_file(&path));
        }
        let mut policies = BTreeMap::new();
        for path in self.list(policies_dir) {
            if let Some(policy) = self.load_policy(&path) {
                self.add_policy(&mut policies, policy);
            }
        }
        let checks = Checks { default_required: true, policies_known: true };
        self.cross_check(&plans, &policies, &checks);
        Catalog { plans: plans.into_iter().map(|loaded| loaded.plan).collect(), policies }
    }

    /// For `--plan FILE`: the plan and the policy it names
    /// (`<policies_dir>/<policy>.toml`, or `.yaml`/`.yml`), with the
    /// plan-vs-policy checks.
    pub fn load_plan_with_policy(&mut self, plan_path: &Path, policies_dir: &Path) -> Option<(Plan, Policy)> {
        let errors_before = self.error_count();
        let loaded = self.plan_file(plan_path)?;
        let name = loaded.plan.policy.clone();
        let policy_path = self.find_policy(policies_dir, &name);
        let mut policies = BTreeMap::new();
        let Some(policy_path) = policy_path else {
            // Not found: said with the files looked for and how to point
            // at another folder.
            let folder = std::path::absolute(policies_dir).unwrap_or_else(|_| policies_dir.to_path_buf());
            let tried = ["toml", "yaml", "yml"].map(|extension| format!("`{name}.{extension}`")).join(", ");
            let help = format!(
                "looked for {tried} in `{}` (the policies folder: `--policies DIR` or `PLANRUN_POLICIES`; a \
                 relative folder is taken from the current folder)",
                folder.display()
            );
            self.diagnostics.push(unknown_policy(&loaded, help));
            return None;
        };
        // The policy file's own errors are reported, with no
        // `unknown-policy` on top.
        let policy = self.load_policy(&policy_path)?;
        policies.insert(policy.name.clone(), policy);
        let checks = Checks { default_required: false, policies_known: true };
        let loaded = vec![loaded];
        self.cross_check(&loaded, &policies, &checks);
        let plan = loaded.into_iter().next()?.plan;
        let policy = policies.remove(&name)?;
        (self.error_count() == errors_before).then_some((plan, policy))
    }

    /// For `planrun check PATH…`: a file is a plan when its top-level table
    /// has a `steps` or `id` key, else a service policy when it sits in a
    /// `service` folder or has a `guard`, `controller` or `recovery`
    /// section, else a policy; a folder loads every plan
    /// and policy file in it by the same rule (not recursive).
    ///
    /// Cross-file checks run over what was given; `no-default-plan` is not
    /// reported (a subset of plans need not hold the default), and
    /// `unknown-policy` only when at least one policy was given.
    pub fn load_paths(&mut self, paths: &[PathBuf]) -> Catalog {
        self.load_paths_with_policies(paths, None)
    }

    /// [`Loader::load_paths`], and a plan whose policy is not among the
    /// paths gets it from `policies_dir` (`<name>.toml`, `.yaml`, `.yml`),
    /// so that `planrun check plans/x.toml` reports the plan-vs-policy
    /// findings too. With a readable `policies_dir`, a policy found in
    /// neither place is `unknown-policy`.
    pub fn load_paths_with_policies(&mut self, paths: &[PathBuf], policies_dir: Option<&Path>) -> Catalog {
        let files = self.given_files(paths);
        let (plans, policies, checks) = self.load_given(files, policies_dir);
        self.cross_check(&plans, &policies, &checks);
        Catalog { plans: plans.into_iter().map(|loaded| loaded.plan).collect(), policies }
    }

    /// [`Loader::load_paths_with_policies`], and the given plans are also
    /// checked against the rest of the catalog in `plans_dir`, as routing
    /// will see them: a keyword or id clash, a keyword inside another plan's
    /// keyword, a second default plan. Only findings between a given plan and
    /// another plan are added; the other plans' own findings are not
    /// repeated (`planrun check` without paths reports them), and another
    /// plan that does not load is left out.
    pub fn load_paths_in_catalog(&mut self, paths: &[PathBuf], plans_dir: &Path, policies_dir: &Path) -> Catalog {
        let files = self.given_files(paths);
        let given_files: Vec<PathBuf> = files.iter().map(|path| same_file_key(path)).collect();
        let (given, policies, checks) = self.load_given(files, Some(policies_dir));
        self.cross_check(&given, &policies, &checks);
        let mut others = Vec::new();
        if plans_dir.is_dir() {
            let (mark, checked) = (self.diagnostics.len(), self.checked.len());
            for path in self.list(plans_dir) {
                if !given_files.contains(&same_file_key(&path)) {
                    others.extend(self.plan_file(&path));
                }
            }
            // The other files' own findings belong to their own check, and
            // they are not among the files checked.
            self.diagnostics.truncate(mark);
            self.checked.truncate(checked);
        }
        let first_given = others.len();
        let together: Vec<LoadedPlan> = others.into_iter().chain(given).collect();
        for finding in route_findings(&together) {
            let given_involved = finding.plans.iter().any(|&index| index >= first_given);
            let other_involved = finding.plans.iter().any(|&index| index < first_given);
            if given_involved && other_involved {
                self.diagnostics.push(finding.diagnostic);
            }
        }
        // A given plan's recovery plans are looked up in the whole catalog.
        for finding in recovery_plan_findings(&together) {
            if finding.plans.iter().any(|&index| index >= first_given) {
                self.diagnostics.push(finding.diagnostic);
            }
        }
        let plans = together.into_iter().skip(first_given).map(|loaded| loaded.plan).collect();
        Catalog { plans, policies }
    }

    /// The files named by `paths`, folders expanded (not recursive).
    fn given_files(&mut self, paths: &[PathBuf]) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for path in paths {
            if path.is_dir() {
                files.extend(self.list(path));
            } else {
                files.push(path.clone());
            }
        }
        files
    }

    /// The plans and policies in `files` (plus the policies the plans name
    /// from `policies_dir`) and which cross-file checks apply to them.
    fn load_given(
        &mut self,
        files: Vec<PathBuf>,
        policies_dir: Option<&Path>,
    ) -> (Vec<LoadedPlan>, BTreeMap<String, Policy>, Checks) {
        let mut plans = Vec::new();
        let mut policies = BTreeMap::new();
        for path in files {
            let Some((read, root)) = self.read(&path, FileKind::Unreadable) else {
                continue;
            };
            let is_plan = root.get("steps").is_some() || root.get("id").is_some();
            if is_plan {
                plans.extend(self.plan_from(read, &root));
            } else if is_service_policy(&path, &root) {
                self.service_policy_from(read, &root);
            } else if let Some(policy) = self.policy_from(&path, read, &root) {
                self.add_policy(&mut policies, policy);
            }
        }
        let dir = policies_dir.filter(|dir| dir.is_dir());
        if let Some(dir) = dir {
            let mut wanted: Vec<&str> = plans.iter().map(|loaded| loaded.plan.policy.as_str()).collect();
            wanted.sort_unstable();
            wanted.dedup();
            for name in wanted {
                if policies.contains_key(name) {
                    continue;
                }
                if let Some(path) = policy_file(dir, name)
                    && let Some(policy) = self.load_policy(&path)
                {
                    self.add_policy(&mut policies, policy);
                }
            }
        }
        let checks = Checks { default_required: false, policies_known: dir.is_some() || !policies.is_empty() };
        (plans, policies, checks)
    }

    /// Reads and parses a file for tests: its source id and tree.
    #[cfg(test)]
    pub(crate) fn read_for_tests(&mut self, path: &Path) -> Option<(usize, Node)> {
        self.read(path, FileKind::Unreadable).map(|(read, root)| (read.id, root))
    }

    /// Plan and policy files in a folder, sorted by file name; scenario
    /// files (`*.scenarios.toml`) are not among them. A folder that cannot
    /// be read is an `io-error`.
    fn list(&mut self, folder: &Path) -> Vec<PathBuf> {
        let entries = match std::fs::read_dir(folder) {
            Ok(entries) => entries,
            Err(error) => {
                self.diagnostics.push(Diagnostic::error(
                    "io-error",
                    format!("cannot read folder `{}`: {error}", display_path(folder)),
                ));
                return Vec::new();
            }
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_file() && loader::Format::of(path).is_some() && !is_scenario_file(path))
            .collect();
        paths.sort_by(|left, right| left.file_name().cmp(&right.file_name()));
        paths
    }

    /// Reads and parses a file meant to be of `kind`; `None` (and the file
    /// noted as not loaded) when it cannot be read or parsed.
    fn read(&mut self, path: &Path, kind: FileKind) -> Option<(ReadFile, Node)> {
        let parsed =
            loader::read(&mut self.sources, &mut self.diagnostics, path, self.copies.as_ref()).and_then(|read| {
                let file = self.sources.get(read.id)?;
                let root = loader::parse(file, read.id, read.format, &mut self.diagnostics)?;
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

    fn plan_file(&mut self, path: &Path) -> Option<LoadedPlan> {
        let (read, root) = self.read(path, FileKind::Plan)?;
        self.plan_from(read, &root)
    }

    fn plan_from(&mut self, read: ReadFile, root: &Node) -> Option<LoadedPlan> {
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

    fn policy_from(&mut self, path: &Path, read: ReadFile, root: &Node) -> Option<Policy> {
        let parse_errors = self.file_has_errors(read.id);
        let name = path.file_stem().map(|stem| stem.to_string_lossy().into_owned()).unwrap_or_default();
        let shown = read.source.path.clone();
        let workspace = self.workspace.as_deref();
        let policy =
            validate_policy(root, &name, read.source, workspace, &mut self.diagnostics).filter(|_| !parse_errors);
        self.note(FileKind::Policy, shown, Some(name), policy.is_some());
        policy
    }

    fn service_policy_from(&mut self, read: ReadFile, root: &Node) -> Option<ServicePolicy> {
        let parse_errors = self.file_has_errors(read.id);
        let policy = validate_service_policy(root, &read.source.path, &mut self.diagnostics).filter(|_| !parse_errors);
        self.note(FileKind::ServicePolicy, read.source.path, None, policy.is_some());
        policy
    }

    /// Whether the parser already reported an error in this file (a YAML
    /// anchor, say, which leaves a tree behind to validate).
    fn file_has_errors(&self, id: usize) -> bool {
        self.diagnostics
            .iter()
            .any(|diagnostic| diagnostic.is_error() && diagnostic.span.is_some_and(|span| span.source == id))
    }

    fn add_policy(&mut self, policies: &mut BTreeMap<String, Policy>, policy: Policy) {
        if let Some(first) = policies.get(&policy.name) {
            self.diagnostics.push(
                Diagnostic::error(
                    "duplicate-policy",
                    format!(
                        "policy `{}` is defined twice: `{}` and `{}`",
                        policy.name, first.source.path, policy.source.path
                    ),
                )
                .with_help("keep one file per policy name"),
            );
            return;
        }
        policies.insert(policy.name.clone(), policy);
    }

    fn cross_check(&mut self, plans: &[LoadedPlan], policies: &BTreeMap<String, Policy>, checks: &Checks) {
        self.diagnostics.extend(route_findings(plans).into_iter().map(|finding| finding.diagnostic));
        if checks.default_required {
            self.diagnostics.extend(recovery_plan_findings(plans).into_iter().map(|finding| finding.diagnostic));
        }

        let defaults: Vec<&LoadedPlan> = plans.iter().filter(|loaded| loaded.plan.default).collect();
        if defaults.is_empty() && !plans.is_empty() && checks.default_required {
            self.diagnostics.push(
                Diagnostic::error("no-default-plan", "no plan has `default = true`")
                    .with_help("mark exactly one plan `default = true`; it takes the goals that match no keyword"),
            );
        }
        for loaded in plans {
            match policies.get(&loaded.plan.policy) {
                Some(policy) => self.plan_vs_policy(loaded, policy),
                None if checks.policies_known => {
                    let known = policies.keys().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ");
                    let help = if known.is_empty() {
                        "add the policy file to the policies folder".to_string()
                    } else {
                        format!("known policies: {known}")
                    };
                    self.diagnostics.push(unknown_policy(loaded, help));
                }
                None => {}
            }
        }
    }

    fn plan_vs_policy(&mut self, loaded: &LoadedPlan, policy: &Policy) {
        // The policy's file rules, compiled once for both checks.
        let rules = PathRules::new(&policy.files);
        self.shell_always_denied(loaded, policy, &rules);
        self.file_always_denied(loaded, policy, &rules);
        for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
            if let (Some(retry), Some(span)) = (step.retry, spans.retry)
                && retry > policy.retry.cap
            {
                self.diagnostics.push(
                    loaded.soften(
                        Diagnostic::warning(
                            "retry-above-cap",
                            format!(
                                "step `{}` asks for {retry} attempts; policy `{}` caps them at {}",
                                step.id, policy.name, policy.retry.cap
                            ),
                        )
                        .with_span(span)
                        .with_label(format!("at most {} attempts will run", policy.retry.cap))
                        .with_help("lower `retry` or raise `retry.cap` in the policy"),
                    ),
                );
            }
            if let (Some(timeout), Some(span)) = (step.timeout_secs, spans.timeout)
                && timeout > policy.budget.step_timeout_secs
            {
                self.diagnostics.push(
                    loaded.soften(
                        Diagnostic::warning(
                            "timeout-above-budget",
                            format!(
                                "step `{}` asks for {timeout}s; policy `{}` allows {}s per step",
                                step.id, policy.name, policy.budget.step_timeout_secs
                            ),
                        )
                        .with_span(span)
                        .with_label(format!("the step is stopped after {}s", policy.budget.step_timeout_secs))
                        .with_help("lower `timeout_secs` or raise `budget.step_timeout_secs`"),
                    ),
                );
            }
        }
    }

    /// `shell-always-denied`: a shell step whose argv is fully literal and
    /// that the policy forbids before the program is even looked up (blocked
    /// name, no matching rule, a forbidding rule). Path slots are judged
    /// lexically, which is never stricter than the runtime, so the finding
    /// is certain; a step with templates is decided at run time.
    fn shell_always_denied(&mut self, loaded: &LoadedPlan, policy: &Policy, rules: &PathRules) {
        for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
            let Action::Shell { command } = &step.action else {
                continue;
            };
            let Some(argv) = command
                .iter()
                .map(|token| token.is_literal().then(|| token.source().to_string()))
                .collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            let evaluation = evaluate_argv(&policy.shell, rules, &argv);
            if evaluation.is_allowed() {
                continue;
            }
            let mut diagnostic = Diagnostic::warning(
                "shell-always-denied",
                format!(
                    "policy `{}` always denies step `{}` (`{}`): rule `{}`",
                    policy.name,
                    step.id,
                    display_argv(&argv),
                    evaluation.rule
                ),
            )
            .with_label(evaluation.reason)
            .with_help(denied_help(&evaluation.rule, policy, &argv));
            if let Some(span) = spans.command.or(Some(spans.id)) {
                diagnostic = diagnostic.with_span(span);
            }
            self.diagnostics.push(loaded.soften(diagnostic));
        }
    }

    /// `file-always-denied`: a `read_file` or `write_file` step whose path
    /// is literal and that the policy's file rules refuse (empty, the
    /// workspace itself, a protected folder such as `runs/`, `files.deny`),
    /// as `planrun plan` shows it and the run would fail `security_denied`.
    /// An absolute path or one with `..` is `path-outside-workspace`'s.
    fn file_always_denied(&mut self, loaded: &LoadedPlan, policy: &Policy, rules: &PathRules) {
        for (step, spans) in loaded.plan.steps.iter().zip(&loaded.spans.steps) {
            let (Action::ReadFile { path } | Action::WriteFile { path, .. }) = &step.action else {
                continue;
            };
            if !path.is_literal() {
                continue;
            }
            let Err(denied) = rules.check_path(path.source()) else {
                continue;
            };
            if denied.rule == "files.absolute" || denied.rule == "files.parent" {
                continue;
            }
            let diagnostic = Diagnostic::warning(
                "file-always-denied",
                format!(
                    "policy `{}` always denies step `{}` (path `{}`): rule `{}`",
                    policy.name,
                    step.id,
                    path.source().escape_debug(),
                    denied.rule
                ),
            )
            .with_span(spans.path.unwrap_or(spans.id))
            .with_label(denied.to_string())
            .with_help(
                "name a file inside the workspace that the policy's `[files]` allow; `planrun plan` shows the verdict",
            );
            self.diagnostics.push(loaded.soften(diagnostic));
        }
    }
}

/// How to fix a `shell-always-denied` step. `shell.blocked` is checked
/// before any `[[shell.allow]]` rule, so for a blocked program an allow rule
/// can never help and the hint must not suggest one (nor suggest that the
/// plan's author weaken the policy's block list).
fn denied_help(rule: &str, policy: &Policy, argv: &[String]) -> String {
    let check = format!("check it with `{}`", policy_check_command(policy, argv));
    match argv.first() {
        Some(program) if rule == "shell.blocked" => format!(
            "`{program}` is in `shell.blocked`, which no `[[shell.allow]]` rule can override: \
             use another program or a `write_file`/`read_file` step; {check}"
        ),
        _ => format!("allow the command in the policy's `[[shell.allow]]`, or {check}"),
    }
}

/// The `planrun policy check` command that asks `policy` (not the default
/// one) about `argv`: `--policy` unless it is the default policy,
/// `--policies` unless its file is in the default `policies` folder.
fn policy_check_command(policy: &Policy, argv: &[String]) -> String {
    let mut words = vec!["planrun".to_string(), "policy".to_string(), "check".to_string()];
    let folder = Path::new(&policy.source.path).parent().unwrap_or(Path::new(""));
    if folder != Path::new("policies") {
        let folder = if folder.as_os_str().is_empty() { Path::new(".") } else { folder };
        words.extend(["--policies".to_string(), folder.display().to_string()]);
    }
    if policy.name != DEFAULT_POLICY {
        words.extend(["--policy".to_string(), policy.name.clone()]);
    }
    words.push("--".to_string());
    words.extend(argv.iter().cloned());
    display_argv(&words)
}
