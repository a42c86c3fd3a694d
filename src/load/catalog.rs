//! A [`Catalog`] of plans and policies: the files of the plans and
//! policies folders ([`Loader::load_catalog`]), a plan and the policy it
//! names (`--plan FILE`), or the paths `planrun check` is given, each
//! followed by the checks across its files (`cross_check.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, display_path};
use crate::load::checked::FileKind;
use crate::load::cross_check::{Checks, cross_check, unknown_policy};
use crate::load::loaded_plan::LoadedPlan;
use crate::load::loader::{Loader, policy_file};
use crate::load::node::Node;
use crate::load::read_file::{EXTENSIONS, Format};
use crate::load::route_checks::{recovery_plan_findings, route_findings};
use crate::load::validate_scenario::is_scenario_file;
use crate::model::{Plan, Policy};

/// Valid plans and policies, by file.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// In the order loaded (file name order within a folder).
    pub plans: Vec<Plan>,
    /// By name (the file stem).
    pub policies: BTreeMap<String, Policy>,
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

impl Loader {
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
        cross_check(&plans, &policies, &checks, &mut self.diagnostics);
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
            let tried = EXTENSIONS.map(|extension| format!("`{name}.{extension}`")).join(", ");
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
        cross_check(&loaded, &policies, &checks, &mut self.diagnostics);
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
        cross_check(&plans, &policies, &checks, &mut self.diagnostics);
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
        cross_check(&given, &policies, &checks, &mut self.diagnostics);
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
            .filter(|path| path.is_file() && Format::of(path).is_some() && !is_scenario_file(path))
            .collect();
        paths.sort_by(|left, right| left.file_name().cmp(&right.file_name()));
        paths
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
}
