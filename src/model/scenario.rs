//! A validated scenario file: the declared runs of a plan whose CLI output
//! and records `planrun test` pins as golden snapshots.
//!
//! A scenario is one run (`--goal` or `--plan`) in a fresh sandbox, then
//! optional follow-up commands (`approve`, `resume`, `reject` …) against
//! the same workspace. Everything that varies from machine to machine is
//! either fixed by the sandbox (clock, ids, paths) or declared here as a
//! normalisation rule, so a snapshot diff is a change in behaviour.

use std::collections::BTreeMap;
use std::path::PathBuf;

use regex::Regex;

use crate::model::{RunStatus, SourceRef};

/// The record files of a run a scenario snapshots by default.
pub const DEFAULT_RECORDS: &[&str] = &["plan.json", "state.json", "history.jsonl", "audit.jsonl"];

/// The clock start of a scenario's first command unless it says otherwise.
pub const DEFAULT_CLOCK: &str = "2026-01-01T00:00:00Z";

/// The snapshot folder (below the snapshots root) of a scenario that names none.
pub const DEFAULT_FOLDER: &str = "runs";

/// A scenario file (`plans/<plan>.scenarios.toml`) after validation.
///
/// Invariants: scenario names are unique in the file and valid names; every
/// regex compiled; fixture and snapshot paths are workspace-relative.
#[derive(Debug, Clone)]
pub struct ScenarioFile {
    pub source: SourceRef,
    /// The folder that holds the file: fixture `source` paths are relative to it.
    pub dir: PathBuf,
    pub scenarios: Vec<Scenario>,
}

/// One declared scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Names its snapshots: `<name>@cli.snap`, `<name>@<record>.snap`.
    pub name: String,
    /// The folder below the snapshots root that holds its snapshots.
    pub folder: String,
    /// The first command: the run itself.
    pub run: Stage,
    pub run_id: String,
    /// The status `state.json` must hold once every stage has run.
    pub expect_status: Option<RunStatus>,
    /// Files written into the fresh workspace before the run.
    pub fixtures: Vec<Fixture>,
    /// Git repositories built in the fresh workspace, after the fixtures.
    pub git: Vec<GitFixture>,
    /// Record files of `runs/<run_id>/` to snapshot.
    pub records: Vec<String>,
    /// Workspace files to snapshot after the last stage.
    pub files: Vec<String>,
    /// Applied to every snapshot of the scenario.
    pub normalize: Vec<Normalize>,
    /// Follow-up commands, in order.
    pub steps: Vec<Stage>,
    /// Answers a scripted model serves, in order, to the scenario's agent
    /// steps (`PLANRUN_MODEL_ENDPOINT` points every command at it).
    pub model_answers: Vec<String>,
}

/// One process of a scenario: its arguments (before the sandbox's
/// `--workspace`), clock start, environment and expected exit code.
#[derive(Debug, Clone)]
pub struct Stage {
    pub args: Vec<String>,
    /// The `===== <label>` line above this stage's output in the CLI
    /// snapshot; `None` prints the output alone (a one-command scenario).
    pub label: Option<String>,
    pub clock: String,
    pub env: BTreeMap<String, String>,
    /// `None`: not checked (the snapshot still records it). `-1` is a
    /// process killed by a signal (a crash point).
    pub expect_code: Option<i32>,
    /// Applied to this stage's output only.
    pub normalize: Vec<Normalize>,
}

/// What a workspace file of `files` snapshots as: its last path component
/// (`data/tickets.json` is `<scenario>@tickets.json`).
pub fn file_snapshot_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A file of the fresh workspace.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// Workspace-relative path.
    pub path: String,
    pub content: FixtureContent,
}

/// Where a fixture's bytes come from.
#[derive(Debug, Clone)]
pub enum FixtureContent {
    Text(String),
    /// A file relative to the scenario file's folder, copied with its
    /// modification time.
    Source(PathBuf),
}

/// The author and committer of every commit of a git fixture.
pub const GIT_FIXTURE_AUTHOR: (&str, &str) = ("planrun fixture", "fixture@planrun.invalid");

/// The author and committer date of a git fixture's first commit (Unix
/// seconds, `2026-01-01T00:00:00Z`); each later commit is one hour later.
pub const GIT_FIXTURE_EPOCH: i64 = 1_767_225_600;

/// The branch a git fixture's commits go on unless it names one.
pub const DEFAULT_GIT_BRANCH: &str = "main";

/// A git repository a scenario builds in its workspace with the real `git`
/// program, commit by commit, with a fixed author, committer and dates and
/// no global or system configuration, so its commit ids are the same on
/// every machine.
///
/// Invariants: `path` is workspace-relative; `branch` and every tag are
/// valid ref names, tags unique; every file path is relative to the
/// repository, outside `.git`; a removed file was added by an earlier
/// commit and not removed since.
#[derive(Debug, Clone)]
pub struct GitFixture {
    /// The repository's folder, workspace-relative.
    pub path: String,
    pub branch: String,
    /// At least one.
    pub commits: Vec<GitCommit>,
}

/// One commit of a git fixture.
#[derive(Debug, Clone)]
pub struct GitCommit {
    pub message: String,
    /// Files written (created or replaced) before the commit: repository-relative path → text.
    pub files: BTreeMap<String, String>,
    /// Files deleted before the commit.
    pub remove: Vec<String>,
    /// A lightweight tag on the commit.
    pub tag: Option<String>,
}

/// A rule for volatile text: every match of `regex` becomes `replacement`
/// (`$1` names a group), like an insta filter.
#[derive(Debug, Clone)]
pub struct Normalize {
    pub regex: Regex,
    pub replacement: String,
}

impl Normalize {
    /// `text` with every match replaced.
    pub fn apply(&self, text: &str) -> String {
        self.regex.replace_all(text, self.replacement.as_str()).into_owned()
    }
}
