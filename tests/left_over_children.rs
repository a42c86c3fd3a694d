//! A shell child left running by a holder killed with `SIGKILL`: the next
//! process that continues (`resume`) or ends (`cancel`) the run on this
//! machine kills its process group before anything else runs, and logs
//! `child_stopped` with its pid (the file store's `runs/<id>/.child` notes
//! the child of the step in progress). Without it the child of a killed
//! holder runs on beside the step `resume` starts again.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use planrun::tools::children::running as alive;
#[cfg(feature = "postgres")]
use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;

#[cfg(feature = "postgres")]
use crate::common::wait_until;
use crate::common::{Sandbox, TEST_POLICY, one_step_plan};

/// Writes a plan of a shell step that runs until its holder is killed,
/// then `finish`, and a policy that lets it run that long.
fn write_slow_plan(sandbox: &Sandbox) {
    let plan = one_step_plan("kind = \"shell\"\ncommand = [\"sleep\", \"30\"]");
    sandbox.write_plan(&plan, &TEST_POLICY.replace("step_timeout_secs = 1", "step_timeout_secs = 60"));
}

/// The pid the run's note names, once it names one other than `not`.
fn noted_child(run: &Path, not: Option<u32>) -> u32 {
    noted_in(&run.join(".child"), not)
}

/// The pid note file `note` names, once it names one other than `not`.
fn noted_in(note: &Path, not: Option<u32>) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let noted = fs::read_to_string(note).ok();
        if let Some(pid) =
            noted.and_then(|text| text.split_whitespace().next()?.parse().ok()).filter(|pid| Some(*pid) != not)
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no child noted in {}", note.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stopped_pids(sandbox: &Sandbox) -> Vec<u64> {
    fs::read_to_string(sandbox.workspace().join("runs/t/audit.jsonl"))
        .expect("audit log")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON"))
        .filter(|event| event["event_type"] == "child_stopped")
        .map(|event| event["details"]["pid"].as_u64().expect("pid"))
        .collect()
}

#[test]
fn resume_and_cancel_stop_the_child_a_killed_holder_left_running() {
    let sandbox = Sandbox::new();
    write_slow_plan(&sandbox);
    let run = sandbox.workspace().join("runs/t");
    let mut holder = sandbox.test_plan().spawn();
    let first = noted_child(&run, None);
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    std::thread::sleep(Duration::from_millis(100));
    assert!(alive(first), "the killed holder's child runs on");

    let mut resumer = sandbox.planrun().in_sandbox().args(["resume", "t", "--policies", "policies"]).spawn();
    let second = noted_child(&run, Some(first));
    assert!(!alive(first), "resume killed the left-over child before running the step again");
    assert!(alive(second), "the step runs again");
    assert_eq!(stopped_pids(&sandbox), [u64::from(first)], "logged by the resume");
    resumer.kill().expect("SIGKILL the resumer");
    resumer.wait().expect("reap the resumer");

    let cancelled = sandbox.planrun().in_sandbox().args(["cancel", "t"]).expect_code(0).run();
    assert!(cancelled.stdout.contains("cancelled"), "{}", cancelled.stdout);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(second) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(second), "cancel killed the resumer's child");
    // The resume's lines past its last checkpoint were a crash tail, which
    // the cancel cut off; the cancel logs its own `child_stopped`.
    assert_eq!(stopped_pids(&sandbox), [u64::from(second)]);
    assert!(!run.join(".child").exists(), "the note is taken");
    sandbox.planrun().in_sandbox().args(["verify", "t"]).expect_code(0).run();
}

/// The tool guard of process `holder` (its child `planrun __tool-guard`),
/// once it runs.
#[cfg(feature = "postgres")]
fn guard_of(holder: u32) -> u32 {
    let find = || {
        fs::read_dir("/proc").expect("/proc").filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok()).find(
            |pid: &u32| {
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let parent =
                    stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
                cmdline == b"planrun\0__tool-guard\0" && parent == Some(holder)
            },
        )
    };
    assert!(wait_until(Duration::from_secs(20), || find().is_some()), "no tool guard of {holder}");
    find().expect("the guard")
}

/// On PostgreSQL a run may be taken over on another machine, where no note
/// is seen, so the tool of a holder killed with `SIGKILL` dies with it: the
/// holder's tool guard (one per process) kills its process group at once,
/// before it does anything more, and a later holder runs the step again.
#[cfg(feature = "postgres")]
#[test]
fn on_postgres_a_killed_holders_tool_dies_with_it_and_does_nothing_more() {
    let sandbox = Sandbox::new();
    let Some(schema) = crate::pg_store::Schema::migrated("tool guard", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let script = "echo $$ >> tool.pids; sleep 2; echo late >> canary";
    let plan = one_step_plan(&format!("kind = \"shell\"\ncommand = [\"sh\", \"-c\", \"{script}\"]"));
    // Its allow rule stands before `[retry]` (a table after it would belong to it).
    // No sandbox: the tool notes its pid at the workspace's top, which the
    // sandbox refuses to create; this test is about the tool guard.
    let policy = TEST_POLICY
        .replace("[shell]\n", "[shell]\nsandbox = \"none\"\n")
        .replace("step_timeout_secs = 1", "step_timeout_secs = 60")
        .replacen(
            "[retry]",
            &format!("[[shell.allow]]\nprogram = \"sh\"\nargs = [[\"-c\", \"{script}\"]]\n[retry]"),
            1,
        );
    sandbox.write_plan(&plan, &policy);
    let pids = || -> Vec<u32> {
        fs::read_to_string(sandbox.workspace().join("tool.pids"))
            .unwrap_or_default()
            .lines()
            .map(|line| line.trim().parse().expect("a pid"))
            .collect()
    };
    let mut holder = sandbox.test_plan().args(store).env("PLANRUN_LEASE_SECS", "1").spawn();
    assert!(wait_until(Duration::from_secs(20), || !pids().is_empty()), "the tool never started");
    let tool = pids()[0];
    let guard = guard_of(holder.id());
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    assert!(wait_until(Duration::from_secs(1), || !alive(tool)), "the killed holder's tool died with it");
    assert!(!alive(guard), "its guard is gone too");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!sandbox.workspace().join("canary").exists(), "the tool did nothing after its holder died");

    // The lease runs out; the next holder runs the step once more, to the end.
    std::thread::sleep(Duration::from_millis(500));
    sandbox.planrun().in_sandbox().args(["resume", "t"]).args(store).expect_code(0).run();
    assert_eq!(pids().len(), 2, "started by the killed holder, then by the resume");
    assert_eq!(fs::read_to_string(sandbox.workspace().join("canary")).expect("canary"), "late\n", "written once");
    sandbox.planrun().in_sandbox().args(["verify", "t"]).args(store).expect_code(0).run();
}

/// On PostgreSQL the note is kept on the machine too, in
/// `<workspace>/.planrun/children/<id>`, and removed when the run pauses or
/// ends: when the guard died with its holder (`kill -9` of both), a claim
/// on the same machine after the holder's lease expired stops the child it
/// left running.
#[cfg(feature = "postgres")]
#[test]
fn on_postgres_a_claim_on_this_machine_stops_the_child_a_killed_holder_and_guard_left_running() {
    let sandbox = Sandbox::new();
    let Some(schema) = crate::pg_store::Schema::migrated("left-over child", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    write_slow_plan(&sandbox);
    let note = sandbox.workspace().join(".planrun/children/t");
    let mut holder = sandbox.test_plan().args(store).env("PLANRUN_LEASE_SECS", "1").spawn();
    let child = noted_in(&note, None);
    let guard = guard_of(holder.id());
    kill_process(Pid::from_raw(guard as i32).expect("pid"), Signal::KILL).expect("SIGKILL the guard");
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(alive(child), "the killed holder's child runs on");
    sandbox.planrun().in_sandbox().args(["cancel", "t"]).args(store).expect_code(0).run();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!alive(child), "cancel killed the child");
    assert_eq!(schema.sql("SELECT count(*) FROM audit_events WHERE line LIKE '%\"child_stopped\"%'"), "1");
    assert!(!note.exists(), "the note is taken");
    sandbox.planrun().in_sandbox().args(["verify", "t"]).args(store).expect_code(0).run();
}

/// A holder killed during its second step (`wait`), after a checkpoint that
/// names the first (`warmup`): the note names the step of its child, so
/// `resume` logs `child_stopped` at `wait`; `show` prints the interruption,
/// the resume and the stopped child in the timeline; and once the run has
/// ended no note is left in its folder (each child's note goes with it).
#[test]
fn the_stopped_child_is_logged_at_its_own_step_and_show_prints_the_interruption() {
    let sandbox = Sandbox::new();
    let script = "test -f marker || { touch marker; sleep 30; }";
    let plan = format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"warmup\"\nkind = \"shell\"\ncommand = [\"echo\", \"warm\"]\n\n\
         [[steps]]\nid = \"wait\"\nkind = \"shell\"\ncommand = [\"sh\", \"-c\", \"{script}\"]\n\n\
         [[steps]]\nid = \"end\"\nkind = \"finish\"\n"
    );
    let policy = TEST_POLICY.replace("step_timeout_secs = 1", "step_timeout_secs = 60").replacen(
        "[retry]",
        &format!("[[shell.allow]]\nprogram = \"sh\"\nargs = [[\"-c\", \"{script}\"]]\n[retry]"),
        1,
    );
    sandbox.write_plan(&plan, &policy);
    let run = sandbox.workspace().join("runs/t");
    let mut holder = sandbox.test_plan().spawn();
    // The first step's child is noted too, for the short while it runs
    // (and its sandbox is torn down): the note must come to name `wait`.
    let deadline = Instant::now() + Duration::from_secs(20);
    let first = loop {
        let note = fs::read_to_string(run.join(".child")).unwrap_or_default();
        if note.lines().any(|line| line == "step wait") {
            break note.split_whitespace().next().and_then(|pid| pid.parse::<u32>().ok()).expect("the note's pid");
        }
        assert!(Instant::now() < deadline, "the note names its step: {note:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    holder.kill().expect("SIGKILL the holder");
    holder.wait().expect("reap the holder");
    assert!(alive(first), "the killed holder's child runs on");

    sandbox.planrun().in_sandbox().args(["resume", "t", "--policies", "policies"]).expect_code(0).run();
    assert!(!alive(first), "resume stopped the left-over child");
    let stopped: Vec<Value> = fs::read_to_string(run.join("audit.jsonl"))
        .expect("audit log")
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON"))
        .filter(|event| event["event_type"] == "child_stopped")
        .collect();
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!(stopped[0]["step_id"], "wait", "logged at the step whose child it was");
    assert_eq!(stopped[0]["details"]["pid"], u64::from(first));
    assert!(!run.join(".child").exists(), "an ended run keeps no note of its last child");

    let shown = sandbox.planrun().in_sandbox().args(["show", "t"]).expect_code(0).run().stdout;
    let line_of = |text: &str| shown.lines().position(|line| line.contains(text));
    let resumed = line_of("interrupted; resumed from its checkpoint").unwrap_or_else(|| panic!("{shown}"));
    let child = line_of(&format!("stopped the child (pid {first})")).unwrap_or_else(|| panic!("{shown}"));
    let attempt = shown
        .lines()
        .position(|line| line.contains(" wait ") && line.contains("attempt 1"))
        .unwrap_or_else(|| panic!("{shown}"));
    let warmup = line_of(" warmup ").unwrap_or_else(|| panic!("{shown}"));
    assert!(warmup < resumed && resumed < child && child < attempt, "in the timeline's order:\n{shown}");
    assert!(shown.lines().nth(child).is_some_and(|line| line.contains(" wait ")), "{shown}");
    sandbox.planrun().in_sandbox().args(["verify", "t"]).expect_code(0).run();
}
