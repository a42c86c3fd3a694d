//! The plan and policy files a run started with, loaded again for a
//! control command that needs the plan (`resume` to continue, `approve` to
//! check the frozen action against it, `verify` to check its story).
//!
//! A run records each file's path as it was given (often relative to the
//! folder it was started in) and as an absolute path. Each is looked for
//! relative to the current folder, then at its recorded absolute path, then
//! relative to the workspace's parent folder (the project's folder in the usual layout:
//! `plans/`, `policies/` and `workspace/` side by side), so that a command
//! run from any folder finds them; of these, the first with the content the
//! run recorded (its digest) is taken, and a changed file is refused as
//! before. A file found in none of them is named with every path tried.

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, SourceMap};
use crate::digest::sha256_hex;
use crate::load::Loader;
use crate::model::{Plan, Policy};
use crate::store::RunState;

/// Why the files a run started with cannot be used now.
#[derive(Debug, thiserror::Error)]
pub enum RunFilesError {
    /// The plan or policy files the run was started with are invalid now.
    #[error("the run's plan or policy files are invalid")]
    Invalid { sources: SourceMap, diagnostics: Vec<Diagnostic> },
    /// A file is found neither where it was nor beside the workspace; names
    /// the paths tried.
    #[error("{0}")]
    Missing(String),
    /// A file changed since the run started (and that is not allowed), or
    /// the plan is no longer the one the run started.
    #[error("{0}")]
    Changed(String),
}

/// A plan or policy file as a run recorded it.
struct RecordedFile<'a> {
    /// Its path as it was given (often relative).
    recorded: &'a str,
    /// Its absolute path, where the record has it.
    absolute: Option<&'a str>,
    /// The digest of its content when the run started.
    sha256: &'a str,
}

/// What a control command does with a plan or policy file whose digest
/// changed since the run started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangedFiles {
    /// Load it anyway (`resume --allow-changed-files`, and reading an ended
    /// run's story).
    Allow,
    /// Refuse (reading a run's story: it is then not checked).
    Refuse,
    /// Refuse, saying how `resume` may go on anyway.
    RefuseResume,
    /// Refuse: a frozen action is approved only against the plan it came
    /// from, and `approve` has no way around that.
    RefuseApprove,
}

/// Loads the plan and policy a run of `workspace` started with, from the
/// paths it recorded (see the module notes), and refuses files whose digest
/// changed unless allowed.
pub fn load_files(
    state: &RunState,
    changed_files: ChangedFiles,
    workspace: &Path,
) -> Result<(Plan, Policy), RunFilesError> {
    let plan = &state.plan;
    let plan_file = RecordedFile { recorded: &plan.path, absolute: plan.plan_file.as_deref(), sha256: &plan.sha256 };
    let policy_file = RecordedFile {
        recorded: &plan.policy_path,
        absolute: plan.policy_file.as_deref(),
        sha256: &plan.policy_sha256,
    };
    let plan_path = locate(state, "plan", &plan_file, workspace)?;
    let policy_path = locate(state, "policy", &policy_file, workspace)?;
    let mut loader = Loader::new();
    let plan = loader.load_plan(&plan_path);
    let policy = loader.load_policy(&policy_path);
    let (Some(plan), Some(policy)) = (plan, policy) else {
        let (sources, diagnostics) = (loader.sources().clone(), loader.diagnostics().to_vec());
        return Err(RunFilesError::Invalid { sources, diagnostics });
    };
    let mut changed = Vec::new();
    if plan.source.sha256 != state.plan.sha256 {
        changed.push(format!("plan `{}`", state.plan.path));
    }
    if policy.source.sha256 != state.plan.policy_sha256 {
        let parents = if policy.extends.is_empty() {
            String::new()
        } else {
            format!(" (or a policy it extends: {})", policy.extends.join(", "))
        };
        changed.push(format!("policy `{}`{parents}", state.plan.policy_path));
    }
    let why = match changed_files {
        ChangedFiles::Allow => None,
        ChangedFiles::Refuse => Some(String::new()),
        ChangedFiles::RefuseResume => Some(
            "; resuming would run steps that were not part of it (pass `--allow-changed-files` to continue anyway)"
                .to_string(),
        ),
        ChangedFiles::RefuseApprove => Some(format!(
            "; its frozen action is approved only against the files it came from: restore them to approve it, or \
             end the run with `planrun reject {id}` or `planrun cancel {id}`",
            id = state.run_id
        )),
    };
    if let (false, Some(why)) = (changed.is_empty(), why) {
        return Err(RunFilesError::Changed(format!(
            "{} changed since run `{}` started{why}",
            changed.join(" and "),
            state.run_id
        )));
    }
    if plan.id != state.plan.id || plan.steps.len() != state.plan.step_count {
        return Err(RunFilesError::Changed(format!(
            "`{}` is no longer the plan `{}` with {} steps that the run started",
            state.plan.path, state.plan.id, state.plan.step_count
        )));
    }
    Ok((plan, policy))
}

/// Where the file run `state` recorded as `file` (its `what`: plan or
/// policy) is now: relative to the current folder, at its
/// absolute path or relative to `workspace`'s parent folder, the first that holds
/// the recorded content, else the first that exists (refused later as
/// changed, unless allowed); [`RunFilesError::Missing`] naming every
/// path tried when none does.
fn locate(state: &RunState, what: &str, file: &RecordedFile<'_>, workspace: &Path) -> Result<PathBuf, RunFilesError> {
    let RecordedFile { recorded, absolute, sha256 } = *file;
    let recorded_path = Path::new(recorded);
    let here = std::path::absolute(recorded_path).unwrap_or_else(|_| recorded_path.to_path_buf());
    let project = std::path::absolute(workspace).ok().and_then(|workspace| Some(workspace.parent()?.join(recorded)));
    // The recorded path itself first, when it is there (the loaded file
    // then keeps that path in messages), then the absolute one.
    let mut tried: Vec<(PathBuf, PathBuf)> = vec![(recorded_path.to_path_buf(), here)];
    for path in absolute.map(PathBuf::from).into_iter().chain(project.filter(|_| recorded_path.is_relative())) {
        if !tried.iter().any(|(_, seen)| *seen == path) {
            tried.push((path.clone(), path));
        }
    }
    let same = |path: &PathBuf| std::fs::read(path).is_ok_and(|bytes| sha256_hex(&bytes) == sha256);
    let found =
        tried.iter().position(|(_, path)| same(path)).or_else(|| tried.iter().position(|(_, path)| path.is_file()));
    if let Some(index) = found {
        return Ok(tried.swap_remove(index).0);
    }
    let tried: Vec<String> = tried.iter().map(|(_, path)| format!("`{}`", path.display())).collect();
    Err(RunFilesError::Missing(format!(
        "run `{}` was started with {what} file `{recorded}`, which is not found now: looked for {} (relative to \
         the current folder, as recorded when the run started, then relative to the workspace's parent folder); \
         restore the file, or run the command from the folder the run was started in",
        state.run_id,
        tried.join(" and ")
    )))
}
