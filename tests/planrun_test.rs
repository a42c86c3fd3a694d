//! `planrun test`: the declared scenarios against their golden snapshots.
//! Green on the repository; on a sandbox copy with changed plans, exit 1
//! with every mismatch and its diff, `.snap.new` files pending, and
//! `--accept` (or `--review` with piped answers) making it green again; a
//! new scenario reported as new and failing under `CI=true`; normalisation
//! rules keeping an `ls -la` scenario stable when file times change; a bad
//! scenario file refused with its location (exit 2).
//!
//! The harness does not clear `CI`, so each test sets it to what it means.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use crate::common::{Output, ROOT, Sandbox};

/// Copies the repository's `plans/` and `policies/`, and the given
/// snapshot folders (`snapshots/runs`), into the sandbox.
pub fn project_copy(sandbox: &Sandbox, snapshot_folders: &[&str]) {
    for folder in ["plans", "policies"].iter().chain(snapshot_folders) {
        copy_dir(&Path::new(ROOT).join(folder), &sandbox.path().join(folder));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create dir");
    for entry in fs::read_dir(from).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            fs::copy(&path, to.join(entry.file_name())).expect("copy");
        }
    }
}

/// `planrun test ARGS…` from the sandbox, with `CI` set to `ci`.
pub fn planrun_test(sandbox: &Sandbox, args: &[&str], ci: bool) -> Output {
    sandbox.planrun().in_sandbox().arg("test").args(args).env("CI", if ci { "true" } else { "false" }).run()
}

/// `planrun test --review ARGS…` from the sandbox with `answers` on stdin
/// (the harness has no stdin, so this one command is spawned here).
pub fn review(sandbox: &Sandbox, args: &[&str], answers: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_planrun"))
        .current_dir(sandbox.path())
        .args(["test", "--review"])
        .args(args)
        .env("CI", "false")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn planrun");
    child.stdin.take().expect("stdin").write_all(answers.as_bytes()).expect("answers");
    let output = child.wait_with_output().expect("planrun test --review");
    Output {
        code: output.status.code().unwrap_or(-1),
        stdout: sandbox.filter(&String::from_utf8_lossy(&output.stdout)),
        stderr: sandbox.filter(&String::from_utf8_lossy(&output.stderr)),
    }
}

pub fn pending(sandbox: &Sandbox) -> Vec<String> {
    let mut found: Vec<String> = sandbox.tree().into_iter().filter(|path| path.ends_with(".snap.new")).collect();
    found.sort();
    found
}

#[test]
fn the_repository_scenarios_are_green() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["test"]).env("CI", "true").expect_code(0).run();
    assert!(output.stdout.contains("0 changed, 0 new"), "{}", output.stdout);
    assert!(output.stdout.contains(" 0 failed expectation(s)"), "{}", output.stdout);
}

#[test]
fn changed_plans_list_every_mismatch_with_its_diff_until_accepted() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &["snapshots/runs"]);
    let flow_ls = fs::read_to_string(sandbox.path().join("plans/flow_ls.toml")).expect("plan");
    sandbox.write("plans/flow_ls.toml", &flow_ls.replace("listing.txt", "files.txt"));
    let flow_pwd = fs::read_to_string(sandbox.path().join("plans/flow_pwd.toml")).expect("plan");
    sandbox.write("plans/flow_pwd.toml", &flow_pwd.replace("report.txt", "where.txt"));
    let paths = ["plans/flow_ls.toml", "plans/flow_pwd.toml"];

    let failed = planrun_test(&sandbox, &paths, false);
    assert_eq!(failed.code, 1, "{}", failed.snapshot());
    // Every changed snapshot of both scenarios, not only the first.
    for name in [
        "flow_ls@plan.json",
        "flow_ls@audit.jsonl",
        "flow_ls@history.jsonl",
        "flow_pwd@plan.json",
        "flow_pwd@history.jsonl",
    ] {
        assert!(failed.stdout.contains(&format!("changed snapshots/runs/{name}.snap")), "{name}: {}", failed.stdout);
    }
    assert!(failed.stdout.contains("-      \"path\": \"listing.txt\","), "a unified diff: {}", failed.stdout);
    assert!(failed.stdout.contains("+      \"path\": \"files.txt\","), "{}", failed.stdout);
    assert!(pending(&sandbox).contains(&"snapshots/runs/flow_ls@plan.json.snap.new".to_string()));
    let golden = fs::read_to_string(sandbox.path().join("snapshots/runs/flow_ls@plan.json.snap")).expect("snap");
    assert!(golden.contains("listing.txt"), "a failed test changes no golden file");

    let accepted = planrun_test(&sandbox, &["--accept", "plans/flow_ls.toml", "plans/flow_pwd.toml"], false);
    assert_eq!(accepted.code, 0, "{}", accepted.snapshot());
    assert!(accepted.stdout.contains("accepted snapshots/runs/flow_ls@plan.json.snap"), "{}", accepted.stdout);
    assert_eq!(pending(&sandbox), Vec::<String>::new(), "accepting removes the pending files");
    let golden = fs::read_to_string(sandbox.path().join("snapshots/runs/flow_ls@plan.json.snap")).expect("snap");
    assert!(golden.starts_with("---\nsource: tests/scenarios.rs\n---\n"), "the header is kept: {golden}");
    assert!(golden.contains("files.txt"), "{golden}");

    let green = planrun_test(&sandbox, &paths, true);
    assert_eq!(green.code, 0, "{}", green.snapshot());
}

const NEW_PLAN: &str = r#"version = 1
id = "greet"
keywords = ["say hello"]

[[steps]]
id = "hello"
kind = "shell"
command = ["echo", "hello"]

[[steps]]
id = "done"
kind = "finish"
"#;

const NEW_SCENARIO: &str = r#"version = 1

[[scenarios]]
name = "greet"
goal = "say hello"
run_id = "greet"
expect_code = 0
expect_status = "done"
records = ["state.json"]
"#;

#[test]
fn a_new_scenario_is_reported_as_new_and_fails_under_ci() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &[]);
    sandbox.write("plans/greet.toml", NEW_PLAN);
    sandbox.write("plans/greet.scenarios.toml", NEW_SCENARIO);

    let ci = planrun_test(&sandbox, &["plans/greet.toml"], true);
    assert_eq!(ci.code, 1, "{}", ci.snapshot());
    assert!(ci.stdout.contains("new snapshots/runs/greet@cli.snap"), "{}", ci.stdout);
    assert!(ci.stdout.contains("+planrun: run greet done (finish_step)"), "the new body is shown: {}", ci.stdout);
    assert!(!sandbox.path().join("snapshots").exists(), "under CI nothing is written");

    let local = planrun_test(&sandbox, &["plans/greet.toml"], false);
    assert_eq!(local.code, 0, "new is reported, and pending: {}", local.snapshot());
    assert!(local.stdout.contains("2 new"), "{}", local.stdout);
    assert_eq!(pending(&sandbox), ["snapshots/runs/greet@cli.snap.new", "snapshots/runs/greet@state.json.snap.new"]);
    // The pending files are what insta (and so `cargo insta review`) reads.
    let new =
        insta::Snapshot::from_file(&sandbox.path().join("snapshots/runs/greet@cli.snap.new")).expect("insta reads it");
    assert_eq!(new.metadata().source(), Some("plans/greet.scenarios.toml"));
    let body = new.as_text().expect("a text snapshot").to_string();
    assert!(body.starts_with("exit_code: 0\n----- stdout -----\n"), "{body}");

    // --review: accept the first, reject the second.
    let review = review(&sandbox, &["plans/greet.toml"], "a\nr\n");
    assert_eq!(review.code, 0, "the rejected one is new again, reported: {}", review.snapshot());
    assert!(review.stdout.contains("review [1/2] snapshots/runs/greet@cli.snap"), "{}", review.stdout);
    let shown = review.stdout.find("new snapshots/runs/greet@cli.snap").expect("the body is shown");
    assert!(shown < review.stdout.find("review [1/2]").expect("asked"), "each body before its question");
    assert!(review.stdout.contains("review [2/2] snapshots/runs/greet@state.json.snap"), "{}", review.stdout);
    let cli = fs::read_to_string(sandbox.path().join("snapshots/runs/greet@cli.snap")).expect("accepted");
    assert!(cli.starts_with("---\nsource: plans/greet.scenarios.toml\n---\nexit_code: 0\n"), "{cli}");
    assert!(!sandbox.path().join("snapshots/runs/greet@state.json.snap").exists(), "rejected");
    assert_eq!(pending(&sandbox), Vec::<String>::new());
    // Every answer is confirmed and counted, and the last line says what is
    // left pending: nothing, not "pending as `.snap.new`".
    assert!(review.stdout.contains("accepted snapshots/runs/greet@cli.snap\n"), "{}", review.stdout);
    assert!(
        review.stdout.contains("rejected snapshots/runs/greet@state.json.snap (no golden file"),
        "{}",
        review.stdout
    );
    assert!(review.stdout.contains("1 accepted, 1 rejected; 0 failed"), "{}", review.stdout);
    assert!(
        review.stdout.contains("review: 1 accepted, 1 rejected, 0 skipped\nnothing left pending\n"),
        "{}",
        review.stdout
    );
    assert!(!review.stdout.contains("pending as `.snap.new`"), "{}", review.stdout);

    let ci = planrun_test(&sandbox, &["plans/greet.toml"], true);
    assert_eq!(ci.code, 1, "state.json is still new: {}", ci.snapshot());
    assert!(ci.stdout.contains("1 matched, 0 changed, 1 new"), "{}", ci.stdout);

    // `--snapshots DIR`: another snapshots root, same layout.
    let elsewhere = planrun_test(&sandbox, &["--accept", "--snapshots", "elsewhere", "plans/greet.toml"], false);
    assert_eq!(elsewhere.code, 0, "{}", elsewhere.snapshot());
    assert!(sandbox.path().join("elsewhere/runs/greet@state.json.snap").is_file());
    assert!(!sandbox.path().join("snapshots/runs/greet@state.json.snap").exists());
}

const LISTING_PLAN: &str = r#"version = 1
id = "listing"
keywords = ["list the files"]

[[steps]]
id = "list"
kind = "shell"
command = ["ls", "-la"]

[[steps]]
id = "save"
kind = "write_file"
path = "listing.txt"
content = "{{ steps.list.output_text }}"

[[steps]]
id = "done"
kind = "finish"
"#;

/// The listing scenario, with or without the rule for `ls -la`'s times.
fn listing_scenario(rule: bool) -> String {
    let normalize = if rule {
        // `Dec  1 07:43` (this year) or `Jan  1  2001` (older): same width.
        "normalize = [{ regex = '[A-Z][a-z]{2} [ \\d]\\d ( \\d{4}|\\d\\d:\\d\\d)', replacement = '[DATE]' }]\n"
    } else {
        ""
    };
    format!(
        "version = 1\n\n[[scenarios]]\nname = \"listing\"\ngoal = \"list the files\"\nrun_id = \"listing\"\nexpect_code = 0\nfixtures = [{{ path = \"notes.txt\", source = \"notes.txt\" }}]\n{normalize}"
    )
}

/// Sets the modification time of the fixture's source file.
pub fn touch(path: &Path, time: SystemTime) {
    fs::File::options().write(true).open(path).expect("open").set_modified(time).expect("set mtime");
}

#[test]
fn normalisation_keeps_an_ls_la_scenario_stable_when_file_times_change() {
    for rule in [true, false] {
        let sandbox = Sandbox::new();
        project_copy(&sandbox, &[]);
        sandbox.write("plans/listing.toml", LISTING_PLAN);
        sandbox.write("plans/listing.scenarios.toml", &listing_scenario(rule));
        let notes = sandbox.write("plans/notes.txt", "a fixture\n");
        // 2020-01-01, then 2001-01-01 (fixed times: the suite reads no wall clock).
        touch(&notes, SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800));
        let accepted = planrun_test(&sandbox, &["--accept", "plans/listing.toml"], false);
        assert_eq!(accepted.code, 0, "{}", accepted.snapshot());
        let history =
            fs::read_to_string(sandbox.path().join("snapshots/runs/listing@history.jsonl.snap")).expect("snap");
        assert!(history.contains("notes.txt"), "{history}");
        assert_eq!(history.contains("[DATE]"), rule, "{history}");

        // Years later (in file times): the injected clock keeps the records'
        // own times fixed; only the listing's dates move. Every record is
        // snapshotted, the log's checkpoints and the sealed state too: no
        // digest over the listing is pinned, so the rule is enough.
        touch(&notes, SystemTime::UNIX_EPOCH + Duration::from_secs(978_307_200));
        let again = planrun_test(&sandbox, &["plans/listing.toml"], true);
        if rule {
            assert_eq!(again.code, 0, "stable with the rule: {}", again.snapshot());
        } else {
            assert_eq!(again.code, 1, "without the rule the date is a diff: {}", again.snapshot());
            assert!(again.stdout.contains(" 2001 notes.txt"), "{}", again.stdout);
        }
    }
}

#[test]
fn a_bad_scenario_file_is_refused_with_its_location_and_nothing_runs() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &[]);
    sandbox.write("plans/greet.toml", NEW_PLAN);
    sandbox.write(
        "plans/greet.scenarios.toml",
        "version = 1\n\n[[scenarios]]\nnam = \"greet\"\ngoal = \"say hello\"\nplan = \"plans/greet.toml\"\nrun_id = \"greet\"\nexpect_code = 0\nclock = \"yesterday\"\n",
    );
    let output = planrun_test(&sandbox, &["plans/greet.toml"], false);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("plans/greet.scenarios.toml:4:1"), "{}", output.stderr);
    assert!(output.stderr.contains("did you mean `name`?"), "{}", output.stderr);
    assert!(
        output.stderr.contains("`plan` in scenario") || output.stderr.contains("conflicting-keys"),
        "{}",
        output.stderr
    );
    assert!(output.stderr.contains("`clock` `yesterday` is not an RFC 3339 instant"), "{}", output.stderr);
    assert!(!sandbox.path().join("snapshots").exists(), "nothing ran");
    let check = sandbox.planrun().in_sandbox().args(["check", "plans/greet.toml"]).run();
    assert_eq!(check.code, 2, "`check` validates the plan's scenario file too: {}", check.snapshot());
    assert!(check.stdout.contains("unknown-key"), "{}", check.stdout);
    let named = sandbox.planrun().in_sandbox().args(["check", "plans/greet.scenarios.toml"]).run();
    assert_eq!(named.code, 2, "a scenario file checks as one: {}", named.snapshot());
    assert!(named.stdout.contains("plans/greet.scenarios.toml:4:1"), "{}", named.stdout);
}

#[test]
fn check_notes_a_plan_without_a_scenario() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &[]);
    sandbox.write("plans/greet.toml", NEW_PLAN);
    let check = sandbox.planrun().in_sandbox().args(["check", "plans/greet.toml"]).expect_code(0).run();
    assert!(check.stdout.contains("note[no-scenario]: plan `greet` has no scenario"), "{}", check.stdout);
    assert!(check.stdout.contains("declare one in `plans/greet.scenarios.toml`"), "{}", check.stdout);
    let test = planrun_test(&sandbox, &["plans/greet.toml"], false);
    assert_eq!(test.code, 2, "{}", test.snapshot());
    assert!(test.stderr.contains("`plans/greet.toml` has no scenario file"), "{}", test.stderr);
}

/// The ```toml block of the Author's guide (`docs/authoring-and-review.md`)
/// that contains `marker`.
fn readme_block(marker: &str) -> String {
    let readme = fs::read_to_string(Path::new(ROOT).join("docs/authoring-and-review.md")).expect("the guide");
    readme
        .split("```toml\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block.to_string()))
        .find(|block| block.contains(marker))
        .unwrap_or_else(|| panic!("no block of the guide with {marker}"))
}

/// The Author's guide's plan and scenario, exactly as the guide prints
/// them, check clean and pin a stable run in the sandbox.
#[test]
fn the_authors_guide_example_works_as_written() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &[]);
    sandbox.write("plans/list_files.toml", &readme_block("id = \"list_files\""));
    sandbox.write("plans/list_files.scenarios.toml", &readme_block("name = \"list_files\""));
    let check = sandbox.planrun().in_sandbox().args(["check", "plans/list_files.toml"]).expect_code(0).run();
    assert!(check.stdout.contains("0 error(s), 0 warning(s), 0 note(s)"), "{}", check.stdout);
    let accepted = planrun_test(&sandbox, &["--accept", "plans/list_files.toml"], false);
    assert_eq!(accepted.code, 0, "{}", accepted.snapshot());
    assert!(accepted.stdout.contains("5 accepted; 0 failed"), "{}", accepted.stdout);
    let history =
        fs::read_to_string(sandbox.path().join("snapshots/runs/list_files@history.jsonl.snap")).expect("snap");
    assert!(history.contains("[DATE] notes.txt"), "{history}");
    let again = planrun_test(&sandbox, &["plans/list_files.toml"], true);
    assert_eq!(again.code, 0, "{}", again.snapshot());
}

/// An exit code other than the declared one fails the scenario (exit 1)
/// with the command's output; a step's rule applies to its output only.
#[test]
fn unmet_expectations_fail_and_step_rules_apply_to_their_step() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &[]);
    sandbox.write("plans/greet.toml", NEW_PLAN);
    sandbox.write(
        "plans/greet.scenarios.toml",
        "version = 1\n\n[[scenarios]]\nname = \"greet\"\ngoal = \"say hello\"\nrun_id = \"greet\"\nexpect_code = 1\nexpect_status = \"failed\"\nrecords = []\n\n[[scenarios.steps]]\ncommand = [\"show\", \"greet\"]\nexpect_code = 0\nnormalize = [{ regex = \"hello\", replacement = \"[GREETING]\" }]\n",
    );
    let output = planrun_test(&sandbox, &["--accept", "plans/greet.toml"], false);
    assert_eq!(output.code, 1, "{}", output.snapshot());
    assert!(output.stdout.contains("failed scenario `greet` (plans/greet.scenarios.toml): `planrun --goal say hello --run-id greet` exited with 0, expected 1"), "{}", output.stdout);
    assert!(output.stdout.contains("run `greet` ended `done`, expected `failed`"), "{}", output.stdout);
    let cli = fs::read_to_string(sandbox.path().join("snapshots/runs/greet@cli.snap")).expect("snap");
    let (run, show) = cli.split_once("===== show\n").expect("the follow-up is labelled");
    assert!(run.contains("hello"), "the run's own output is as printed: {run}");
    assert!(show.contains("[GREETING]") && !show.contains("hello"), "{show}");
}

/// Two scenario files declaring the same snapshot are refused (exit 2)
/// rather than overwriting each other's golden files.
#[test]
fn two_scenarios_producing_one_snapshot_are_refused() {
    let sandbox = Sandbox::new();
    sandbox.write("plans/greet.toml", NEW_PLAN);
    sandbox.write("plans/greet.scenarios.toml", NEW_SCENARIO);
    sandbox.write("plans/again.scenarios.toml", NEW_SCENARIO);
    copy_dir(&Path::new(ROOT).join("policies"), &sandbox.path().join("policies"));
    sandbox
        .write("plans/fallback.toml", &fs::read_to_string(Path::new(ROOT).join("plans/fallback.toml")).expect("plan"));
    let output = planrun_test(&sandbox, &[], false);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(
        output.stderr.contains("snapshot `snapshots/runs/greet@cli.snap` is produced by scenario `greet` (plans/again.scenarios.toml) and by scenario `greet` (plans/greet.scenarios.toml)"),
        "{}",
        output.stderr
    );
}

/// Issue 22 item 6: a scenario's `*.json` fixture is strict JSON (it is
/// what the run will read, e.g. `tickets.json`): `NaN`, trailing data or a
/// duplicate key in it stops `planrun test` (exit 2) naming the fixture and
/// what is wrong, and the scenario does not run; a `NaN` in the scenario
/// file itself is a finding with its position.
#[test]
fn a_json_fixture_or_scenario_value_that_is_not_strict_json_is_refused_by_name() {
    let scenario = |fixture: &str| {
        format!(
            "version = 1\n\n[[scenarios]]\nname = \"greet\"\nplan = \"plans/greet.toml\"\nrun_id = \"greet\"\nexpect_code = 0\nfixtures = [{fixture}]\n"
        )
    };
    for (fixture, source, named) in [
        (r#"{ path = "tickets.json", content = '{"tickets": {}, "n": NaN}' }"#, None, "`NaN` is not a JSON number"),
        (r#"{ path = "t.json", source = "greet.fixture.json" }"#, Some("{\"a\": 1}\n{\"a\": 2}\n"), "trailing data"),
        (r#"{ path = "t.json", content = '{"a": 1, "a": 2}' }"#, None, "duplicate key `a`"),
    ] {
        let sandbox = Sandbox::new();
        project_copy(&sandbox, &[]);
        sandbox.write("plans/greet.toml", NEW_PLAN);
        if let Some(text) = source {
            sandbox.write("plans/greet.fixture.json", text);
        }
        sandbox.write("plans/greet.scenarios.toml", &scenario(fixture));
        let output = planrun_test(&sandbox, &["plans/greet.toml"], false);
        assert_eq!(output.code, 2, "{}", output.snapshot());
        assert!(output.stderr.contains("is not strict JSON") && output.stderr.contains(named), "{}", output.stderr);
        assert!(!sandbox.path().join("snapshots").exists(), "nothing ran: {fixture}");
    }
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &[]);
    sandbox.write("plans/greet.toml", NEW_PLAN);
    sandbox.write("plans/greet.scenarios.toml", &scenario("").replace("expect_code = 0", "expect_code = nan"));
    let output = planrun_test(&sandbox, &["plans/greet.toml"], false);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(output.stderr.contains("plans/greet.scenarios.toml:7:15"), "{}", output.stderr);
    assert!(output.stderr.contains("must be an integer, found a float"), "{}", output.stderr);
}

/// A git fixture that `git` itself cannot build (a file where a later
/// commit needs a folder: the loader cannot know) stops `planrun test`
/// with exit 2 naming the repository and what failed; nothing runs.
#[test]
fn a_git_fixture_that_cannot_be_built_stops_the_scenario_by_name() {
    let sandbox = Sandbox::new();
    project_copy(&sandbox, &[]);
    sandbox.write("plans/greet.toml", NEW_PLAN);
    sandbox.write(
        "plans/greet.scenarios.toml",
        r#"version = 1

[[scenarios]]
name = "greet"
plan = "plans/greet.toml"
run_id = "greet"
expect_code = 0

[[scenarios.git]]
path = "repo"
commits = [
    { message = "a file", files = { "notes" = "x\n" } },
    { message = "a folder of the same name", files = { "notes/today.txt" = "y\n" } },
]
"#,
    );
    let output = planrun_test(&sandbox, &["plans/greet.toml"], false);
    assert_eq!(output.code, 2, "{}", output.snapshot());
    assert!(
        output.stderr.contains("cannot build git fixture `repo`: cannot create the folder of `notes/today.txt`"),
        "{}",
        output.stderr
    );
    assert!(!sandbox.path().join("snapshots").exists(), "nothing ran");
}
