//! Snapshots change only when behaviour does (on sandbox copies of the
//! repository's plans, policies and snapshots): a comment in a policy or a
//! plan changes none; a changed finish message changes exactly the
//! snapshots that show it, each in a few lines, with a behaviour summary
//! before the diffs (and as GitHub annotations with `--format github`);
//! `--review` counts every answer and says what is left pending; the `ls
//! -la` scenario stays green when file times change; and a record edited
//! in a scenario's sandbox fails `planrun test` on verification although
//! every snapshot (digests as placeholders) still matches.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use planrun::ops::{ExitStatus, SnapshotState, TestInput};

use crate::common::Sandbox;
use crate::planrun_test::{pending, planrun_test, project_copy, review, touch};

const SNAPSHOTS: [&str; 2] = ["snapshots/runs", "snapshots/bounded"];

fn edit(sandbox: &Sandbox, relative: &str, change: impl Fn(&str) -> String) {
    let text = fs::read_to_string(sandbox.path().join(relative)).expect("read");
    let changed = change(&text);
    assert_ne!(changed, text, "{relative} is edited");
    sandbox.write(relative, &changed);
}

#[test]
fn a_comment_in_a_policy_or_a_plan_changes_no_snapshot() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &SNAPSHOTS);
    edit(&sandbox, "policies/default.toml", |text| format!("# Reviewed in December.\n\n{text}"));
    edit(&sandbox, "plans/flow_pwd.toml", |text| text.replace("\n[[steps]]", "\n# the next step\n[[steps]]  "));
    edit(&sandbox, "plans/ticket_close.toml", |text| format!("{text}\n# the end\n"));
    let output = planrun_test(&sandbox, &[], true);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert!(output.stdout.contains(" 0 changed, 0 new,"), "{}", output.stdout);
}

/// The lines a unified diff removes or adds, headers left out.
fn changed_lines(diff: &str) -> usize {
    diff.lines()
        .filter(|line| {
            (line.starts_with('+') || line.starts_with('-')) && !line.starts_with("+++") && !line.starts_with("---")
        })
        .count()
}

/// `ticket-7 is closed` → `ticket-7 is now closed` in the ticket demo's plan.
fn change_finish_message(sandbox: &Sandbox) {
    edit(sandbox, "plans/ticket_close.toml", |text| text.replace("ticket-7 is closed", "ticket-7 is now closed"));
}

#[test]
fn a_changed_finish_message_changes_only_the_snapshots_that_show_it_in_a_few_lines() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &SNAPSHOTS);
    change_finish_message(&sandbox);
    let output = planrun_test(&sandbox, &["plans/ticket_close.toml"], true);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let changed: Vec<&str> = output
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("changed "))
        .map(|line| line.split(' ').next().unwrap_or(line))
        .collect();
    assert_eq!(
        changed,
        [
            "snapshots/runs/ticket_close@plan.json.snap",
            "snapshots/bounded/approve_resume@cli.snap",
            "snapshots/bounded/approve_resume@history.jsonl.snap",
            "snapshots/bounded/crash_resume@cli.snap",
            "snapshots/bounded/crash_resume@history.jsonl.snap",
        ],
        "{}",
        output.stdout
    );
    // Each diff: the message's own lines, nothing derived from them.
    for diff in output.stdout.split("\nchanged ").skip(1) {
        assert!(changed_lines(diff) <= 4, "a short diff: {diff}");
    }
    // What changed, in a reviewer's terms, before the diffs of the scenario.
    let summary = "behaviour `approve_resume`: step `done` finish message, output changed; exit codes unchanged; 0 events added\n";
    let at = output.stdout.find(summary).unwrap_or_else(|| panic!("{}", output.stdout));
    assert!(at < output.stdout.find("changed snapshots/bounded/approve_resume@cli.snap").expect("diff"));
    assert!(
        output.stdout.contains("behaviour `ticket_close`: exit code unchanged; 0 events added; the plan changed\n")
    );
}

#[test]
fn format_github_annotates_the_first_changed_line_of_each_snapshot() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &SNAPSHOTS);
    change_finish_message(&sandbox);
    let output = planrun_test(&sandbox, &["--format", "github", "plans/ticket_close.toml"], true);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    let golden =
        fs::read_to_string(sandbox.path().join("snapshots/bounded/approve_resume@history.jsonl.snap")).expect("snap");
    let line =
        golden.lines().position(|line| line.contains("\"message\": \"ticket-7 is closed\"")).expect("the message") + 1;
    let expected = format!(
        "::error file=snapshots/bounded/approve_resume@history.jsonl.snap,line={line},title=planrun test%3A approve_resume::step `done` finish message, output changed; exit codes unchanged; 0 events added%0A--- "
    );
    assert!(output.stdout.contains(&expected), "{expected}\n{}", output.stdout);
    assert_eq!(output.stdout.lines().filter(|line| line.starts_with("::error ")).count(), 5, "{}", output.stdout);
}

#[test]
fn review_counts_every_answer_and_says_what_is_left_pending() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &SNAPSHOTS);
    change_finish_message(&sandbox);
    // Accept the first, reject the second, skip the third; the input ends
    // before the last two, which are skipped too.
    let output = review(&sandbox, &["plans/ticket_close.toml"], "a\nr\ns\n");
    assert_eq!(output.code, 1, "a rejected change still differs from its golden file: {}", output.snapshot());
    for confirmation in [
        "accepted snapshots/runs/ticket_close@plan.json.snap\n",
        "rejected snapshots/bounded/approve_resume@cli.snap (the golden file stays; its `.snap.new` is removed)\n",
        "skipped snapshots/bounded/approve_resume@history.jsonl.snap (left pending as `.snap.new`)\n",
        "review: 1 accepted, 1 rejected, 3 skipped\n3 snapshot(s) left pending as `.snap.new`",
        "behaviour `approve_resume`: step `done` finish message",
    ] {
        assert!(output.stdout.contains(confirmation), "{confirmation}: {}", output.stdout);
    }
    assert_eq!(
        pending(&sandbox),
        [
            "snapshots/bounded/approve_resume@history.jsonl.snap.new",
            "snapshots/bounded/crash_resume@cli.snap.new",
            "snapshots/bounded/crash_resume@history.jsonl.snap.new",
        ]
    );
}

#[test]
fn the_ls_la_scenario_stays_green_when_file_times_change() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &["snapshots/runs"]);
    let notes = sandbox.path().join("plans/list_detail.notes.txt");
    // The snapshots were recorded on another day, with the checkout's file
    // times; `ls -la` shows `Jan  1  2001` for an old file and `Dec  4 01:18`
    // for a recent one, and the folders' times are the time of the run.
    for time in [978_307_200, 1_577_836_800] {
        touch(&notes, SystemTime::UNIX_EPOCH + Duration::from_secs(time));
        let output = planrun_test(&sandbox, &["plans/list_detail.toml"], true);
        assert_eq!(output.code, 0, "{}", output.snapshot());
    }
    // Written again: the time of this test run (the suite reads no clock).
    let text = fs::read(&notes).expect("notes");
    fs::write(&notes, text).expect("write notes");
    let output = planrun_test(&sandbox, &["plans/list_detail.toml"], true);
    assert_eq!(output.code, 0, "{}", output.snapshot());
}

/// Replaces the seal of `runs/flow_pwd/state.json` with another digest:
/// the snapshot shows `[hash]` either way.
fn reseal(workspace: &Path) {
    let path = workspace.join("runs/flow_pwd/state.json");
    let text = fs::read_to_string(&path).expect("state.json");
    let state: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let seal = state["sha256"].as_str().expect("a seal").to_string();
    fs::write(&path, text.replace(&seal, &"0".repeat(64))).expect("write");
}

#[test]
fn a_record_edited_in_the_sandbox_fails_on_verification_though_every_snapshot_matches() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &["snapshots/runs"]);
    let (plans, policies) = (sandbox.path().join("plans"), sandbox.path().join("policies"));
    let program = PathBuf::from(env!("CARGO_BIN_EXE_planrun"));
    let paths = [plans.join("flow_pwd.toml")];
    let input = |after_commands: Option<fn(&Path)>| TestInput {
        paths: &paths,
        plans: &plans,
        policies: &policies,
        snapshots: None,
        program: &program,
        accept: false,
        ci: true,
        after_commands,
    };

    let clean = planrun::ops::test(input(None));
    assert_eq!(clean.exit_status(), ExitStatus::Done, "{:?}", clean.problems);

    let tampered = planrun::ops::test(input(Some(reseal)));
    assert!(tampered.snapshots.iter().all(|result| result.state == SnapshotState::Matched), "{:?}", tampered.snapshots);
    assert_eq!(tampered.exit_status(), ExitStatus::Failed);
    let problems: Vec<&String> = tampered.problems.iter().flat_map(|scenario| &scenario.problems).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("run `flow_pwd` does not verify (`planrun verify flow_pwd` exited with 2)"),
        "{problems:?}"
    );
}
