//! Database faults with real processes, each test on a PostgreSQL cluster of
//! its own (`.ci/postgres start`, about a second), so that restarting or
//! reconfiguring it disturbs no other test:
//!
//! - TLS: `sslmode=require` against a server without TLS is refused; with
//!   `ssl=on` (a CA and a server certificate made here with `openssl`) and
//!   plain connections refused by `pg_hba.conf`, `require`, `verify-ca`
//!   and `verify-full` with the right CA work; a wrong CA or host name is
//!   refused (exit 2) with nothing written;
//! - `pg_ctl restart -m immediate` while a worker drives runs with slow
//!   steps after a keyed close: the runs end done, each ticket closed
//!   once, `verify` passes;
//! - the worker's sessions terminated again and again (`pg_terminate_backend`)
//!   across a checkpoint: the same;
//! - a session terminated inside the COMMIT of the checkpoint after a keyed
//!   close (held there by a commit-time trigger): the outcome is read back,
//!   the run resumed again and its close recovered from the receipt;
//! - a worker started while the database is down waits, then works.
//!
//! Like `pg_store`, they run when `PLANRUN_TEST_PG` says PostgreSQL is on
//! this machine (`.ci/run`), and print one "skipped" line otherwise.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use planrun::runtime::process_var;

use crate::common::tickets::{T_APPROVE, T_RESUME};
use crate::common::tls::{make_ca, make_server_cert};
use crate::common::{ROOT, Sandbox};

/// A private cluster, stopped and removed with the value.
struct Cluster {
    dir: PathBuf,
    port: String,
}

fn script(args: &[&str]) -> Result<String, String> {
    let output = Command::new("bash")
        .arg(Path::new(ROOT).join(".ci/postgres"))
        .args(args)
        .output()
        .map_err(|error| format!("cannot run .ci/postgres: {error}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

impl Cluster {
    /// A new cluster; `None` (skipped, one line) where PostgreSQL is not set
    /// up for the tests.
    fn start(test: &str) -> Option<Cluster> {
        let required = process_var("PLANRUN_REQUIRE_PG").is_some_and(|value| value == "1");
        if process_var("PLANRUN_TEST_PG").is_none() {
            assert!(!required, "PLANRUN_REQUIRE_PG=1 but PLANRUN_TEST_PG is not set");
            eprintln!("{test}: skipped: no PostgreSQL (set PLANRUN_TEST_PG)");
            return None;
        }
        let exports = script(&["start"]).unwrap_or_else(|error| panic!("start a private cluster: {error}"));
        let value = |name: &str| {
            exports
                .lines()
                .find_map(|line| line.strip_prefix(&format!("export {name}='"))?.strip_suffix('\'').map(str::to_string))
                .unwrap_or_else(|| panic!("{name} in {exports}"))
        };
        let conninfo = value("PLANRUN_TEST_PG");
        let port = conninfo.split_whitespace().find_map(|pair| pair.strip_prefix("port=")).expect("a port").to_string();
        Some(Cluster { dir: PathBuf::from(value("PLANRUN_TEST_PG_DIR")), port })
    }

    /// `--store` over TCP with `query` (e.g. `sslmode=disable`).
    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }

    /// `pg_ctl` on this cluster (`restart -m immediate`, `stop`, `start`).
    fn ctl(&self, args: &[&str]) {
        let dir = self.dir.display().to_string();
        let mut all = vec!["ctl", dir.as_str()];
        all.extend_from_slice(args);
        script(&all).unwrap_or_else(|error| panic!("pg_ctl {args:?}: {error}"));
    }

    /// Runs `sql` as the superuser over the cluster's Unix socket.
    fn try_sql(&self, sql: &str) -> Result<String, String> {
        let conninfo = format!("host={} port={} user=postgres dbname=postgres", self.dir.display(), self.port);
        let output = Command::new("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", &conninfo, "-c", sql])
            .output()
            .map_err(|error| format!("cannot run `psql`: {error}"))?;
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim_end_matches('\n').to_string())
    }

    fn sql(&self, sql: &str) -> String {
        self.try_sql(sql).unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// Polls `sql` until it answers `want` (`secs` at most, errors while the
    /// server restarts included); the last answer.
    fn wait_for(&self, sql: &str, want: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let answer = self.try_sql(sql).unwrap_or_else(|error| error);
            if answer == want || Instant::now() > deadline {
                return answer;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = script(&["stop", &self.dir.display().to_string()]);
    }
}

fn run(program: &str, args: &[&str], dir: &Path) {
    let output = Command::new(program).args(args).current_dir(dir).output().expect("run a helper program");
    assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

fn owned_by_server(path: &Path) {
    let uid = Command::new("id").arg("-u").output().expect("id -u");
    if String::from_utf8_lossy(&uid.stdout).trim() == "0" {
        run("chown", &["postgres", &path.display().to_string()], Path::new("/"));
    }
}

/// Turns TLS on with a server certificate for `127.0.0.1` signed by a new
/// CA (`<dir>/ca.pem`), refuses plain TCP sessions, and restarts.
fn enable_tls(cluster: &Cluster) -> PathBuf {
    let dir = &cluster.dir;
    make_ca(dir, "ca");
    make_ca(dir, "other-ca");
    make_server_cert(dir, "ca");
    for file in ["server.key", "server.pem"] {
        owned_by_server(&dir.join(file));
    }
    run("chmod", &["600", "server.key"], dir);
    let conf = dir.join("data/postgresql.conf");
    let mut settings = fs::read_to_string(&conf).expect("postgresql.conf");
    settings.push_str(&format!(
        "\nssl = on\nssl_cert_file = '{0}/server.pem'\nssl_key_file = '{0}/server.key'\n",
        dir.display()
    ));
    fs::write(&conf, settings).expect("postgresql.conf");
    // Over TCP only TLS sessions are let in: a test that connects proves
    // it used TLS. The admin's `psql` uses the Unix socket.
    let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n";
    fs::write(dir.join("data/pg_hba.conf"), hba).expect("pg_hba.conf");
    cluster.ctl(&["restart", "-m", "fast"]);
    dir.join("ca.pem")
}

#[test]
fn tls_sslmodes_against_a_server_with_and_without_tls() {
    let sandbox = Sandbox::new();
    let Some(cluster) = Cluster::start("tls") else { return };
    let refused = sandbox
        .planrun()
        .args(["store", "migrate", "--store", &cluster.url("127.0.0.1", "sslmode=require")])
        .expect_code(2)
        .run();
    assert!(refused.stderr.contains("server does not support TLS"), "{}", refused.stderr);
    assert_eq!(cluster.sql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"), "0", "nothing written");

    let ca = enable_tls(&cluster);
    let ca = ca.display().to_string();
    let plain = sandbox
        .planrun()
        .args(["store", "migrate", "--store", &cluster.url("127.0.0.1", "sslmode=disable")])
        .expect_code(2)
        .run();
    assert!(plain.stderr.contains("no encryption"), "plain TCP is refused by the server: {}", plain.stderr);
    let require = cluster.url("127.0.0.1", "sslmode=require");
    sandbox.planrun().args(["store", "migrate", "--store", &require]).expect_code(0).run();
    sandbox
        .planrun()
        .args(["--plan", "plans/flow_pwd.toml", "--run-id", "p", "--store", &require])
        .expect_code(0)
        .run();
    assert_eq!(cluster.sql("SELECT status FROM runs WHERE run_id = 'p'"), "done");
    let full = cluster.url("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={ca}"));
    sandbox.planrun().args(["verify", "p", "--store", &full]).expect_code(0).run();
    let ca_only = cluster.url("localhost", &format!("sslmode=verify-ca&sslrootcert={ca}"));
    sandbox.planrun().args(["verify", "p", "--store", &ca_only]).expect_code(0).run();
    let default = cluster.url("127.0.0.1", "application_name=planrun-tls");
    sandbox.planrun().args(["runs", "--store", &default]).expect_code(0).run();

    let other_ca = cluster.dir.join("other-ca.pem").display().to_string();
    for (url, message) in [
        (cluster.url("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={other_ca}")), "UnknownIssuer"),
        (cluster.url("127.0.0.1", &format!("sslmode=require&sslrootcert={other_ca}")), "UnknownIssuer"),
        (cluster.url("localhost", &format!("sslmode=verify-full&sslrootcert={ca}")), "not valid for name"),
        (cluster.url("127.0.0.1", "sslmode=verify-full&sslrootcert=/no/such/ca.pem"), "cannot read"),
        (cluster.url("127.0.0.1", "sslmode=verify-full"), "sslrootcert=PATH"),
    ] {
        let output = sandbox.planrun().args(["--plan", "plans/flow_pwd.toml", "--run-id", "q", "--store", &url]).run();
        assert_eq!(output.code, 2, "{url}: {}", output.snapshot());
        assert!(output.stderr.contains(message), "{url}: {}", output.stderr);
    }
    assert_eq!(cluster.sql("SELECT string_agg(run_id, ',') FROM runs"), "p", "nothing written by a refused one");
}

/// The test plan of run `id`: a look-up of `ticket-<id>`, its keyed close
/// behind an approval, two slow steps, the finish and the checks.
fn fault_plan(id: &str) -> String {
    format!(
        r#"version = 1
id = "fault_{id}"

[[steps]]
id = "lookup"
kind = "ticket_lookup"
ticket_id = "ticket-{id}"

[[steps]]
id = "close"
kind = "ticket_close"
ticket_id = "ticket-{id}"
approval = "required"
idempotency_key = "close-ticket-{id}"

[[steps]]
id = "slow-1"
kind = "shell"
command = ["sleep", "2"]

[[steps]]
id = "slow-2"
kind = "shell"
command = ["sleep", "2"]

[[steps]]
id = "done"
kind = "finish"

[[verify]]
kind = "ticket_status"
ticket_id = "ticket-{id}"
equals = "closed"

[[verify]]
kind = "receipt"
step = "close"
"#
    )
}

const RUNS: [&str; 3] = ["a", "b", "c"];

/// A sandbox with the runs' plans, a policy that allows `sleep 2` and the
/// tickets; every run started on `url` (paused at its close) and approved.
fn approved_runs(cluster: &Cluster, url: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    let policy = fs::read_to_string(Path::new(ROOT).join("policies/default.toml")).expect("the default policy");
    sandbox.write(
        "policies/default.toml",
        &format!("{policy}\n[[shell.allow]]\nid = \"sleep\"\nprogram = \"sleep\"\nargs = [[\"2\"]]\nreason = \"a slow step\"\n"),
    );
    let tickets: serde_json::Map<String, serde_json::Value> = RUNS
        .iter()
        .map(|id| {
            (format!("ticket-{id}"), serde_json::json!({"status": "open", "customer_note": "", "close_count": 0}))
        })
        .collect();
    sandbox.write("workspace/tickets.json", &serde_json::json!({"tickets": tickets}).to_string());
    sandbox.planrun().args(["store", "migrate", "--store", url]).expect_code(0).run();
    for id in RUNS {
        sandbox.write(&format!("plans/fault_{id}.toml"), &fault_plan(id));
        let plan = format!("plans/fault_{id}.toml");
        let start = ["--plan", plan.as_str(), "--policies", "policies", "--run-id", id, "--store", url];
        sandbox.planrun().in_sandbox().args(start).expect_code(3).run();
        sandbox.planrun().in_sandbox().args(["approve", id, "--store", url]).clock(T_APPROVE).expect_code(0).run();
    }
    assert_eq!(cluster.sql("SELECT count(*) FROM runs WHERE status = 'waiting_approval'"), "3");
    sandbox
}

/// A `planrun worker` process, killed with the value.
struct Worker {
    child: Child,
    out: PathBuf,
}

impl Worker {
    fn start(sandbox: &Sandbox, url: &str) -> Worker {
        let out = sandbox.path().join("worker.out");
        let err = sandbox.path().join("worker.err");
        let child = Command::new(env!("CARGO_BIN_EXE_planrun"))
            .current_dir(sandbox.path())
            // One loop: the demo's ticket file is not made for concurrent
            // writers (two closes at once can lose one).
            .args(["worker", "--poll-ms", "200", "--store", url, "--workspace"])
            .arg(sandbox.workspace())
            .env("NO_COLOR", "1")
            .env("PLANRUN_TEST_CLOCK", T_RESUME)
            // A lost lease is taken over after 3 s (heartbeat every second).
            .env("PLANRUN_LEASE_SECS", "3")
            .env_remove("PLANRUN_STORE")
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("worker.out"))
            .stderr(fs::File::create(err).expect("worker.err"))
            .spawn()
            .expect("start the worker");
        Worker { child, out }
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().expect("the worker's status").is_none()
    }

    /// Stops the worker; what it printed (stdout, stderr).
    fn stop(mut self) -> (String, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let read = |path: &Path| fs::read_to_string(path).unwrap_or_default();
        (read(&self.out), read(&self.out.with_extension("err")))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every run done and verified, each ticket closed exactly once, each run
/// taken up to its end once by the worker.
fn assert_done_once(cluster: &Cluster, sandbox: &Sandbox, url: &str, worker: Worker) {
    let done = cluster.wait_for("SELECT count(*) FROM runs WHERE kind = 'agent' AND status = 'done'", "3", 90);
    // The worker reports a run after its last commit: give it the time to
    // say so before it is stopped.
    let reported = || fs::read_to_string(&worker.out).unwrap_or_default().matches(" · done").count();
    let deadline = Instant::now() + Duration::from_secs(10);
    while done == "3" && reported() < RUNS.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (stdout, stderr) = worker.stop();
    if done != "3" {
        let shown: Vec<String> = RUNS
            .iter()
            .map(|id| sandbox.planrun().in_sandbox().args(["show", id, "--full", "--store", url]).run().snapshot())
            .collect();
        panic!("every run ends done ({done} did)\nworker:\n{stdout}\n{stderr}\nruns:\n{}", shown.join("\n"));
    }
    let tickets: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(sandbox.workspace().join("tickets.json")).expect("tickets"))
            .expect("JSON");
    for id in RUNS {
        assert_eq!(tickets["tickets"][format!("ticket-{id}")]["close_count"], 1, "{id} closed once: {tickets}");
        let lines = stdout.lines().filter(|line| line.contains(&format!("run {id} · done"))).count();
        assert_eq!(lines, 1, "{id} reported done once:\n{stdout}");
        sandbox.planrun().in_sandbox().args(["verify", id, "--store", url]).expect_code(0).run();
    }
    assert!(!stdout.contains("not continued"), "no run given up:\n{stdout}\n{stderr}");
    assert_eq!(cluster.sql("SELECT string_agg(DISTINCT status, ',') FROM receipts"), "done");
    assert_eq!(cluster.sql("SELECT count(*) FROM runs WHERE owner_id IS NOT NULL"), "0", "every lease given back");
}

/// A cluster, three approved runs and a worker (its sessions named
/// `planrun-faults`) that has committed the first close: run `a` is in
/// its slow steps, `b` and `c` wait their turn.
fn in_the_first_slow_step(test: &str) -> Option<(Cluster, String, Sandbox, Worker)> {
    let cluster = Cluster::start(test)?;
    let url = cluster.url("127.0.0.1", "sslmode=disable&application_name=planrun-faults");
    let sandbox = approved_runs(&cluster, &url);
    let worker = Worker::start(&sandbox, &url);
    let closed = cluster.wait_for("SELECT count(*) FROM receipts WHERE status = 'done'", "1", 30);
    assert_eq!(closed, "1", "the worker closed the first ticket");
    Some((cluster, url, sandbox, worker))
}

#[test]
fn a_database_restarted_mid_run_makes_the_worker_wait_and_finish_every_run_once() {
    let Some((cluster, url, sandbox, worker)) = in_the_first_slow_step("restart") else { return };
    cluster.ctl(&["restart", "-m", "immediate"]);
    assert_done_once(&cluster, &sandbox, &url, worker);
}

#[test]
fn the_worker_sessions_terminated_again_and_again_lose_no_run_and_double_nothing() {
    let Some((cluster, url, sandbox, worker)) = in_the_first_slow_step("terminate") else { return };
    // Across the end of run `a`'s first slow step (its checkpoint) and into
    // the second: every session of the worker, every 100 ms, for 2.5 s.
    let mut terminated = 0;
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        let killed = cluster.sql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'planrun-faults'",
        );
        terminated += killed.parse::<u64>().expect("a count");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(terminated > 0, "the worker's sessions were open");
    assert_done_once(&cluster, &sandbox, &url, worker);
}

#[test]
fn a_session_terminated_in_the_commit_after_a_close_is_read_back_and_closes_nothing_twice() {
    let Some(cluster) = Cluster::start("commit") else { return };
    let url = cluster.url("127.0.0.1", "sslmode=disable&application_name=planrun-faults");
    let sandbox = approved_runs(&cluster, &url);
    // Run `a`'s first checkpoint after its close (the receipt is `done`
    // already) waits 30 s inside its COMMIT, once (a sequence is not rolled
    // back): long enough to end the session there, so the worker cannot
    // know whether the checkpoint committed.
    cluster.sql(
        "CREATE SEQUENCE slow_commit_once; \
         CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF nextval('slow_commit_once') = 1 THEN PERFORM pg_sleep(30); END IF; RETURN NULL; END $$; \
         CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON runs DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
             WHEN (NEW.kind = 'agent' AND NEW.run_id = 'a' AND NEW.state_version > OLD.state_version) \
             EXECUTE FUNCTION slow_commit()",
    );
    let worker = Worker::start(&sandbox, &url);
    // A step's checkpoint is one statement (its implicit commit runs the
    // deferred trigger); a checkpoint with a decision is a transaction.
    let in_commit = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'planrun-faults' \
         AND (query = 'COMMIT' OR query LIKE 'WITH guard AS%') AND wait_event = 'PgSleep'";
    assert_eq!(cluster.wait_for(in_commit, "1", 30), "1", "the checkpoint after the close waits in its COMMIT");
    let killed = cluster
        .sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'planrun-faults'");
    assert_ne!(killed, "0");
    assert_done_once(&cluster, &sandbox, &url, worker);
    // Read back, not assumed: the checkpoint had not committed (nothing the
    // lost lease wrote is in the log), so the run was claimed once more,
    // taken up again from its approval, and its close recovered from the
    // receipt (the ticket was closed once, checked above).
    let token = |id: &str| -> u64 {
        cluster.sql(&format!("SELECT lease_version FROM runs WHERE run_id = '{id}'")).parse().expect("a token")
    };
    assert_eq!(token("a"), token("b") + 1, "run `a` was claimed once more than `b`");
    let lost = format!("SELECT count(*) FROM audit_events WHERE run_id = 'a' AND lease_version = {}", token("a") - 1);
    assert_eq!(cluster.sql(&lost), "0", "the lost commit left nothing");
    let state = sandbox.planrun().in_sandbox().args(["show", "a", "--json", "--store", &url]).expect_code(0).run();
    let state: serde_json::Value = serde_json::from_str(&state.stdout).expect("JSON");
    let kinds: Vec<&str> =
        state["evidence"].as_array().expect("evidence").iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"recovered_from_receipt"), "{kinds:?}");
}

#[test]
fn a_worker_started_while_the_database_is_down_waits_then_works() {
    let Some(cluster) = Cluster::start("down") else { return };
    let url = cluster.url("127.0.0.1", "sslmode=disable&connect_timeout=2");
    let sandbox = approved_runs(&cluster, &url);
    cluster.ctl(&["stop", "-m", "immediate"]);
    let one_shot = sandbox.planrun().in_sandbox().args(["runs", "--store", &url]).expect_code(2).run();
    assert!(one_shot.stderr.contains("cannot reach"), "a one-shot command fails fast: {}", one_shot.stderr);
    let mut worker = Worker::start(&sandbox, &url);
    std::thread::sleep(Duration::from_secs(2));
    assert!(worker.alive(), "the worker waits for the database");
    cluster.ctl(&["start"]);
    let err = sandbox.path().join("worker.err");
    assert_done_once(&cluster, &sandbox, &url, worker);
    let said = fs::read_to_string(err).expect("worker.err");
    assert!(said.contains("waiting for the store"), "{said}");
}
