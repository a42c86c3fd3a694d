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
use serde_json::Value;

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

/// On PostgreSQL the note is kept on the machine, in
/// `<workspace>/.planrun/children/<id>`, and removed when the run pauses or
/// ends: a claim on the same machine after the holder's lease expired stops
/// the child it left running.
#[cfg(feature = "postgres")]
#[test]
fn on_postgres_a_claim_on_this_machine_stops_the_child_a_killed_holder_left_running() {
    let sandbox = Sandbox::new();
    let Some(schema) = crate::pg_store::Schema::migrated("left-over child", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    write_slow_plan(&sandbox);
    let note = sandbox.workspace().join(".planrun/children/t");
    let mut holder = sandbox.test_plan().args(store).env("PLANRUN_LEASE_SECS", "1").spawn();
    let child = noted_in(&note, None);
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
