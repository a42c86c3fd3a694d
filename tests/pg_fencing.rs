//! Fencing on the PostgreSQL store with real processes and signals: a
//! holder frozen past its lease (`SIGSTOP`) while another worker takes the
//! run over writes nothing when it wakes (`SIGCONT`), kills its tool and
//! exits with the lease-lost message; a run whose every holder is killed
//! ends `recovery_exhausted` after `PLANRUN_MAX_CLAIMS` takeovers while
//! another run of the workspace flows; a holder killed at each step
//! boundary and inside the effect window of the ticket demo and of a keyed
//! write is recovered by `planrun worker --once` once its short lease has
//! expired, with every keyed effect applied exactly once.
//!
//! Uses the server `PLANRUN_TEST_PG` names, a schema per test (see
//! `pg_store`); skipped (one line) without it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;

use crate::common::tickets::{PLAN, RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, T_RUN, close_count, ticket_sandbox};
use crate::common::{Output, Planrun, Sandbox, wait_until};
use crate::pg_store::{Schema, resume_killed_at, wait_for};

/// A policy that allows the test's slow shell steps and keyed writes. No
/// sandbox: these tests are about leases and fencing, and their tools note
/// their pids in files at the workspace's top, which the sandbox refuses to
/// create (tests/sandbox.rs covers the sandbox).
const POLICY: &str = r#"version = 1
[shell]
sandbox = "none"
search_path = ["/usr/bin", "/bin"]
[shell.env]
PATH = "/usr/bin:/bin"
[[shell.allow]]
id = "slow"
program = "sh"
args = [["-c", "echo $$ >> slow.pids; [ -e fast ] || sleep 30"]]
[[shell.allow]]
id = "loop"
program = "sh"
args = [["-c", "echo $$ >> loop.pids; sleep 30"]]
[files]
deny = ["runs/**"]
[budget]
step_timeout_secs = 60
"#;

/// A slow shell step (fast once the workspace has a `fast` file), then a
/// keyed write, then `finish`.
const STALE_PLAN: &str = r#"version = 1
id = "stale"

[[steps]]
id = "slow"
kind = "shell"
command = ["sh", "-c", "echo $$ >> slow.pids; [ -e fast ] || sleep 30"]

[[steps]]
id = "write"
kind = "write_file"
path = "out.txt"
content = "written once"
idempotency_key = "out-{{ run.id }}"

[[steps]]
id = "done"
kind = "finish"
"#;

/// A step that sleeps until its holder is killed.
const POISON_PLAN: &str = r#"version = 1
id = "poison"

[[steps]]
id = "loop"
kind = "shell"
command = ["sh", "-c", "echo $$ >> loop.pids; sleep 30"]

[[steps]]
id = "done"
kind = "finish"
"#;

/// A keyed write, then `finish`.
const KEYED_PLAN: &str = r#"version = 1
id = "keyed"

[[steps]]
id = "write"
kind = "write_file"
path = "out.txt"
content = "written once"
idempotency_key = "out-{{ run.id }}"

[[steps]]
id = "done"
kind = "finish"
"#;

/// The lease every holder in these tests takes: short, so that a takeover
/// comes soon.
const SHORT_LEASE: (&str, &str) = ("PLANRUN_LEASE_SECS", "1");

/// The pids a step appended to `file` of the workspace, one per run of it.
fn pids(sandbox: &Sandbox, file: &str) -> Vec<i32> {
    fs::read_to_string(sandbox.workspace().join(file))
        .unwrap_or_default()
        .lines()
        .map(|line| line.trim().parse().expect("a pid"))
        .collect()
}

/// Whether `pid` is a live process (a zombie is not).
fn alive(pid: i32) -> bool {
    u32::try_from(pid).is_ok_and(planrun::tools::children::running)
}

/// A holder started in the background, killed if the test ends first (a
/// failed assertion must not leave a stopped process behind).
struct Holder(Option<std::process::Child>);

impl Holder {
    fn signal(&self, signal: Signal) {
        let child = self.0.as_ref().expect("running");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("a pid");
        kill_process(pid, signal).expect("signal the holder");
    }

    /// Waits for it to end: what it did.
    fn finish(mut self, sandbox: &Sandbox) -> Output {
        Output::of(sandbox, self.0.take().expect("running"))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until run `id`'s lease has expired (database time).
fn wait_expired(schema: &Schema, id: &str) {
    let expired = format!("SELECT coalesce(lease_expires_at <= now(), true) FROM runs WHERE run_id = '{id}'");
    assert_eq!(wait_for(schema, &expired, "t"), "t", "the lease of `{id}` expires");
}

/// The lease version never goes down along the run's audit.
fn assert_monotonic(schema: &Schema, id: &str) {
    let monotonic = format!(
        "SELECT coalesce(bool_and(lease_version >= previous), true) FROM (SELECT lease_version, \
         lag(lease_version) OVER (ORDER BY seq) AS previous FROM audit_events WHERE run_id = '{id}') AS chain \
         WHERE previous IS NOT NULL"
    );
    assert_eq!(schema.sql(&monotonic), "t", "`{id}`: the lease version never goes down along the audit");
}

/// A command on the sandbox's own plans (`plans/test.toml`, whose path the
/// run records relative to the sandbox), or on the repository's.
fn planrun(sandbox: &Sandbox, own_plans: bool) -> Planrun<'_> {
    if own_plans { sandbox.planrun().in_sandbox() } else { sandbox.planrun() }
}

fn state(sandbox: &Sandbox, schema: &Schema, id: &str, own_plans: bool) -> Value {
    let shown = planrun(sandbox, own_plans).args(["show", id, "--json", "--store", &schema.url]).expect_code(0).run();
    serde_json::from_str(&shown.stdout).expect("JSON")
}

#[test]
fn a_holder_frozen_past_its_lease_writes_nothing_after_the_takeover_and_its_tool_is_killed() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("stale worker", &sandbox) else { return };
    sandbox.write_plan(STALE_PLAN, POLICY);
    let store = ["--store", schema.url.as_str()];
    // A: a two-second lease (held locally for 1 667 ms after each renewal).
    let holder = Holder(Some(sandbox.test_plan().args(store).env("PLANRUN_LEASE_SECS", "2").spawn()));
    assert!(wait_until(Duration::from_secs(10), || pids(&sandbox, "slow.pids").len() == 1), "A's tool started");
    let tool = pids(&sandbox, "slow.pids")[0];
    let a_token = schema.sql("SELECT lease_version FROM runs WHERE run_id = 't'");
    holder.signal(Signal::STOP);

    // Frozen, A cannot renew: its tool guard kills A's tool at A's local
    // deadline, with A still frozen and nobody else on the run yet.
    assert!(wait_until(Duration::from_secs(5), || !alive(tool)), "A's guard stopped A's tool at A's deadline");
    assert_eq!(schema.sql("SELECT lease_version FROM runs WHERE run_id = 't'"), a_token, "before any takeover");
    // A's lease expires and worker B takes over.
    fs::write(sandbox.workspace().join("fast"), "").expect("B's run of the slow step is quick");
    wait_expired(&schema, "t");
    let taken = planrun(&sandbox, true).args(["worker", "--once"]).args(store).clock(T_RESUME).expect_code(0).run();
    assert!(taken.stdout.contains("run t · done (exit 0)"), "{}", taken.stdout);
    let b_token = schema.sql("SELECT lease_version FROM runs WHERE run_id = 't'");
    assert!(b_token.parse::<u64>().expect("token") > a_token.parse::<u64>().expect("token"), "{a_token} -> {b_token}");
    // B, on the same machine, found nothing of A's tool left to stop.
    let stopped = "SELECT count(*) FROM audit_events WHERE run_id = 't' AND line LIKE '%\"child_stopped\"%'";
    assert_eq!(schema.sql(stopped), "0", "nothing was left running for B to stop");
    let rows = "SELECT count(*) || ' ' || max(seq) FROM audit_events WHERE run_id = 't'";
    let (audit, history) = (schema.sql(rows), schema.sql("SELECT count(*) FROM history WHERE run_id = 't'"));
    let target = sandbox.workspace().join("out.txt");
    let inode = fs::metadata(&target).expect("B wrote the target").ino();

    // A wakes: past its local deadline it kills its tool, writes nothing, exits.
    holder.signal(Signal::CONT);
    let started = Instant::now();
    let woke = holder.finish(&sandbox);
    assert!(started.elapsed() < Duration::from_secs(10), "A stops at once: {:?}", started.elapsed());
    assert_eq!(woke.code, 1, "{}", woke.snapshot());
    assert!(woke.stderr.contains("no longer holds the run's lease"), "{}", woke.stderr);
    assert!(!alive(tool), "A's tool stays stopped");
    assert_eq!(pids(&sandbox, "slow.pids").len(), 2, "A started nothing after it woke (A's and B's slow step only)");
    assert_eq!((schema.sql(rows), schema.sql("SELECT count(*) FROM history WHERE run_id = 't'")), (audit, history));
    let written_by = format!(
        "SELECT coalesce(max(seq), 0) < (SELECT min(seq) FROM audit_events WHERE run_id = 't' AND lease_version > {a_token}) \
         FROM audit_events WHERE run_id = 't' AND lease_version <= {a_token}"
    );
    assert_eq!(schema.sql(&written_by), "t", "no row of A's lease after the takeover");
    assert_monotonic(&schema, "t");
    assert_eq!(
        schema.sql("SELECT lease_version || ' ' || (owner_id IS NULL) FROM runs WHERE run_id = 't'"),
        format!("{b_token} true")
    );
    assert_eq!(fs::read_to_string(&target).expect("target"), "written once");
    assert_eq!(fs::metadata(&target).expect("target").ino(), inode, "the keyed write happened once");
    assert_eq!(schema.sql("SELECT count(*) || ' ' || min(status) FROM receipts"), "1 done");
    assert_eq!(state(&sandbox, &schema, "t", true)["status"], "done");
    planrun(&sandbox, true).args(["verify", "t"]).args(store).expect_code(0).run();
}

#[test]
fn a_run_that_kills_every_holder_ends_recovery_exhausted_while_another_run_flows() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("poison run", &sandbox) else { return };
    sandbox.write_plan(POISON_PLAN, POLICY);
    let store = ["--store", schema.url.as_str()];
    let max_claims = ("PLANRUN_MAX_CLAIMS", "2");
    let kill_after_its_step = |holder: std::process::Child, runs: usize| {
        let mut holder = holder;
        let started = wait_until(Duration::from_secs(15), || pids(&sandbox, "loop.pids").len() == runs);
        let _ = holder.kill();
        let _ = holder.wait();
        assert!(started, "the holder ran the step ({runs} runs so far)");
        // The killed holder's tool guard kills its tool at once.
        let gone = wait_until(Duration::from_secs(1), || !pids(&sandbox, "loop.pids").into_iter().any(alive));
        assert!(gone, "the killed holder's tool died with it");
    };
    let holder = sandbox.test_plan().args(store).env(SHORT_LEASE.0, SHORT_LEASE.1).spawn();
    kill_after_its_step(holder, 1);
    for claim in 1..=2 {
        wait_expired(&schema, "t");
        let worker = planrun(&sandbox, true)
            .args(["worker", "--once"])
            .args(store)
            .env(SHORT_LEASE.0, SHORT_LEASE.1)
            .env(max_claims.0, max_claims.1)
            .spawn();
        kill_after_its_step(worker, 1 + claim);
        assert_eq!(schema.sql("SELECT claims FROM runs WHERE run_id = 't'"), claim.to_string());
    }

    // Another run of the workspace, interrupted too.
    sandbox.write("plans/keyed.toml", KEYED_PLAN);
    let other = planrun(&sandbox, true)
        .args(["--plan", "plans/keyed.toml", "--policies", "policies", "--run-id", "ok"])
        .args(store)
        .env(SHORT_LEASE.0, SHORT_LEASE.1)
        .env("PLANRUN_CRASH_AT", "write:after_effect")
        .run();
    assert_eq!(other.code, -1, "{}", other.snapshot());
    wait_expired(&schema, "t");
    wait_expired(&schema, "ok");
    let worked = planrun(&sandbox, true)
        .args(["worker", "--once"])
        .args(store)
        .env(SHORT_LEASE.0, SHORT_LEASE.1)
        .env(max_claims.0, max_claims.1)
        .clock(T_RESUME)
        .expect_code(0)
        .run();
    assert!(worked.stdout.contains("run t · failed (exit 1)"), "{}", worked.stdout);
    assert!(worked.stdout.contains("run ok · done (exit 0)"), "the other run flows: {}", worked.stdout);
    assert_eq!(pids(&sandbox, "loop.pids").len(), 3, "the start and two takeovers ran the step; the third ran nothing");
    let poison = state(&sandbox, &schema, "t", true);
    assert_eq!(
        (poison["status"].as_str(), poison["stop_reason"].as_str()),
        (Some("failed"), Some("recovery_exhausted"))
    );
    assert!(poison["error"].as_str().is_some_and(|error| error.contains("taken over 3 times")), "{poison}");
    assert_eq!(
        schema.sql("SELECT string_agg(run_id || ' ' || status || ' ' || claims || ' ' || (owner_id IS NULL), ',' ORDER BY run_id) FROM runs"),
        "ok done 0 true,t failed 0 true"
    );
    let finished = "SELECT line::jsonb -> 'details' ->> 'stop_reason' FROM audit_events \
         WHERE run_id = 't' AND line::jsonb ->> 'event_type' = 'run_finished'";
    assert_eq!(schema.sql(finished), "recovery_exhausted", "a sealed ending in the audit");
    for id in ["t", "ok"] {
        assert_monotonic(&schema, id);
        planrun(&sandbox, true).args(["verify", id]).args(store).expect_code(0).run();
    }
    let again = planrun(&sandbox, true).args(["worker", "--once"]).args(store).expect_code(0).run();
    assert!(again.stdout.contains("0 run(s) taken up"), "an exhausted run is not taken up again: {}", again.stdout);
}

/// Kills (through the crash hook) the holder of run `t` at `point`, waits for
/// its short lease to expire, lets `worker --once` finish the run, and
/// checks it ended `done` with its records verified.
fn crash_and_recover(sandbox: &Sandbox, schema: &Schema, crashed: Output, own_plans: bool, point: &str) {
    let id = RUN;
    assert_eq!(crashed.code, -1, "{point}: killed by the hook: {}", crashed.snapshot());
    wait_expired(schema, id);
    let worked = planrun(sandbox, own_plans)
        .args(["worker", "--once", "--store", &schema.url])
        .env(SHORT_LEASE.0, SHORT_LEASE.1)
        .clock(T_RESUME_AGAIN)
        .expect_code(0)
        .run();
    assert!(worked.stdout.contains(&format!("run {id} · done (exit 0)")), "{point}: {}", worked.stdout);
    assert_eq!(state(sandbox, schema, id, own_plans)["status"], "done", "{point}");
    assert_monotonic(schema, id);
    planrun(sandbox, own_plans).args(["verify", id, "--store", &schema.url]).expect_code(0).run();
}

#[test]
fn a_holder_killed_at_each_step_boundary_and_inside_the_effect_window_is_recovered_exactly_once() {
    // The ticket demo, after its approval.
    for point in ["close:before_effect", "close:before_receipt", "close:after_effect", "close:after_checkpoint"] {
        let sandbox = ticket_sandbox("open", 0);
        let Some(schema) = Schema::migrated(point, &sandbox) else { return };
        let store = ["--store", schema.url.as_str()];
        sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
        sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
        let crashed = resume_killed_at(&sandbox, &schema, point, SHORT_LEASE.1);
        let closed_before = close_count(&sandbox, "ticket-7");
        assert_eq!(closed_before, u64::from(point != "close:before_effect"), "{point}: closed before the kill");
        crash_and_recover(&sandbox, &schema, crashed, false, point);
        assert_eq!(close_count(&sandbox, "ticket-7"), 1, "{point}: closed exactly once");
        assert_eq!(schema.sql("SELECT status FROM receipts"), "done", "{point}");
    }
    // The ticket demo killed at its first step boundary, before the pause.
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("lookup boundary", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let crashed = sandbox
        .planrun()
        .args(["--plan", PLAN, "--run-id", RUN])
        .args(store)
        .env(SHORT_LEASE.0, SHORT_LEASE.1)
        .env("PLANRUN_CRASH_AT", "lookup:after_checkpoint")
        .clock(T_RUN)
        .run();
    assert_eq!(crashed.code, -1, "{}", crashed.snapshot());
    wait_expired(&schema, RUN);
    let paused = sandbox.planrun().args(["worker", "--once"]).args(store).clock(T_APPROVE).expect_code(0).run();
    assert!(paused.stdout.contains("run t · waiting_approval (exit 3)"), "{}", paused.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "nothing closed before the approval");
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_RESUME).expect_code(0).run();
    let done = sandbox.planrun().args(["worker", "--once"]).args(store).clock(T_RESUME_AGAIN).expect_code(0).run();
    assert!(done.stdout.contains("run t · done (exit 0)"), "{}", done.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_monotonic(&schema, RUN);
    drop(schema);

    // A keyed write: written exactly once (each write replaces the file, a
    // new inode), whichever point the holder died at.
    for point in ["write:before_effect", "write:before_receipt", "write:after_effect", "write:after_checkpoint"] {
        let sandbox = Sandbox::new();
        let Some(schema) = Schema::migrated(point, &sandbox) else { return };
        sandbox.write_plan(KEYED_PLAN, POLICY);
        let crashed = sandbox
            .test_plan()
            .args(["--store", &schema.url])
            .env(SHORT_LEASE.0, SHORT_LEASE.1)
            .env("PLANRUN_CRASH_AT", point)
            .run();
        let target = sandbox.workspace().join("out.txt");
        let before = fs::metadata(&target).ok().map(|metadata| metadata.ino());
        assert_eq!(before.is_some(), point != "write:before_effect", "{point}: written before the kill");
        crash_and_recover(&sandbox, &schema, crashed, true, point);
        assert_eq!(fs::read_to_string(&target).expect("target"), "written once", "{point}");
        if let Some(inode) = before {
            assert_eq!(fs::metadata(&target).expect("target").ino(), inode, "{point}: not written again");
        }
        assert_eq!(schema.sql("SELECT status FROM receipts"), "done", "{point}");
    }
}
