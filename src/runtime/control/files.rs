//! The plan and policy files a run started with, loaded again for a
//! control command that needs the plan (`resume` to continue, `approve` to
//! check the frozen action against it).
//!
//! A run records its files' paths as they were given, relative to the
//! folder it was started in. Each is looked for there (the current folder,
//! as before), then relative to the workspace's parent folder (the
//! project's folder in the usual layout, `plans/`, `policies/` and
//! `workspace/` side by side), so that a command run from another folder
//! with `--workspace` finds them; of the two, the one with the content the
//! run recorded (its digest) is taken, and a changed file is refused as
//! before. A file found in neither place is named with both paths tried.

use std::path::{Path, PathBuf};

use crate::digest::sha256_hex;
use crate::load::Loader;
use crate::model::{Plan, Policy};
use crate::runtime::control::error::ControlError;
use crate::store::RunState;

/// Loads the plan and policy a run of `workspace` started with, from the
/// paths it recorded (see the module notes), and refuses files whose digest
/// changed unless allowed.
pub(super) fn load_files(
    state: &RunState,
    allow_changed: bool,
    workspace: &Path,
) -> Result<(Plan, Policy), ControlError> {
    let plan_path = locate(state, "plan", (&state.plan.path, &state.plan.sha256), workspace)?;
    let policy_path = locate(state, "policy", (&state.plan.policy_path, &state.plan.policy_sha256), workspace)?;
    let mut loader = Loader::new();
    let plan = loader.load_plan(&plan_path);
    let policy = loader.load_policy(&policy_path);
    let (Some(plan), Some(policy)) = (plan, policy) else {
        let (sources, diagnostics) = (loader.sources().clone(), loader.diagnostics().to_vec());
        return Err(ControlError::Files { sources, diagnostics });
    };
    let mut changed = Vec::new();
    if plan.source.sha256 != state.plan.sha256 {
        changed.push(format!("plan `{}`", state.plan.path));
    }
    if policy.source.sha256 != state.plan.policy_sha256 {
        changed.push(format!("policy `{}`", state.plan.policy_path));
    }
    if !changed.is_empty() && !allow_changed {
        return Err(ControlError::Refused(format!(
            "{} changed since run `{}` started; resuming would run steps that were not part of it (pass `--allow-changed-files` to continue anyway)",
            changed.join(" and "),
            state.run_id
        )));
    }
    if plan.id != state.plan.id || plan.steps.len() != state.plan.step_count {
        return Err(ControlError::Refused(format!(
            "`{}` is no longer the plan `{}` with {} steps that the run started",
            state.plan.path, state.plan.id, state.plan.step_count
        )));
    }
    Ok((plan, policy))
}

/// Where the file run `state` recorded as `recorded` with digest `sha256`
/// (its `what`: plan or policy) is now: relative to the current folder or
/// to `workspace`'s parent folder, the first that holds the recorded
/// content, else the first that exists (refused later as changed, unless
/// allowed); [`ControlError::FilesMissing`] naming both when neither does.
fn locate(
    state: &RunState,
    what: &str,
    (recorded, sha256): (&str, &str),
    workspace: &Path,
) -> Result<PathBuf, ControlError> {
    let recorded_path = Path::new(recorded);
    let here = std::path::absolute(recorded_path).unwrap_or_else(|_| recorded_path.to_path_buf());
    let project = std::path::absolute(workspace).ok().and_then(|workspace| Some(workspace.parent()?.join(recorded)));
    let mut tried = vec![here];
    tried.extend(project.filter(|path| recorded_path.is_relative() && !tried.contains(path)));
    // As recorded when it is there (the loaded file keeps that path).
    let as_loaded = |index: usize, path: &PathBuf| if index == 0 { recorded_path.to_path_buf() } else { path.clone() };
    let same = |path: &PathBuf| std::fs::read(path).is_ok_and(|bytes| sha256_hex(&bytes) == sha256);
    let found = tried.iter().position(same).or_else(|| tried.iter().position(|path| path.is_file()));
    if let Some(index) = found {
        return Ok(as_loaded(index, &tried[index]));
    }
    let tried: Vec<String> = tried.iter().map(|path| format!("`{}`", path.display())).collect();
    Err(ControlError::FilesMissing(format!(
        "run `{}` was started with {what} file `{recorded}`, which is not found now: looked for {} (relative to \
         the current folder, then to the workspace's parent folder); run the command from the folder the run was \
         started in, or restore the file",
        state.run_id,
        tried.join(" and ")
    )))
}
