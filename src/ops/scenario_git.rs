//! Builds a scenario's git fixtures ([`GitFixture`]) in its sandbox's
//! workspace with the real `git` program.
//!
//! What makes the commit ids the same on every machine: `git` runs with an
//! empty environment but for `PATH` (the default policy's search path),
//! `LANG=C`, `TZ=UTC`, no global or system configuration
//! (`GIT_CONFIG_GLOBAL=/dev/null`, `GIT_CONFIG_NOSYSTEM=1`), and a fixed
//! author and committer ([`GIT_FIXTURE_AUTHOR`]) whose dates start at
//! [`GIT_FIXTURE_EPOCH`] and go up one hour per commit. A commit id hashes
//! only its tree, parents, author, committer, dates and message, none of
//! which depends on the machine or on the `git` version.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::model::{GIT_FIXTURE_AUTHOR, GIT_FIXTURE_EPOCH, GitFixture};
use crate::ops::scenario_sandbox::SandboxError;

/// Where `git` is looked for.
const GIT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Seconds between two commits of a fixture.
const COMMIT_SPACING_SECS: i64 = 3600;

/// Builds `fixture` below `workspace`: `git init`, then each commit's file
/// writes and removals, `git add -A`, `git commit` and its tag.
pub(crate) fn build_git_fixture(workspace: &Path, fixture: &GitFixture) -> Result<(), SandboxError> {
    let repo = workspace.join(&fixture.path);
    let io = |what: String| {
        let path = fixture.path.clone();
        move |source: std::io::Error| SandboxError::GitFixture { path, message: format!("{what}: {source}") }
    };
    fs::create_dir_all(&repo).map_err(io("cannot create the repository's folder".to_string()))?;
    git(fixture, &repo, 0, &["init", "--quiet", &format!("--initial-branch={}", fixture.branch)])?;
    for (index, commit) in fixture.commits.iter().enumerate() {
        for path in &commit.remove {
            fs::remove_file(repo.join(path)).map_err(io(format!("cannot remove `{path}`")))?;
        }
        for (path, text) in &commit.files {
            let file = repo.join(path);
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent).map_err(io(format!("cannot create the folder of `{path}`")))?;
            }
            fs::write(&file, text).map_err(io(format!("cannot write `{path}`")))?;
        }
        git(fixture, &repo, index, &["add", "--all"])?;
        git(fixture, &repo, index, &["commit", "--quiet", "--allow-empty", "--no-verify", "-m", &commit.message])?;
        if let Some(tag) = &commit.tag {
            git(fixture, &repo, index, &["tag", tag])?;
        }
    }
    Ok(())
}

/// Runs `git ARGS` in `repo` as the `index`-th commit's author.
fn git(fixture: &GitFixture, repo: &Path, index: usize, args: &[&str]) -> Result<(), SandboxError> {
    let (name, email) = GIT_FIXTURE_AUTHOR;
    let date = format!("{} +0000", GIT_FIXTURE_EPOCH + COMMIT_SPACING_SECS * index as i64);
    let output = Command::new("git")
        .args(args)
        .current_dir(repo)
        .env_clear()
        .env("PATH", GIT_PATH)
        .env("LANG", "C")
        .env("TZ", "UTC")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", name)
        .env("GIT_AUTHOR_EMAIL", email)
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_NAME", name)
        .env("GIT_COMMITTER_EMAIL", email)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .map_err(|source| SandboxError::GitFixture {
            path: fixture.path.clone(),
            message: if source.kind() == std::io::ErrorKind::NotFound {
                format!("`git` is not installed (looked for in {GIT_PATH}); install git to run this scenario")
            } else {
                format!("cannot start `git`: {source}")
            },
        })?;
    if output.status.success() {
        return Ok(());
    }
    Err(SandboxError::GitFixture {
        path: fixture.path.clone(),
        message: format!(
            "`git {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::model::GitCommit;

    fn fixture() -> GitFixture {
        let commit = |message: &str, files: &[(&str, &str)], remove: &[&str], tag: Option<&str>| GitCommit {
            message: message.to_string(),
            files: files.iter().map(|(path, text)| (path.to_string(), text.to_string())).collect::<BTreeMap<_, _>>(),
            remove: remove.iter().map(|path| path.to_string()).collect(),
            tag: tag.map(str::to_string),
        };
        GitFixture {
            path: "repo".to_string(),
            branch: "main".to_string(),
            commits: vec![
                commit("Add a", &[("a.txt", "a\n"), ("src/b.txt", "b\n")], &[], Some("v0.1.0")),
                commit("Drop a, change b", &[("src/b.txt", "b2\n")], &["a.txt"], None),
            ],
        }
    }

    fn log(repo: &Path) -> String {
        let output = Command::new("git")
            .args(["log", "--format=%H %an %ad %s", "--date=iso-strict", "--decorate=no"])
            .current_dir(repo)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git log runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    #[test]
    fn the_same_declaration_gives_the_same_commit_ids_in_two_workspaces() {
        let (first, second) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
        for dir in [&first, &second] {
            build_git_fixture(dir.path(), &fixture()).expect("builds");
        }
        let history = log(&first.path().join("repo"));
        assert_eq!(history, log(&second.path().join("repo")), "same ids, authors and dates");
        let lines: Vec<&str> = history.lines().collect();
        assert_eq!(lines.len(), 2, "{history}");
        // Pinned: the same on every machine and with every `git` version
        // (checked with git 2.39 and 2.47).
        assert!(lines[1].starts_with("3562b09e15df31b3a42e5e8c5857a668fae55ef5 "), "{history}");
        assert!(lines[0].ends_with("planrun fixture 2026-01-01T01:00:00Z Drop a, change b"), "{history}");
        assert!(lines[1].ends_with("planrun fixture 2026-01-01T00:00:00Z Add a"), "{history}");
        assert!(!first.path().join("repo/a.txt").exists(), "removed by the second commit");
        let tag = Command::new("git")
            .args(["rev-parse", "v0.1.0"])
            .current_dir(first.path().join("repo"))
            .output()
            .expect("git rev-parse runs");
        assert_eq!(String::from_utf8_lossy(&tag.stdout).trim(), lines[1].split(' ').next().unwrap_or_default());
    }

    #[test]
    fn a_failing_git_command_names_the_repository_and_the_command() {
        let dir = tempfile::tempdir().expect("dir");
        let mut bad = fixture();
        // Both commits tag `v0.1.0` (the loader refuses this; the builder
        // still reports what `git` said).
        bad.commits[1].tag = Some("v0.1.0".to_string());
        let error = build_git_fixture(dir.path(), &bad).expect_err("the second tag fails").to_string();
        assert!(error.contains("git fixture `repo`"), "{error}");
        assert!(error.contains("`git tag v0.1.0` failed"), "{error}");
        assert!(error.contains("already exists"), "{error}");
    }
}
