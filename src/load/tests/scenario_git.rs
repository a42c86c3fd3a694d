//! Git fixtures of scenario files: what a declaration becomes, and each
//! mistake as a finding with its position.

use super::Files;
use crate::diag::render;
use crate::load::Loader;
use crate::model::ScenarioFile;

/// Loads a scenario file whose one scenario ends with `git`.
fn load(git: &str) -> (Option<ScenarioFile>, Vec<String>) {
    let files = Files::new();
    let path = files.write(
        "x.scenarios.toml",
        &format!("version = 1\n[[scenarios]]\nname = \"a\"\ngoal = \"g\"\nrun_id = \"r\"\nexpect_code = 0\n{git}"),
    );
    let mut loader = Loader::new();
    let file = loader.load_scenarios(&path);
    let findings = loader.sorted_diagnostics().into_iter().map(|d| render(loader.sources(), d)).collect();
    (file, findings)
}

#[test]
fn a_git_fixture_gets_its_branch_and_commits_in_order() {
    let (file, findings) = load(
        r#"[[scenarios.git]]
path = "repo"
commits = [
    { message = "Add a", files = { "a.txt" = "a\n", "src/b.txt" = "b\n" }, tag = "v0.1.0" },
    { message = "Drop a", remove = ["a.txt"] },
]
"#,
    );
    assert_eq!(findings, Vec::<String>::new());
    let git = &file.expect("loads").scenarios[0].git[0];
    assert_eq!((git.path.as_str(), git.branch.as_str()), ("repo", "main"));
    assert_eq!(git.commits.len(), 2);
    assert_eq!(git.commits[0].files.keys().collect::<Vec<_>>(), ["a.txt", "src/b.txt"]);
    assert_eq!(git.commits[0].tag.as_deref(), Some("v0.1.0"));
    assert_eq!(git.commits[1].remove, ["a.txt"]);
}

#[test]
fn every_mistake_of_a_git_fixture_is_a_finding_with_its_position() {
    let (file, findings) = load(
        r#"[[scenarios.git]]
path = "../repo"
branch = "-main"
commits = [
    { message = " ", files = { ".git/config" = "x", "a.txt" = "a" }, tag = "v1" },
    { message = "b", remove = ["b.txt"], tag = "v1", author = "me" },
]

[[scenarios.git]]
path = "../repo"
commits = []
"#,
    );
    assert!(file.is_none(), "refused");
    let all = findings.join("\n");
    for expected in [
        "git path `../repo` is not a workspace file",
        "invalid git branch name `-main`",
        "the commit message is empty in `git[0].commits[0]`",
        "`.git/config` is not a file of the repository",
        "`b.txt` is not in the repository before `git[0].commits[1]`",
        "tag `v1` is given to two commits",
        "unknown key `author`",
        "git repository `../repo` is declared twice",
        "`commits` may not be empty",
    ] {
        assert!(all.contains(expected), "missing `{expected}` in:\n{all}");
    }
    assert!(all.contains("x.scenarios.toml:8:8"), "the path of `git[0]` has a position:\n{all}");
}
