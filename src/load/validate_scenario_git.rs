//! A scenario's `git` entries → [`GitFixture`]s: git repositories the
//! sandbox builds with the real `git` program (`ops::scenario_git`).
//!
//! Checked here, so that a bad declaration is a finding with its
//! `file:line:column` rather than a failed `git` command: the repository's
//! folder stays inside the workspace and is declared once; the branch and
//! every tag are ref names `git` accepts, tags unique in the repository;
//! every file path is relative to the repository and outside `.git`; a
//! removed file was added by an earlier commit and not removed since.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path};

use crate::diag::{Diagnostic, Span};
use crate::load::keys::{GIT_COMMIT, GIT_FIXTURE};
use crate::load::node::Node;
use crate::load::table::{TableReader, error_count, expect_array, expect_string, string_map};
use crate::load::workspace_path::workspace_path;
use crate::model::{DEFAULT_GIT_BRANCH, GitCommit, GitFixture};

/// The git fixtures of one scenario; `None` entries are reported.
pub(crate) fn git_fixtures(items: &[Node], diagnostics: &mut Vec<Diagnostic>) -> Vec<GitFixture> {
    let mut paths = HashSet::new();
    let mut fixtures = Vec::new();
    for (index, item) in items.iter().enumerate() {
        if let Some(path) = item.get("path").and_then(|node| node.as_str().map(|text| (text, node)))
            && !paths.insert(path.0.to_string())
        {
            diagnostics.push(
                Diagnostic::error("duplicate-git-fixture", format!("git repository `{}` is declared twice", path.0))
                    .with_span(path.1.span)
                    .with_label("declared again here")
                    .with_help("declare each repository once, with all of its commits"),
            );
        }
        fixtures.extend(git_fixture(item, index, diagnostics));
    }
    fixtures
}

fn git_fixture(node: &Node, index: usize, diagnostics: &mut Vec<Diagnostic>) -> Option<GitFixture> {
    let errors_before = error_count(diagnostics);
    let what = format!("`git[{index}]`");
    let mut reader = TableReader::new(node, &what, format!(" in {what}"), GIT_FIXTURE.keys, diagnostics)?;
    let path = reader.required("path", diagnostics).and_then(|path| workspace_path(path, "git path", diagnostics));
    let branch = match reader.string("branch", diagnostics) {
        Some((branch, node)) => ref_name(branch, node, "branch", diagnostics),
        None => Some(DEFAULT_GIT_BRANCH.to_string()),
    };
    let mut commits = Vec::new();
    if let Some(node) = reader.required("commits", diagnostics)
        && let Some(items) = expect_array(node, &reader.describe("commits"), diagnostics)
    {
        let mut tree = BTreeSet::new();
        let mut tags = HashSet::new();
        for (at, item) in items.iter().enumerate() {
            commits.extend(commit(item, &format!("git[{index}].commits[{at}]"), &mut tree, &mut tags, diagnostics));
        }
        if items.is_empty() {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("`commits` may not be empty in {what}"))
                    .with_span(node.span)
                    .with_label("no commit")
                    .with_help(
                        "declare at least one commit: `{ message = \"Initial\", files = { \"a.txt\" = \"a\\n\" } }`",
                    ),
            );
        }
    }
    reader.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(GitFixture { path: path?, branch: branch?, commits })
}

/// One commit; `tree` holds the files present before it (and after it, on
/// return), `tags` the tags taken so far.
fn commit(
    node: &Node,
    what: &str,
    tree: &mut BTreeSet<String>,
    tags: &mut HashSet<String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<GitCommit> {
    let errors_before = error_count(diagnostics);
    let mut reader =
        TableReader::new(node, &format!("`{what}`"), format!(" in `{what}`"), GIT_COMMIT.keys, diagnostics)?;
    let message = reader.required_string("message", diagnostics).and_then(|(message, node)| {
        if message.trim().is_empty() {
            diagnostics.push(
                Diagnostic::error("invalid-value", format!("the commit message is empty in `{what}`"))
                    .with_span(node.span)
                    .with_help("`git` refuses an empty message: write one line such as `Add the parser`"),
            );
            return None;
        }
        Some(message.to_string())
    });
    let mut removed = Vec::new();
    for item in reader.array("remove", diagnostics).unwrap_or_default() {
        let Some(path) = expect_string(item, "a `remove` entry", diagnostics) else { continue };
        if repository_path(path, item.span, diagnostics) {
            if tree.remove(path) {
                removed.push(path.to_string());
            } else {
                diagnostics.push(
                    Diagnostic::error("invalid-value", format!("`{path}` is not in the repository before `{what}`"))
                        .with_span(item.span)
                        .with_label("nothing to remove")
                        .with_help("remove only a file an earlier commit's `files` added"),
                );
            }
        }
    }
    let mut files = BTreeMap::new();
    if let Some(table) = reader.get("files") {
        let keys: BTreeMap<&str, Span> =
            table.as_table().unwrap_or_default().iter().map(|(key, _)| (key.name.as_str(), key.span)).collect();
        for (path, text) in string_map(table, "files", diagnostics) {
            let span = keys.get(path.as_str()).copied().unwrap_or(table.span);
            if repository_path(&path, span, diagnostics) {
                tree.insert(path.clone());
                files.insert(path, text);
            }
        }
    }
    let tag = match reader.string("tag", diagnostics) {
        Some((tag, node)) => {
            let name = ref_name(tag, node, "tag", diagnostics);
            if name.is_some() && !tags.insert(tag.to_string()) {
                diagnostics.push(
                    Diagnostic::error("invalid-value", format!("tag `{tag}` is given to two commits"))
                        .with_span(node.span)
                        .with_label("tagged again here")
                        .with_help("a tag names one commit: give this one another name"),
                );
            }
            name
        }
        None => None,
    };
    reader.finish(diagnostics);
    (error_count(diagnostics) == errors_before).then_some(GitCommit { message: message?, files, remove: removed, tag })
}

/// Whether `path` is a file path relative to the repository, outside
/// `.git`; `invalid-path` at `span` otherwise.
fn repository_path(path: &str, span: Span, diagnostics: &mut Vec<Diagnostic>) -> bool {
    let components: Vec<Component> = Path::new(path).components().collect();
    let relative = !path.is_empty() && components.iter().all(|component| matches!(component, Component::Normal(_)));
    if relative && !components.iter().any(|component| component.as_os_str() == ".git") && !path.ends_with('/') {
        return true;
    }
    diagnostics.push(
        Diagnostic::error("invalid-path", format!("`{path}` is not a file of the repository"))
            .with_span(span)
            .with_label("expected a relative file path outside `.git`")
            .with_help("write a path such as `src/lib.rs`, without `..`, `/` at the start or end, or `.git`"),
    );
    false
}

/// `name` when `git` accepts it as a branch or tag name (a narrower rule
/// than `git check-ref-format`: ASCII letters, digits, `.`, `_`, `-` and
/// `/` between parts that start with neither `.` nor `-`, no `..`, no
/// `.lock` at the end, at most 100 bytes); `invalid-value` otherwise.
fn ref_name(name: &str, node: &Node, what: &str, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    let characters = name.bytes().all(|byte| byte.is_ascii_alphanumeric() || b"._-/".contains(&byte));
    let parts = name.split('/').all(|part| !part.is_empty() && !part.starts_with(['.', '-']));
    if !name.is_empty() && name.len() <= 100 && characters && parts && !name.contains("..") && !name.ends_with(".lock")
    {
        return Some(name.to_string());
    }
    diagnostics.push(
        Diagnostic::error("invalid-value", format!("invalid git {what} name `{name}`"))
            .with_span(node.span)
            .with_label("not a ref name")
            .with_help(
                "use ASCII letters, digits, `.`, `_`, `-` and `/` between parts, such as `v1.2.0` or `release/1.2`",
            ),
    );
    None
}
