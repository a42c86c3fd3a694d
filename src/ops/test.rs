//! `planrun test`: run every declared scenario in its own sandbox and
//! compare what it produced with the golden snapshots.
//!
//! Each snapshot ends in one [`SnapshotState`]: it matches; it is new (no
//! `.snap` yet); or it changed, with the unified diff. Every mismatch of
//! every scenario is reported, never only the first. A pending snapshot is
//! written beside the golden one as `<name>.snap.new` (the file
//! `cargo insta review` reads), except under `CI=true`, where nothing is
//! written and a new snapshot fails like a changed one. With `accept`, new
//! and changed snapshots are written as `.snap` instead.
//!
//! Before the diffs, each scenario whose snapshots changed gets a
//! behaviour summary ([`ScenarioChange`], see `test_summary.rs`). The
//! digests the snapshots show as placeholders are proved by verifying each
//! scenario's records instead (see `scenario_run.rs`).
//!
//! Exit status: 0 when everything matches (new snapshots outside CI are
//! reported, and pending); 1 on a changed snapshot, an unmet expectation
//! (exit code, status, a missing record, records that do not verify) or,
//! under CI, a new snapshot; 2
//! when a scenario file has errors, two scenarios produce the same snapshot,
//! or a sandbox cannot be prepared.

use std::path::{Path, PathBuf};

use crate::diag::{Diagnostic, SourceMap};
use crate::load::{Loader, is_scenario_file, scenario_files_for};
use crate::ops::ExitStatus;
use crate::ops::scenario_run::{ScenarioContext, run_scenario};
use crate::ops::test_summary::{Bodies, summarize};
use crate::snapshot::{SnapFile, SnapshotError, first_changed_line, new_path, normalize_body, snap_path, unified_diff};

/// What to test.
pub struct TestInput<'a> {
    /// Scenario files, plan files (their scenario file beside them) or
    /// folders of scenario files; empty means every scenario file in `plans`.
    pub paths: &'a [PathBuf],
    pub plans: &'a Path,
    pub policies: &'a Path,
    /// The snapshots root; default `snapshots/` beside the plans folder.
    pub snapshots: Option<&'a Path>,
    /// The `planrun` binary the scenarios run.
    pub program: &'a Path,
    /// Write new and changed snapshots as `.snap`.
    pub accept: bool,
    /// `CI=true`: write nothing, and fail on new snapshots.
    pub ci: bool,
    /// See [`ScenarioContext::after_commands`]; `None` outside tests.
    pub after_commands: Option<fn(&Path)>,
}

/// How one snapshot compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotState {
    Matched,
    /// No `.snap` yet.
    New,
    /// The `.snap` holds something else; the unified diff from it.
    Changed {
        diff: String,
    },
    /// New or changed, and written as `.snap` (`--accept`, or `a` in
    /// `--review`).
    Accepted,
    /// New (`new`) or changed, and rejected in `--review`: its `.snap.new`
    /// is removed and the golden file, if any, stays.
    Rejected {
        new: bool,
    },
}

/// One snapshot of one scenario.
#[derive(Debug, Clone)]
pub struct SnapshotResult {
    /// `plans/flow_ls.scenarios.toml`, as shown.
    pub scenario_file: String,
    pub scenario: String,
    /// The golden file.
    pub path: PathBuf,
    pub state: SnapshotState,
    /// What the scenario produced.
    pub body: String,
    /// The golden body, when there is a `.snap`.
    pub golden: Option<String>,
    /// The line of the `.snap` file the new body changes first (counted
    /// from 1, header included): where an annotation points.
    pub changed_line: Option<usize>,
}

/// What changed in behaviour in one scenario whose snapshots are new or
/// changed: "step `step-4` finish message changed", "exit code unchanged",
/// "0 events added" ….
#[derive(Debug, Clone)]
pub struct ScenarioChange {
    pub scenario_file: String,
    pub scenario: String,
    pub sentences: Vec<String>,
}

/// The expectations of one scenario that did not hold.
#[derive(Debug, Clone)]
pub struct ScenarioProblems {
    pub scenario_file: String,
    pub scenario: String,
    pub problems: Vec<String>,
}

/// Everything `planrun test` found.
#[derive(Debug, Default)]
pub struct TestOutcome {
    /// How many scenarios ran.
    pub scenarios: usize,
    pub snapshots: Vec<SnapshotResult>,
    /// One per scenario with a new or changed snapshot, in order.
    pub changes: Vec<ScenarioChange>,
    pub problems: Vec<ScenarioProblems>,
    /// Findings in scenario files (nothing ran when any is an error).
    pub sources: SourceMap,
    pub diagnostics: Vec<Diagnostic>,
    /// Sandboxes or snapshot files that could not be used.
    pub errors: Vec<String>,
    pub ci: bool,
}

impl TestOutcome {
    /// How many snapshots are in `state` (compared by kind).
    pub fn count(&self, kind: fn(&SnapshotState) -> bool) -> usize {
        self.snapshots.iter().filter(|result| kind(&result.state)).count()
    }

    /// The new and changed snapshots, in order.
    pub fn pending(&self) -> impl Iterator<Item = &SnapshotResult> {
        self.snapshots
            .iter()
            .filter(|result| matches!(result.state, SnapshotState::New | SnapshotState::Changed { .. }))
    }

    /// The behaviour summary of `scenario` (of `scenario_file`), if it changed.
    pub fn change_of(&self, scenario_file: &str, scenario: &str) -> Option<&ScenarioChange> {
        self.changes.iter().find(|change| change.scenario_file == scenario_file && change.scenario == scenario)
    }

    /// 1 on a changed snapshot (a rejected change still differs from the
    /// golden file), a failed expectation, or a new snapshot under CI.
    pub fn exit_status(&self) -> ExitStatus {
        let changed =
            self.count(|state| matches!(state, SnapshotState::Changed { .. } | SnapshotState::Rejected { new: false }));
        let new = self.count(|state| matches!(state, SnapshotState::New));
        if !self.errors.is_empty() || self.diagnostics.iter().any(Diagnostic::is_error) {
            ExitStatus::InvalidInput
        } else if changed > 0 || !self.problems.is_empty() || (self.ci && new > 0) {
            ExitStatus::Failed
        } else {
            ExitStatus::Done
        }
    }
}

pub fn test(input: TestInput<'_>) -> TestOutcome {
    let mut outcome = TestOutcome { ci: input.ci, ..TestOutcome::default() };
    let files = match scenario_paths(input.paths, input.plans) {
        Ok(files) => files,
        Err(message) => {
            outcome.errors.push(message);
            return outcome;
        }
    };
    let mut loader = Loader::new();
    let loaded: Vec<_> = files.iter().filter_map(|path| loader.load_scenarios(path)).collect();
    outcome.sources = loader.sources().clone();
    outcome.diagnostics = loader.sorted_diagnostics().into_iter().cloned().collect();
    if loader.has_errors() {
        return outcome;
    }
    let default_root = input.plans.parent().unwrap_or(Path::new("")).join("snapshots");
    let root = input.snapshots.map_or(default_root, Path::to_path_buf);
    let context = ScenarioContext {
        program: input.program.to_path_buf(),
        plans: input.plans.to_path_buf(),
        policies: input.policies.to_path_buf(),
        after_commands: input.after_commands,
    };
    for file in &loaded {
        for scenario in &file.scenarios {
            outcome.scenarios += 1;
            let run = match run_scenario(file, scenario, &context) {
                Ok(run) => run,
                Err(error) => {
                    outcome.errors.push(format!("scenario `{}` ({}): {error}", scenario.name, file.source.path));
                    continue;
                }
            };
            if !run.problems.is_empty() {
                outcome.problems.push(ScenarioProblems {
                    scenario_file: file.source.path.clone(),
                    scenario: scenario.name.clone(),
                    problems: run.problems,
                });
            }
            for captured in run.captured {
                let path = snap_path(&root.join(&captured.folder), &captured.name);
                // Two scenarios (of different files) writing one snapshot
                // would each overwrite the other's golden file.
                if let Some(first) = outcome.snapshots.iter().find(|earlier| earlier.path == path) {
                    outcome.errors.push(format!(
                        "snapshot `{}` is produced by scenario `{}` ({}) and by scenario `{}` ({}): rename one",
                        path.display(),
                        first.scenario,
                        first.scenario_file,
                        scenario.name,
                        file.source.path
                    ));
                    continue;
                }
                let mut result = SnapshotResult {
                    scenario_file: file.source.path.clone(),
                    scenario: scenario.name.clone(),
                    path,
                    state: SnapshotState::Matched,
                    body: captured.body,
                    golden: None,
                    changed_line: None,
                };
                if let Err(error) = compare(&mut result, &input) {
                    outcome.errors.push(error.to_string());
                }
                outcome.snapshots.push(result);
            }
            let of_scenario: Vec<&SnapshotResult> = outcome
                .snapshots
                .iter()
                .filter(|result| result.scenario == scenario.name && result.scenario_file == file.source.path)
                .collect();
            if of_scenario.iter().any(|result| result.state != SnapshotState::Matched) {
                let bodies: Vec<Bodies<'_>> = of_scenario
                    .iter()
                    .map(|result| Bodies {
                        kind: snapshot_kind(&result.path),
                        golden: result.golden.as_deref(),
                        body: &result.body,
                    })
                    .collect();
                outcome.changes.push(ScenarioChange {
                    scenario_file: file.source.path.clone(),
                    scenario: scenario.name.clone(),
                    sentences: summarize(&bodies),
                });
            }
        }
    }
    outcome
}

/// `cli`, `state.json` …: the snapshot's name after the scenario's `@`.
fn snapshot_kind(path: &Path) -> &str {
    let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
    let name = name.strip_suffix(".snap").unwrap_or(name);
    name.split_once('@').map_or(name, |(_, kind)| kind)
}

/// Sets `result.state` and writes what the mode asks: the `.snap` when
/// accepting, the `.snap.new` of a pending snapshot outside CI; a stale
/// `.snap.new` of a matching snapshot is removed.
fn compare(result: &mut SnapshotResult, input: &TestInput<'_>) -> Result<(), SnapshotError> {
    let golden = SnapFile::read(&result.path)?;
    result.golden = golden.as_ref().map(|golden| golden.body.clone());
    result.state = match &golden {
        Some(golden) if golden.matches(&result.body) => SnapshotState::Matched,
        Some(golden) => {
            // The header's lines (`---`, each field, `---`) come first.
            result.changed_line = first_changed_line(&normalize_body(&golden.body), &normalize_body(&result.body))
                .map(|line| line + golden.metadata.len() + 2);
            SnapshotState::Changed {
                diff: unified_diff(&golden.body, &result.body, &result.path.display().to_string(), "new result"),
            }
        }
        None => SnapshotState::New,
    };
    if result.state == SnapshotState::Matched {
        return remove_pending(&result.path);
    }
    if input.accept {
        accept_snapshot(result)?;
        result.state = SnapshotState::Accepted;
    } else if !input.ci {
        pending_file(result, golden.as_ref()).write(&new_path(&result.path))?;
    }
    Ok(())
}

/// The file a new or changed snapshot becomes: the golden file's header
/// when there is one (so accepting changes only the body), else a header
/// naming the scenario file.
fn pending_file(result: &SnapshotResult, golden: Option<&SnapFile>) -> SnapFile {
    match golden {
        Some(golden) => SnapFile { metadata: golden.metadata.clone(), body: result.body.clone() },
        None => SnapFile::new(&result.scenario_file, &result.body),
    }
}

/// Writes `result` as its golden `.snap` and removes its `.snap.new`.
pub fn accept_snapshot(result: &SnapshotResult) -> Result<(), SnapshotError> {
    let golden = SnapFile::read(&result.path)?;
    pending_file(result, golden.as_ref()).write(&result.path)?;
    remove_pending(&result.path)
}

/// Drops a pending snapshot: removes its `.snap.new`, keeps the `.snap`.
pub fn reject_snapshot(result: &SnapshotResult) -> Result<(), SnapshotError> {
    remove_pending(&result.path)
}

fn remove_pending(path: &Path) -> Result<(), SnapshotError> {
    let pending = new_path(path);
    match std::fs::remove_file(&pending) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SnapshotError::Write { path: pending.display().to_string(), source }),
    }
}

/// The scenario files `paths` name (see [`TestInput::paths`]), in order.
fn scenario_paths(paths: &[PathBuf], plans: &Path) -> Result<Vec<PathBuf>, String> {
    let default = [plans.to_path_buf()];
    let paths = if paths.is_empty() { &default[..] } else { paths };
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| is_scenario_file(path))
                .collect();
            found.sort();
            files.extend(found);
        } else if !path.exists() {
            return Err(format!("`{}`: no such file or folder", path.display()));
        } else if is_scenario_file(path) {
            files.push(path.clone());
        } else {
            let beside = scenario_files_for(path);
            let found = beside.iter().find(|candidate| candidate.is_file()).ok_or_else(|| {
                format!("`{}` has no scenario file: declare its scenarios in `{}`", path.display(), beside[0].display())
            })?;
            files.push(found.clone());
        }
    }
    Ok(files)
}
