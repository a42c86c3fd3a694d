//! The sandbox one scenario runs in: a temporary folder under `/tmp` with
//! `project/` (a copy of the plans and policies, the current directory of
//! every command) and a fresh `workspace/` beside it filled from the
//! scenario's fixtures, and the real `planrun` binary run for each command.
//! The workspace is not below the current directory, so planrun prints its
//! absolute path, which reads `[WORKSPACE]` in the snapshots.
//!
//! What the sandbox fixes, so that a snapshot only changes when behaviour
//! does: the environment is cleared (nothing leaks in from the caller's
//! shell) and holds only `PLANRUN_TEST_CLOCK` (the injected clock and ids),
//! `NO_COLOR` and what the scenario declares; the folder is always
//! `/tmp/planrun??????` (not `$TMPDIR`), so its length, which shows in byte
//! counts of `pwd` output, is the same on every machine; and its paths read
//! `[WORKSPACE]` and `[TMP]` in everything captured.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::model::{Fixture, FixtureContent, Stage};
use crate::strict_json::{self, JsonError};

/// The sandbox could not be prepared or a command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot create the scenario sandbox: {0}")]
    Create(std::io::Error),
    #[error("cannot copy `{from}` into the sandbox: {source}")]
    Copy { from: String, source: std::io::Error },
    #[error("cannot write fixture `{path}`: {source}")]
    Fixture { path: String, source: std::io::Error },
    /// A `.json` fixture planrun will read (`tickets.json`) that is not
    /// strict JSON: the scenario would test the reader's refusal, not the
    /// plan.
    #[error("fixture `{path}` is not strict JSON: {error}")]
    FixtureJson { path: String, error: JsonError },
    /// A git fixture could not be built: `git` is missing or refused a command.
    #[error("cannot build git fixture `{path}`: {message}")]
    GitFixture { path: String, message: String },
    #[error("cannot start `{program}`: {source}")]
    Spawn { program: String, source: std::io::Error },
}

/// What one command printed, with its exit code (-1 when a signal ended it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl StageOutput {
    /// The CLI snapshot of one command: exit code, stdout and stderr in one
    /// text (the shape of every `@cli.snap`).
    pub fn snapshot(&self) -> String {
        format!("exit_code: {}\n----- stdout -----\n{}----- stderr -----\n{}", self.code, self.stdout, self.stderr)
    }
}

/// A prepared sandbox; the folder is removed when it is dropped.
pub struct Sandbox {
    dir: tempfile::TempDir,
    program: PathBuf,
}

impl Sandbox {
    /// A fresh folder holding `project/plans/` and `project/policies/`
    /// (copies of the given folders) and an empty `workspace/`.
    pub fn new(program: &Path, plans: &Path, policies: &Path) -> Result<Sandbox, SandboxError> {
        let dir = tempfile::Builder::new().prefix("planrun").tempdir_in("/tmp").map_err(SandboxError::Create)?;
        let sandbox = Sandbox { dir, program: program.to_path_buf() };
        copy_tree(plans, &sandbox.project().join("plans"))?;
        copy_tree(policies, &sandbox.project().join("policies"))?;
        fs::create_dir_all(sandbox.workspace()).map_err(SandboxError::Create)?;
        Ok(sandbox)
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The current directory of every command: `plans/` and `policies/`.
    pub fn project(&self) -> PathBuf {
        self.root().join("project")
    }

    pub fn workspace(&self) -> PathBuf {
        self.root().join("workspace")
    }

    /// Writes the fixtures into the workspace; a copied file keeps its
    /// source's modification time. `base` is the scenario file's folder.
    /// A fixture named `*.json` must be strict JSON ([`strict_json`]).
    pub fn fill(&self, fixtures: &[Fixture], base: &Path) -> Result<(), SandboxError> {
        for fixture in fixtures {
            let path = self.workspace().join(&fixture.path);
            let error = |source| SandboxError::Fixture { path: fixture.path.clone(), source };
            if fixture.path.ends_with(".json") {
                let text = match &fixture.content {
                    FixtureContent::Text(text) => text.clone(),
                    FixtureContent::Source(source) => fs::read_to_string(base.join(source)).map_err(error)?,
                };
                strict_json::parse(&text)
                    .map_err(|error| SandboxError::FixtureJson { path: fixture.path.clone(), error })?;
            }
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(error)?;
            }
            match &fixture.content {
                FixtureContent::Text(text) => fs::write(&path, text).map_err(error)?,
                FixtureContent::Source(source) => {
                    let from = base.join(source);
                    fs::copy(&from, &path).map_err(error)?;
                    let modified = fs::metadata(&from).and_then(|metadata| metadata.modified()).map_err(error)?;
                    fs::File::options()
                        .write(true)
                        .open(&path)
                        .and_then(|file| file.set_modified(modified))
                        .map_err(error)?;
                }
            }
        }
        Ok(())
    }

    /// Runs one command from `project/` against the workspace.
    pub fn run(&self, stage: &Stage) -> Result<StageOutput, SandboxError> {
        let output = Command::new(&self.program)
            .current_dir(self.project())
            .args(&stage.args)
            .arg("--workspace")
            .arg(self.workspace())
            .env_clear()
            .env("PLANRUN_TEST_CLOCK", &stage.clock)
            .env("NO_COLOR", "1")
            .envs(&stage.env)
            .output()
            .map_err(|source| SandboxError::Spawn { program: self.program.display().to_string(), source })?;
        Ok(StageOutput {
            code: output.status.code().unwrap_or(-1),
            stdout: self.filter(&String::from_utf8_lossy(&output.stdout)),
            stderr: self.filter(&String::from_utf8_lossy(&output.stderr)),
        })
    }

    /// A workspace file, paths filtered; `None` when it does not exist.
    pub fn workspace_file(&self, relative: &str) -> Option<String> {
        fs::read(self.workspace().join(relative)).ok().map(|bytes| self.filter(&String::from_utf8_lossy(&bytes)))
    }

    /// Replaces the sandbox's paths with `[WORKSPACE]` and `[TMP]`.
    pub fn filter(&self, text: &str) -> String {
        let root = self.root();
        let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut text = text.to_string();
        for (from, to) in [
            (canonical.join("workspace"), "[WORKSPACE]"),
            (root.join("workspace"), "[WORKSPACE]"),
            (canonical.clone(), "[TMP]"),
            (root.to_path_buf(), "[TMP]"),
        ] {
            text = text.replace(&from.display().to_string(), to);
        }
        text
    }
}

/// Copies the files of `from` (and its subfolders) to `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<(), SandboxError> {
    let error = |source| SandboxError::Copy { from: from.display().to_string(), source };
    fs::create_dir_all(to).map_err(error)?;
    for entry in fs::read_dir(from).map_err(error)? {
        let entry = entry.map_err(error)?;
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target)?;
        } else {
            fs::copy(&path, &target).map_err(error)?;
        }
    }
    Ok(())
}
