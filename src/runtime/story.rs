//! A run read back as `approve` and `resume` would judge it: the store's
//! strict read (seals, chains, strict JSON), then the story checks
//! ([`check_story`]: the frozen action at the cursor, the evidence path,
//! the approval bound to the action) against the plan the run started
//! with. `verify`, `show` and `runs` read runs through here, so none of
//! them calls a run verified that `approve` or `resume` refuses.

use std::collections::HashMap;
use std::path::Path;

use crate::model::Plan;
use crate::runtime::interpreter::check_story;
use crate::runtime::run_files::{ChangedFiles, load_files};
use crate::store::{LoadedRun, RunStore, StoreError};

/// Whether the story checks ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoryCheck {
    /// The plan loaded, unchanged, and the story fits it.
    Checked,
    /// The plan the run started with cannot be loaded as it was (missing,
    /// invalid or changed), so only the store's checks ran: why.
    /// `approve` and `resume` refuse such a run for its files.
    Unchecked(String),
}

/// The plans story checks loaded, by the plan reference a run recorded
/// (paths, absolute paths, digests, id, step count): reading many runs of
/// one plan (`runs`) loads its files once, not once per run.
#[derive(Default)]
pub struct StoryPlans {
    loaded: HashMap<String, Result<Plan, String>>,
}

/// Reads run `run_id` of `workspace` strictly and checks its story; a story
/// the plan could not produce is [`StoreError::Tampered`] naming every
/// failed check. The plan is looked for as `resume` looks for it.
pub fn read_checked(
    store: &dyn RunStore,
    run_id: &str,
    workspace: &Path,
) -> Result<(LoadedRun, StoryCheck), StoreError> {
    read_checked_with(store, run_id, workspace, &mut StoryPlans::default())
}

/// [`read_checked`], taking the plan from `plans` when an earlier run of
/// this command recorded the same plan reference.
pub fn read_checked_with(
    store: &dyn RunStore,
    run_id: &str,
    workspace: &Path,
    plans: &mut StoryPlans,
) -> Result<(LoadedRun, StoryCheck), StoreError> {
    let loaded = store.read_run(run_id)?;
    let key = serde_json::to_string(&loaded.state.plan).unwrap_or_default();
    let plan = plans.loaded.entry(key).or_insert_with(|| {
        load_files(&loaded.state, ChangedFiles::Refuse, workspace)
            .map(|(plan, _)| plan)
            .map_err(|error| error.to_string())
    });
    let check = match plan {
        Ok(plan) => {
            check_story(plan, &loaded.state, &loaded.history)?;
            StoryCheck::Checked
        }
        Err(error) => StoryCheck::Unchecked(format!(
            "the plan it started with (`{}`) cannot be loaded unchanged: {error}",
            loaded.state.plan.path
        )),
    };
    Ok((loaded, check))
}
