//! The nesting limit of both parsers, through the real binary: a 10 000-level
//! YAML plan and a deep TOML plan are a `nesting-too-deep` finding (exit 2)
//! in `check`, a run and `list`, never a stack overflow (exit 134); the
//! other plans of the folder still load around them.

use std::fs;
use std::path::Path;

use crate::common::{Output, ROOT, Sandbox};

/// A sandbox with a copy of the repository's `plans/` and `policies/` plus
/// the two bombs, `plans/bomb.yaml` and `plans/bomb.toml`.
fn bomb_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    for folder in ["plans", "policies"] {
        copy_folder(&Path::new(ROOT).join(folder), &sandbox.path().join(folder));
    }
    // 10 000 nested block sequences, about 20 KB: the bomb.
    sandbox.write("plans/bomb.yaml", &format!("{}x\n", "- ".repeat(10_000)));
    // Inline arrays deep enough for the toml crate's own guard, below a plan's keys.
    let levels = 10_000;
    sandbox.write(
        "plans/bomb.toml",
        &format!("version = 1\nid = \"bomb\"\nnested = {}{}\n", "[".repeat(levels), "]".repeat(levels)),
    );
    sandbox
}

fn copy_folder(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The findings' `code file:line:col` pairs of what the binary printed
/// (`check` prints them on stdout, the other commands on stderr).
fn findings(output: &Output) -> Vec<String> {
    let lines: Vec<&str> = output.stdout.lines().chain(output.stderr.lines()).collect();
    lines
        .windows(2)
        .filter_map(|pair| {
            let code = pair[0].strip_prefix("error[")?.split(']').next()?;
            let at = pair[1].trim().strip_prefix("--> ")?;
            Some(format!("{code} {at}"))
        })
        .collect()
}

#[test]
fn check_reports_each_bomb_with_its_position() {
    let sandbox = bomb_sandbox();
    let yaml = sandbox.planrun().in_sandbox().args(["check", "plans/bomb.yaml"]).expect_code(2).run();
    assert_eq!(findings(&yaml), ["nesting-too-deep plans/bomb.yaml:1:131"]);
    let toml = sandbox.planrun().in_sandbox().args(["check", "plans/bomb.toml"]).expect_code(2).run();
    // The toml crate's guard (81st inline level) speaks first, under our code.
    assert_eq!(findings(&toml), ["nesting-too-deep plans/bomb.toml:3:90"]);
    // The whole folder: both bombs, and the shipped plans are still checked.
    let all = sandbox.planrun().in_sandbox().args(["check"]).expect_code(2).run();
    let found = findings(&all);
    for bomb in ["plans/bomb.toml", "plans/bomb.yaml"] {
        assert!(found.iter().any(|finding| finding.starts_with(&format!("nesting-too-deep {bomb}:"))), "{found:?}");
    }
    // The 20 shipped plans and the two bombs, which count as checked plans.
    assert!(all.stdout.contains("checked 25 plan(s)"), "{}", all.snapshot());
}

#[test]
fn running_a_bomb_is_a_finding_and_nothing_is_recorded() {
    let sandbox = bomb_sandbox();
    for bomb in ["plans/bomb.yaml", "plans/bomb.toml"] {
        let output = sandbox.planrun().in_sandbox().args(["--plan", bomb, "--run-id", "b"]).expect_code(2).run();
        let found = findings(&output);
        assert!(found.iter().all(|finding| finding.starts_with("nesting-too-deep plans/bomb.")), "{found:?}");
        assert!(found.iter().any(|finding| finding.starts_with(&format!("nesting-too-deep {bomb}:"))), "{found:?}");
        assert!(!sandbox.workspace().join("runs/b").exists(), "a run folder was created for {bomb}");
    }
}

#[test]
fn a_bomb_in_the_plans_folder_is_a_finding_for_list_and_goal() {
    let sandbox = bomb_sandbox();
    let list = sandbox.planrun().in_sandbox().arg("list").expect_code(2).run();
    let goal = sandbox.planrun().in_sandbox().args(["--goal", "close ticket", "--run-id", "g"]).expect_code(2).run();
    for output in [list, goal] {
        let found = findings(&output);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|finding| finding.starts_with("nesting-too-deep plans/bomb.")), "{found:?}");
    }
    assert!(!sandbox.workspace().join("runs/g").exists());
}

#[test]
fn run_records_are_read_with_serde_json_s_recursion_limit() {
    // Checkpoints, receipts and history lines are parsed by serde_json, whose
    // default limit (128 levels, the `unbounded_depth` feature is off) turns
    // a deep record into an error instead of a stack overflow.
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let error = planrun::store::canonical::parse_strict(&deep).expect_err("too deep");
    assert!(error.to_string().contains("recursion limit exceeded"), "{error}");
    let within = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert!(planrun::store::canonical::parse_strict(&within).is_ok());
}
