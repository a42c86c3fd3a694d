//! `planrun export <run_id> --out DIR`: a run of a database store written
//! as the file store's folder `DIR/runs/<run_id>/`, verified before it is
//! written, so that `planrun verify --workspace DIR <run_id>` (and `show`,
//! and the snapshot tests) read it as any run.

use std::path::{Path, PathBuf};

use crate::ops::OpsError;
use crate::runtime::RuntimeEnv;
use crate::store::RunId;

/// What `export` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub run_id: String,
    /// `DIR/runs/<run_id>`.
    pub folder: PathBuf,
}

/// Exports run `run_id` (`latest`: the newest) of the store of `workspace`
/// into the workspace folder `out`.
pub fn export(workspace: &Path, run_id: &RunId, out: &Path, env: &RuntimeEnv) -> Result<Exported, OpsError> {
    let store = env.store(workspace);
    let run_id = crate::ops::show::resolve(store.as_ref(), run_id.as_str(), workspace)?;
    let folder = store.export_run(&run_id, out)?;
    Ok(Exported { run_id, folder })
}
