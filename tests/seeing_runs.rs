//! Seeing runs: `planrun runs` (newest first, `--status`, `--json`, a
//! tampered run listed as unreadable, an empty workspace), `show --full`,
//! `show latest`, the finish message, and the run command's last line
//! naming the record files and the files the run wrote; a run recorded as
//! `running` shown as driven by its holder's pid while it lives and as
//! `interrupted` (with `resume` and `cancel` to run) once it was killed.

use std::fs;

use serde_json::Value;

use crate::common::{Sandbox, TEST_POLICY, one_step_plan, wait_until};

/// Three runs at increasing clock starts: `old` done, `mid` failed, `new` done.
fn three_runs() -> Sandbox {
    let sandbox = Sandbox::new();
    let runs = [
        ("old", "inspect project", "2026-01-01T00:00:00Z", 0),
        ("mid", "test deny bash", "2026-01-02T00:00:00Z", 1),
        ("new", "test flow pwd to file", "2026-01-03T00:00:00Z", 0),
    ];
    for (id, goal, clock, code) in runs {
        sandbox.planrun().clock(clock).args(["--goal", goal, "--run-id", id]).expect_code(code).run();
    }
    sandbox
}

#[test]
fn runs_lists_every_run_newest_first_with_its_summary() {
    let sandbox = three_runs();
    let output = sandbox.planrun().args(["runs"]).expect_code(0).run();
    let lines: Vec<&str> = output.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", output.stdout);
    assert!(lines[0].starts_with("ID ") && lines[0].contains("STOP REASON") && lines[0].ends_with("DURATION"));
    let ids: Vec<&str> = lines[1..].iter().map(|line| line.split_whitespace().next().unwrap_or("")).collect();
    assert_eq!(ids, ["new", "mid", "old"]);
    let newest: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(newest, ["new", "flow_pwd", "done", "finish_step", "4", "2026-01-03T00:00:00.000Z", "28.0", "s"]);
    assert!(lines[2].contains("failed") && lines[2].contains("step_failed"), "{}", lines[2]);
}

/// Times recorded with 0, 1 or 3 digits of fractions line up in the
/// STARTED column, each with exactly 3 (`--json` keeps them as recorded).
#[test]
fn runs_prints_every_start_time_with_milliseconds() {
    let sandbox = Sandbox::new();
    for (id, clock) in
        [("whole", "2026-01-05T00:00:35Z"), ("tenth", "2026-01-05T00:00:35.8Z"), ("milli", "2026-01-05T00:00:35.805Z")]
    {
        sandbox.planrun().clock(clock).args(["--goal", "inspect project", "--run-id", id]).expect_code(0).run();
    }
    let output = sandbox.planrun().args(["runs"]).expect_code(0).run();
    let started: Vec<&str> = output.stdout.lines().skip(1).filter_map(|line| line.split_whitespace().nth(5)).collect();
    assert_eq!(
        started,
        ["2026-01-05T00:00:35.805Z", "2026-01-05T00:00:35.800Z", "2026-01-05T00:00:35.000Z"],
        "{}",
        output.stdout
    );
    let json = sandbox.planrun().args(["runs", "--json"]).expect_code(0).run();
    let list: Vec<Value> = serde_json::from_str(&json.stdout).expect("JSON");
    let recorded: Vec<&str> = list.iter().filter_map(|run| run["started_at"].as_str()).collect();
    assert_eq!(recorded, ["2026-01-05T00:00:35.805Z", "2026-01-05T00:00:35.8Z", "2026-01-05T00:00:35Z"]);
}

#[test]
fn runs_filters_by_status_and_prints_json() {
    let sandbox = three_runs();
    let output = sandbox.planrun().args(["runs", "--status", "done", "--json"]).expect_code(0).run();
    let list: Vec<Value> = serde_json::from_str(&output.stdout).expect("a JSON array");
    let ids: Vec<&str> = list.iter().filter_map(|run| run["run_id"].as_str()).collect();
    assert_eq!(ids, ["new", "old"]);
    assert_eq!(list[0]["plan"], "flow_pwd");
    assert_eq!(list[0]["stop_reason"], "finish_step");
    assert_eq!(list[0]["steps"], 4);
    assert_eq!(list[0]["started_at"], "2026-01-03T00:00:00Z");
    assert_eq!(list[0]["duration_ms"], 28_000);

    let failed = sandbox.planrun().args(["runs", "--status", "failed"]).expect_code(0).run();
    assert_eq!(failed.stdout.lines().count(), 2, "{}", failed.stdout);
    assert!(failed.stdout.lines().nth(1).is_some_and(|line| line.starts_with("mid ")), "{}", failed.stdout);

    let none = sandbox.planrun().args(["runs", "--status", "waiting_approval"]).expect_code(0).run();
    assert!(none.stdout.starts_with("no runs with status waiting_approval in "), "{}", none.stdout);

    let bad = sandbox.planrun().args(["runs", "--status", "finished"]).run();
    assert_eq!(bad.code, 2, "{}", bad.snapshot());
    assert!(bad.stderr.contains("invalid value 'finished'"), "{}", bad.stderr);
    assert!(
        bad.stderr.contains("one of: running, waiting_approval, done, failed, rejected, cancelled"),
        "{}",
        bad.stderr
    );
}

#[test]
fn a_tampered_run_is_listed_as_unreadable_whatever_the_filter() {
    let sandbox = three_runs();
    let state = sandbox.workspace().join("runs/mid/state.json");
    let text = fs::read_to_string(&state).expect("state");
    fs::write(&state, text.replace("step_failed", "finish_step")).expect("tamper");

    let output = sandbox.planrun().args(["runs", "--status", "done"]).run();
    assert_eq!(output.code, 2, "{}", output.snapshot());
    let lines: Vec<&str> = output.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", output.stdout);
    assert!(lines.iter().any(|line| line.starts_with("mid ") && line.contains("unreadable: ")), "{}", output.stdout);
    assert!(
        !lines.iter().any(|line| line.starts_with("mid ") && line.contains("finish_step")),
        "the tampered status is never shown: {}",
        output.stdout
    );

    let json = sandbox.planrun().args(["runs", "--json"]).run();
    assert_eq!(json.code, 2);
    let list: Vec<Value> = serde_json::from_str(&json.stdout).expect("a JSON array");
    let mid = list.iter().find(|run| run["run_id"] == "mid").expect("listed");
    assert_eq!(mid["status"], "unreadable");
    assert!(mid["error"].as_str().is_some_and(|error| !error.is_empty()), "{mid}");
    assert!(mid.get("plan").is_none(), "nothing from the tampered records is shown as true: {mid}");
}

#[test]
fn runs_in_an_empty_workspace_says_so_and_creates_nothing() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["runs"]).expect_code(0).run();
    assert_eq!(sandbox.filter(&output.stdout), "no runs in [WORKSPACE]/runs\n");
    let json = sandbox.planrun().args(["runs", "--json"]).expect_code(0).run();
    assert_eq!(json.stdout.trim(), "[]");
    assert!(!sandbox.workspace().join("runs").exists(), "listing creates no runs folder");
}

#[test]
fn show_full_prints_every_line_of_a_multi_line_output() {
    let sandbox = Sandbox::new();
    for name in ["alpha.txt", "beta.txt", "gamma.txt"] {
        sandbox.write(&format!("workspace/{name}"), "x");
    }
    sandbox.planrun().args(["--goal", "inspect project", "--run-id", "r"]).expect_code(0).run();
    let cut = sandbox.planrun().args(["show", "r"]).expect_code(0).run();
    assert!(cut.stdout.contains("output: alpha.txt…"), "{}", cut.stdout);
    assert!(!cut.stdout.contains("gamma.txt"), "{}", cut.stdout);

    let full = sandbox.planrun().args(["show", "r", "--full"]).expect_code(0).run();
    let listing = "      output:\n        alpha.txt\n        beta.txt\n        gamma.txt\n        runs\n";
    assert!(full.stdout.contains(listing), "{}", full.stdout);
    assert!(!full.stdout.contains('…'), "{}", full.stdout);
}

#[test]
fn show_prints_the_finish_message_and_latest_is_the_newest_run() {
    let sandbox = three_runs();
    let old = sandbox.planrun().args(["show", "old"]).expect_code(0).run();
    assert!(sandbox.filter(&old.stdout).contains("\nmessage: inspected [WORKSPACE]\n"), "{}", old.stdout);

    let latest = sandbox.planrun().args(["show", "latest"]).expect_code(0).run();
    assert!(latest.stdout.starts_with("run new · plan flow_pwd"), "{}", latest.stdout);
    let verified = sandbox.planrun().args(["verify", "latest"]).expect_code(0).run();
    assert!(verified.stdout.contains("run new"), "verify takes `latest` too: {}", verified.stdout);
    assert!(!latest.stdout.contains("message:"), "flow_pwd's finish has no message: {}", latest.stdout);

    // An exact id wins over the alias.
    sandbox.planrun().clock("2025-01-01T00:00:00Z").args(["--goal", "inspect project", "--run-id", "latest"]).run();
    let exact = sandbox.planrun().args(["show", "latest"]).expect_code(0).run();
    assert!(exact.stdout.starts_with("run latest · plan inspect_project"), "{}", exact.stdout);

    let empty = Sandbox::new();
    let none = empty.planrun().args(["show", "latest"]).run();
    assert_eq!(none.code, 2, "{}", none.snapshot());
    assert!(
        empty.filter(&none.stderr).contains("no runs yet in workspace `[WORKSPACE]`: `latest` names the newest run"),
        "{}",
        none.stderr
    );
}

#[test]
fn the_last_line_names_the_records_and_the_written_report() {
    let sandbox = Sandbox::new();
    let output = sandbox.planrun().args(["--goal", "test flow pwd to file", "--run-id", "p"]).expect_code(0).run();
    let stderr = sandbox.filter(&output.stderr);
    assert_eq!(
        stderr.lines().last(),
        Some(
            "planrun: records in [WORKSPACE]/runs/p (state.json, history.jsonl, audit.jsonl, plan.json) · wrote [WORKSPACE]/report.txt"
        ),
        "{stderr}"
    );
    assert!(sandbox.workspace().join("report.txt").is_file());

    let quiet = sandbox.planrun().args(["--goal", "inspect project", "--run-id", "q", "--quiet"]).expect_code(0).run();
    assert_eq!(quiet.stderr, "", "--quiet prints no last line");
}

/// A run whose process lives is `running`, driven by that process's pid;
/// killed with `SIGKILL`, it is `interrupted`, with the commands that
/// continue or end it, in `runs` and `show` alike. Looking never takes the
/// run's lock from its live holder: `resume` is still refused while it runs.
#[test]
fn a_killed_run_is_shown_interrupted_and_a_live_one_names_its_process() {
    let sandbox = Sandbox::new();
    let plan = one_step_plan("kind = \"shell\"\ncommand = [\"sleep\", \"30\"]");
    sandbox.write_plan(&plan, &TEST_POLICY.replace("step_timeout_secs = 1", "step_timeout_secs = 60"));
    let mut holder = sandbox.test_plan().spawn();
    let note = sandbox.workspace().join("runs/t/.child");
    assert!(wait_until(std::time::Duration::from_secs(20), || note.exists()), "the step never started");
    let pid = holder.id();

    let runs = sandbox.planrun().args(["runs"]).expect_code(0).run().stdout;
    let row = runs.lines().find(|line| line.starts_with("t ")).unwrap_or_else(|| panic!("{runs}"));
    assert!(row.contains(" running "), "{runs}");
    assert!(runs.contains(&format!("t: running, driven by pid {pid}")), "{runs}");
    let shown = sandbox.planrun().args(["show", "t"]).expect_code(0).run().stdout;
    assert!(shown.contains("status: running") && shown.contains(&format!("driven by pid {pid}")), "{shown}");
    let json = sandbox.planrun().args(["runs", "--json"]).expect_code(0).run().stdout;
    let list: Vec<Value> = serde_json::from_str(&json).expect("JSON");
    assert_eq!((&list[0]["interrupted"], &list[0]["driven_by"]), (&false.into(), &format!("pid {pid}").into()));
    let refused = sandbox.planrun().in_sandbox().args(["resume", "t", "--policies", "policies"]).expect_code(1).run();
    assert!(refused.stderr.contains("in use"), "the holder keeps its lock: {}", refused.stderr);

    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    let runs = sandbox.planrun().args(["runs"]).expect_code(0).run().stdout;
    let row = runs.lines().find(|line| line.starts_with("t ")).unwrap_or_else(|| panic!("{runs}"));
    assert!(row.contains(" interrupted ") && !row.contains(" running "), "{runs}");
    let hint = "`planrun resume t` continues it, `planrun cancel t` ends it";
    assert!(runs.contains(hint), "{runs}");
    let shown = sandbox.planrun().args(["show", "t"]).expect_code(0).run().stdout;
    assert!(shown.contains("status: interrupted") && shown.contains(hint), "{shown}");
    let json = sandbox.planrun().args(["runs", "--json"]).expect_code(0).run().stdout;
    let list: Vec<Value> = serde_json::from_str(&json).expect("JSON");
    assert_eq!((&list[0]["status"], &list[0]["interrupted"]), (&"running".into(), &true.into()), "as recorded");
    assert!(list[0]["driven_by"].is_null());
    // `--status` filters as the table shows: an interrupted run is not `running`.
    let running = sandbox.planrun().args(["runs", "--status", "running"]).expect_code(0).run().stdout;
    assert!(!running.lines().any(|line| line.starts_with("t ")), "{running}");
    let interrupted = sandbox.planrun().args(["runs", "--status", "interrupted"]).expect_code(0).run().stdout;
    assert!(interrupted.lines().any(|line| line.starts_with("t ")), "{interrupted}");

    // The command it names ends it (and stops the step's child).
    sandbox.planrun().in_sandbox().args(["cancel", "t"]).expect_code(0).run();
    let runs = sandbox.planrun().args(["runs"]).expect_code(0).run().stdout;
    assert!(!runs.contains("interrupted") && !runs.contains("driven by"), "{runs}");
}
