//! Queued runs on the PostgreSQL store with the real binary: `--queue`
//! records a run without driving it, `show`/`runs`/`cancel` on it, a worker
//! starts it with the same records as a direct run (byte for byte under the
//! test clock), a claimer that died before the first checkpoint leaves it
//! to the next claim once its lease expires, the file store refuses
//! `--queue`, workers claim only the runs of their workspace id
//! (`.planrun/id`), and 4 worker processes drain 200 queued runs: each
//! exactly once, none lost, never held by two at once. And the service's
//! `POST /runs` with `"wait": false`: 202 at once, then the run's records
//! as a waited-for run's, on the file store and in PostgreSQL; two nodes
//! drive each accepted run once; a run left `queued` by a node whose drive
//! never began is driven by the scan.
//!
//! The server is `PLANRUN_TEST_PG`'s (see `pg_store`); without it each test
//! prints one "skipped" line.

use std::collections::BTreeMap;
use std::fs;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{ROOT, Sandbox};
use crate::pg_store::{Schema, assert_export_equals, run_files, wait_for};
use crate::serve_harness::{Node, Server, audit_events, client, get_json, post};

const FLOW: &str = "plans/flow_pwd.toml";

#[test]
fn a_queued_run_is_shown_listed_and_started_by_a_worker_as_a_direct_run() {
    let sandbox = Sandbox::new();
    // The twin: the same run started directly on the file store.
    sandbox.planrun().args(["--plan", FLOW, "--run-id", "p"]).expect_code(0).run();
    let twin = run_files(&sandbox.workspace(), "p");
    fs::remove_dir_all(sandbox.workspace()).expect("start from an empty workspace");
    let Some(schema) = Schema::migrated("queue", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];

    let queued = sandbox.planrun().args(["--plan", FLOW, "--run-id", "p", "--queue"]).args(store).expect_code(0).run();
    assert_eq!(queued.stdout, "p\n", "the id on stdout");
    assert!(queued.stderr.contains("queued: run p"), "{}", queued.stderr);
    assert_eq!(schema.sql("SELECT status, owner_id IS NULL, state IS NULL FROM runs"), "queued|t|t");
    assert!(!sandbox.workspace().join("report.txt").exists(), "nothing ran");
    let id = fs::read_to_string(sandbox.workspace().join(".planrun/id")).expect("the workspace id was made");
    assert_eq!(schema.sql("SELECT workspace_id FROM runs") + "\n", id, "runs are filed under the workspace id");

    let shown = sandbox.planrun().args(["show", "p"]).args(store).expect_code(0).run();
    assert!(shown.stdout.contains("status: queued"), "{}", shown.stdout);
    assert!(shown.stdout.contains(FLOW), "{}", shown.stdout);
    let listed = sandbox.planrun().args(["runs", "--json"]).args(store).expect_code(0).run();
    let listed: serde_json::Value = serde_json::from_str(&listed.stdout).expect("JSON");
    assert_eq!(listed[0]["status"], "queued", "{listed}");
    assert_eq!(listed[0]["plan_path"], FLOW, "{listed}");
    let table = sandbox.planrun().args(["runs"]).args(store).expect_code(0).run();
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines[0].find("STATUS"), lines[1].find("queued"), "the plan path fits its column:\n{}", table.stdout);
    let verify = sandbox.planrun().args(["verify", "p"]).args(store).expect_code(2).run();
    assert!(verify.stderr.contains("is queued"), "{}", verify.stderr);
    let out = sandbox.path().join("queued-export");
    let export = sandbox.planrun().args(["export", "p", "--out"]).arg(&out).args(store).expect_code(2).run();
    assert!(export.stderr.contains("is queued"), "{}", export.stderr);
    assert!(!out.exists(), "nothing exported");
    // Its id is taken, by the queue.
    sandbox.planrun().args(["--plan", FLOW, "--run-id", "p"]).args(store).expect_code(2).run();
    assert!(!sandbox.workspace().join("report.txt").exists(), "a direct run under the queued id ran nothing");

    let worked = sandbox.planrun().args(["worker", "--once"]).args(store).expect_code(0).run();
    assert!(worked.stdout.contains("worked: run p · done (exit 0)"), "{}", worked.stdout);
    assert!(worked.stdout.contains("1 run(s) taken up"), "{}", worked.stdout);
    assert_eq!(schema.sql("SELECT status, owner_id IS NULL, lease_version FROM runs"), "done|t|1");
    assert_export_equals(&sandbox, &schema, "p", &twin, "export");
    let again = sandbox.planrun().args(["worker", "--once"]).args(store).expect_code(0).run();
    assert!(again.stdout.contains("0 run(s) taken up"), "started once: {}", again.stdout);
}

#[test]
fn cancel_withdraws_a_queued_run_and_nothing_runs() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("queue cancel", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", FLOW, "--run-id", "c", "--queue"]).args(store).expect_code(0).run();
    let cancelled = sandbox.planrun().args(["cancel", "c", "--reason", "not needed"]).args(store).expect_code(0).run();
    assert!(cancelled.stdout.contains("cancelled"), "{}", cancelled.snapshot());
    let state: serde_json::Value =
        serde_json::from_str(&sandbox.planrun().args(["show", "c", "--json"]).args(store).expect_code(0).run().stdout)
            .expect("JSON");
    assert_eq!(state["status"], "cancelled", "{state}");
    let error = state["error"].as_str().unwrap_or_default();
    assert!(error.contains("withdrawn from the queue; nothing ran") && error.ends_with("not needed"), "{state}");
    assert_eq!(schema.sql("SELECT count(*) FROM history"), "0", "no step ran");
    sandbox.planrun().args(["verify", "c"]).args(store).expect_code(0).run();
    let worked = sandbox.planrun().args(["worker", "--once"]).args(store).expect_code(0).run();
    assert!(worked.stdout.contains("0 run(s) taken up"), "{}", worked.stdout);
    assert!(!sandbox.workspace().join("report.txt").exists(), "nothing ran");
    sandbox.planrun().args(["cancel", "c"]).args(store).expect_code(1).run();
}

#[test]
fn a_claimer_that_died_before_the_first_checkpoint_leaves_the_run_to_the_next_claim() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("queue dead claimer", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", FLOW, "--run-id", "d", "--queue"]).args(store).expect_code(0).run();
    // A worker claimed it (token 1) and died before writing anything.
    schema.sql(
        "UPDATE runs SET owner_id = 'dead:1:x', lease_version = lease_version + 1, claims = claims + 1, \
         lease_expires_at = now() + interval '1 hour' WHERE run_id = 'd'",
    );
    let held = sandbox.planrun().args(["worker", "--once"]).args(store).expect_code(0).run();
    assert!(held.stdout.contains("0 run(s) taken up"), "a live lease is respected: {}", held.stdout);
    let cancel = sandbox.planrun().args(["cancel", "d"]).args(store).expect_code(1).run();
    assert!(cancel.stderr.contains("in use"), "{}", cancel.stderr);
    assert_eq!(schema.sql("SELECT status, state IS NULL FROM runs"), "queued|t");
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second'");
    let worked = sandbox.planrun().args(["worker", "--once"]).args(store).expect_code(0).run();
    assert!(worked.stdout.contains("worked: run d · done"), "{}", worked.stdout);
    assert_eq!(schema.sql("SELECT lease_version FROM runs"), "2", "a new fencing token");
    assert_eq!(
        schema.sql("SELECT string_agg(DISTINCT lease_version::text, ',') FROM audit_events"),
        "2",
        "every record written under the new token"
    );
    assert!(sandbox.workspace().join("report.txt").exists(), "ran once, by the second claimer");
}

/// A queued run whose claimers all died before its first checkpoint: the
/// claims count as takeovers, so the claim past `PLANRUN_MAX_CLAIMS` ends
/// it `failed` (`recovery_exhausted`) before its first step.
#[test]
fn claimers_that_keep_dying_before_the_first_checkpoint_end_the_run_recovery_exhausted() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("queue exhausted claims", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", FLOW, "--run-id", "x", "--queue"]).args(store).expect_code(0).run();
    // Three claimers took it and died before writing anything.
    schema.sql(
        "UPDATE runs SET owner_id = 'dead:3:x', lease_version = lease_version + 3, claims = 3, \
         lease_expires_at = now() - interval '1 second' WHERE run_id = 'x'",
    );
    let worked =
        sandbox.planrun().args(["worker", "--once"]).args(store).env("PLANRUN_MAX_CLAIMS", "3").expect_code(0).run();
    assert!(worked.stdout.contains("run x · failed"), "{}", worked.stdout);
    assert_eq!(schema.sql("SELECT status, claims FROM runs WHERE run_id = 'x'"), "failed|0");
    let shown = sandbox.planrun().args(["show", "x"]).args(store).expect_code(0).run();
    assert!(shown.stdout.contains("recovery exhausted: the run was taken over 4 times"), "{}", shown.stdout);
    assert_eq!(schema.sql("SELECT count(*) FROM history"), "0", "no step ran");
    assert!(!sandbox.workspace().join("report.txt").exists(), "the plan's write never ran");
    sandbox.planrun().args(["verify", "x"]).args(store).expect_code(0).run();
}

#[test]
fn the_file_store_refuses_to_queue_and_writes_nothing() {
    let sandbox = Sandbox::new();
    let refused = sandbox.planrun().args(["--plan", FLOW, "--queue"]).expect_code(2).run();
    assert!(refused.stderr.contains("`--queue` needs a database store"), "{}", refused.stderr);
    assert!(!sandbox.workspace().join("runs").exists(), "no run folder");
    assert!(!sandbox.workspace().join(".planrun").exists(), "no workspace id either");
}

#[test]
fn workers_claim_only_the_runs_of_their_workspace_id_whatever_its_path() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("queue workspace id", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", FLOW, "--run-id", "w", "--queue"]).args(store).expect_code(0).run();
    let id = fs::read_to_string(sandbox.workspace().join(".planrun/id")).expect("id");
    // Another workspace (its own id) takes up nothing.
    let other = sandbox.path().join("other");
    fs::create_dir_all(other.join(".planrun")).expect("other");
    fs::write(other.join(".planrun/id"), "ws-other\n").expect("its id");
    let worker_in = |workspace: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_planrun"))
            .current_dir(ROOT)
            .args(["worker", "--once", "--store", &schema.url, "--workspace"])
            .arg(workspace)
            .env("NO_COLOR", "1")
            .output()
            .expect("run a worker")
    };
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let none = worker_in(&other);
    assert!(text(&none.stdout).contains("0 run(s) taken up"), "{}", text(&none.stderr));
    // The same workspace mounted at another path (its id file with it).
    let mounted = sandbox.path().join("elsewhere").join("mount");
    fs::create_dir_all(mounted.join(".planrun")).expect("mount");
    fs::write(mounted.join(".planrun/id"), &id).expect("the same id");
    let worked = worker_in(&mounted);
    assert!(text(&worked.stdout).contains("worked: run w · done"), "{}", text(&worked.stderr));
    assert!(mounted.join("report.txt").exists(), "it ran in the workspace as mounted there");
    let bad = sandbox.path().join("bad");
    fs::create_dir_all(bad.join(".planrun")).expect("bad");
    fs::write(bad.join(".planrun/id"), "two words\n").expect("a bad id");
    let refused = worker_in(&bad);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("is not a valid id"), "{}", text(&refused.stderr));
}

/// One keyed write per run: the effect of run `X` is `effect-X.txt`.
const EFFECT_PLAN: &str = r#"version = 1
id = "queue_effect"
description = "one keyed write per run"
keywords = ["queue effect"]
policy = "default"

[[steps]]
id = "effect"
kind = "write_file"
path = "effect-{{ run.id }}.txt"
content = "{{ run.id }}"
idempotency_key = "effect-{{ run.id }}"

[[steps]]
id = "done"
kind = "finish"
"#;

const RUNS: usize = 200;
const WORKERS: usize = 4;

fn start_worker(sandbox: &Sandbox, schema: &Schema, index: usize) -> Child {
    Command::new(env!("CARGO_BIN_EXE_planrun"))
        .current_dir(ROOT)
        .args(["worker", "--poll-ms", "100", "--node-id", &format!("w{index}"), "--store", &schema.url])
        .arg("--workspace")
        .arg(sandbox.workspace())
        .env("NO_COLOR", "1")
        .env_remove("PLANRUN_TEST_CLOCK")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a worker")
}

#[test]
fn four_workers_drain_two_hundred_queued_runs_each_exactly_once() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("queue 4x200", &sandbox) else { return };
    let plan = sandbox.write("queue_effect.toml", EFFECT_PLAN);
    let started = Instant::now();
    let workers: Vec<KillOnDrop> =
        (0..WORKERS).map(|index| KillOnDrop(start_worker(&sandbox, &schema, index))).collect();
    // Four submitters at once, while the workers already claim.
    std::thread::scope(|scope| {
        for submitter in 0..4 {
            let (sandbox, schema, plan) = (&sandbox, &schema, &plan);
            scope.spawn(move || {
                for n in (submitter..RUNS).step_by(4) {
                    sandbox
                        .planrun()
                        .args(["--queue", "-q", "--run-id", &format!("q{n:03}"), "--store", &schema.url, "--plan"])
                        .arg(plan)
                        .expect_code(0)
                        .run();
                }
            });
        }
    });
    let done = "SELECT count(*) FROM runs WHERE kind = 'agent' AND status = 'done' AND owner_id IS NULL";
    let mut finished = schema.sql(done);
    while finished != RUNS.to_string() && started.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(200));
        finished = schema.sql(done);
    }
    let mut taken: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (index, mut worker) in workers.into_iter().enumerate() {
        let _ = worker.0.kill();
        let mut output = String::new();
        if let Some(mut pipe) = worker.0.stdout.take() {
            std::io::Read::read_to_string(&mut pipe, &mut output).expect("the worker's output");
        }
        drop(worker);
        for line in output.lines() {
            if let Some(rest) = line.strip_prefix("worked: run ") {
                let run_id = rest.split(' ').next().unwrap_or_default().to_string();
                assert!(rest.contains("· done (exit 0)"), "{line}");
                taken.entry(run_id).or_default().push(index);
            }
        }
    }
    eprintln!("{RUNS} queued runs drained by {WORKERS} workers in {:.1} s", started.elapsed().as_secs_f64());
    assert_eq!(finished, RUNS.to_string(), "every run done, its lease given back");
    assert_eq!(taken.len(), RUNS, "every run taken up");
    let twice: Vec<_> = taken.iter().filter(|(_, by)| by.len() != 1).collect();
    assert!(twice.is_empty(), "each run taken up once: {twice:?}");
    let busy = taken.values().flatten().collect::<std::collections::BTreeSet<_>>().len();
    assert!(busy >= 2, "the runs were shared among the workers ({busy} took some)");
    // Each run claimed once, every event of it under that one token.
    let reclaimed = "SELECT string_agg(run_id || ': ' || events, '; ') FROM (SELECT e.run_id, \
         string_agg((e.line::jsonb ->> 'event_type') || '@' || e.lease_version, ' ' ORDER BY e.seq) AS events \
         FROM audit_events e JOIN runs r USING (kind, run_id) WHERE r.lease_version > 1 GROUP BY e.run_id LIMIT 3) x";
    assert_eq!(
        schema.sql("SELECT string_agg(DISTINCT lease_version::text, ',') FROM runs"),
        "1",
        "{}",
        schema.sql(reclaimed)
    );
    let mixed = "SELECT count(*) FROM (SELECT e.run_id FROM audit_events e JOIN runs r USING (kind, run_id) \
         GROUP BY e.run_id HAVING count(DISTINCT e.lease_version) <> 1 OR min(e.lease_version) <> min(r.lease_version)) x";
    assert_eq!(schema.sql(mixed), "0", "no run held by two workers");
    // Each effect once: one attempt per step, one done receipt, one
    // `run_finished`, per run.
    let per_run = |sql: &str| schema.sql(&format!("SELECT string_agg(DISTINCT n::text, ',') FROM ({sql}) x"));
    assert_eq!(per_run("SELECT count(*) AS n FROM history GROUP BY run_id"), "2");
    let finished_events = "SELECT count(*) AS n FROM audit_events \
         WHERE line::jsonb ->> 'event_type' = 'run_finished' GROUP BY run_id";
    assert_eq!(per_run(finished_events), "1");
    assert_eq!(schema.sql("SELECT count(DISTINCT run_id) FROM audit_events WHERE line LIKE '%run_finished%'"), "200");
    assert_eq!(schema.sql("SELECT count(*) FROM receipts WHERE status = 'done'"), RUNS.to_string());
    for n in 0..RUNS {
        let id = format!("q{n:03}");
        let effect = fs::read_to_string(sandbox.workspace().join(format!("effect-{id}.txt"))).expect("the effect");
        assert_eq!(effect, id);
    }
}

/// Polls `GET /runs/{id}` until its status is `want` (10 s at most); the
/// last body.
async fn wait_for_status(server: &Server, client: &reqwest::Client, id: &str, want: &str) -> serde_json::Value {
    let url = server.url(&format!("/runs/{id}"));
    let (mut status, mut body) = get_json(client, &url).await;
    for _ in 0..100 {
        if status == 200 && body["status"] == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        (status, body) = get_json(client, &url).await;
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_runs_without_waiting_answers_202_then_runs_as_a_waited_run() {
    let server = Server::start(&[]);
    let client = client();
    let goal = json!({"goal": "test flow pwd to file", "adapter": "agent"});
    let (status, waited) = post(&client, &server.url("/runs"), goal.clone()).await;
    assert_eq!((status, waited["status"].as_str()), (201, Some("done")), "{waited}");
    let mut body = goal.clone();
    body["wait"] = json!(false);
    let response = client.post(server.url("/runs")).json(&body).send().await.expect("send");
    assert_eq!(response.status().as_u16(), 202);
    let location = response.headers().get("location").and_then(|value| value.to_str().ok()).map(str::to_string);
    let accepted: serde_json::Value = response.json().await.expect("JSON");
    assert_eq!(accepted["status"], "queued", "{accepted}");
    let id = accepted["run_id"].as_str().expect("id").to_string();
    assert_eq!(location.as_deref(), Some(format!("/runs/{id}").as_str()));
    let done = wait_for_status(&server, &client, &id, "done").await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["agent_final_status"], "done", "{done}");
    assert_eq!(audit_events(&server, &id), audit_events(&server, "br-0001"), "the records of a waited-for run");
    let (status, _) = post(&client, &server.url("/runs"), json!({"goal": "test flow pwd to file", "wait": "no"})).await;
    assert_eq!(status, 422, "`wait` is a boolean");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_run_is_durable_in_postgres_and_driven_by_the_node() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("serve accepted", &sandbox) else { return };
    let server = Server::start_in(sandbox, &[("PLANRUN_STORE", schema.url.as_str())]);
    let client = client();
    let (status, accepted) =
        post(&client, &server.url("/runs"), json!({"goal": "test flow pwd to file", "wait": false})).await;
    assert_eq!((status, accepted["status"].as_str()), (202, Some("queued")), "{accepted}");
    let done = wait_for_status(&server, &client, "br-0001", "done").await;
    assert_eq!(done["status"], "done", "{done}");
    let kinds = schema.sql("SELECT string_agg(kind || ':' || run_id || ':' || status, ' ' ORDER BY kind) FROM runs");
    assert_eq!(kinds, "agent:agent-br-0001:done bridge:br-0001:done");
    assert!(!server.exists("bridge"), "nothing in the file layout");
}

/// A child process killed when the test ends, a failing one included.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_accepting_runs_drive_each_exactly_once() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("serve two nodes", &sandbox) else { return };
    let envs = [("PLANRUN_STORE", schema.url.as_str())];
    let server = Server::start_in(sandbox, &envs);
    // A second node on the same workspace and database, scanning for
    // queued runs while the first accepts and drives its own.
    let other = server.another_node(&envs, &[]);
    let other_base = other.base.clone();
    let client = client();
    let body = json!({"goal": "test flow pwd to file", "wait": false});
    for n in 0..12 {
        let url = if n % 2 == 0 { server.url("/runs") } else { format!("{other_base}/runs") };
        let (status, accepted) = post(&client, &url, body.clone()).await;
        assert_eq!((status, accepted["status"].as_str()), (202, Some("queued")), "{accepted}");
    }
    let done = "SELECT count(*) FROM runs WHERE kind = 'bridge' AND status = 'done' AND owner_id IS NULL";
    let finished = wait_for(&schema, done, "12");
    drop(other);
    assert_eq!(finished, "12", "every accepted run done");
    let per_run = |event: &str| {
        schema.sql(&format!(
            "SELECT string_agg(DISTINCT n::text, ',') FROM (SELECT count(*) AS n FROM audit_events \
             WHERE kind = 'bridge' AND line::jsonb ->> 'event_type' = '{event}' GROUP BY run_id) x"
        ))
    };
    assert_eq!(per_run("instruction_generated"), "1", "each driven once");
    assert_eq!(per_run("run_finished"), "1");
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE kind = 'agent' AND status = 'done'"), "12");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_run_left_queued_is_driven_by_the_scan() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("serve scan", &sandbox) else { return };
    // The node's drive fails at its first write after the answer (as if it
    // died there): the record is left `queued`, its log `run_created` alone.
    schema.sql(
        "CREATE FUNCTION refuse_drive() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'the node is gone'; END $$; \
         CREATE TRIGGER refuse_drive BEFORE INSERT ON audit_events FOR EACH ROW \
         WHEN (NEW.line LIKE '%instruction_generated%') EXECUTE FUNCTION refuse_drive()",
    );
    let server = Server::start_in(sandbox, &[("PLANRUN_STORE", schema.url.as_str())]);
    let client = client();
    let (status, accepted) =
        post(&client, &server.url("/runs"), json!({"goal": "test flow pwd to file", "wait": false})).await;
    assert_eq!((status, accepted["status"].as_str()), (202, Some("queued")), "{accepted}");
    let held = "SELECT status || ' ' || (owner_id IS NULL) FROM runs WHERE kind = 'bridge'";
    assert_eq!(wait_for(&schema, held, "queued true"), "queued true", "left queued, nobody holding it");
    assert_eq!(schema.sql("SELECT count(*) FROM audit_events WHERE kind = 'bridge'"), "1", "nothing sent");
    schema.sql("DROP TRIGGER refuse_drive ON audit_events");
    // The scan (every 5 s on a database store) takes it up.
    let done = wait_for_status(&server, &client, "br-0001", "done").await;
    assert_eq!(done["status"], "done", "{done}");
    let events =
        "SELECT string_agg(line::jsonb ->> 'event_type', ' ' ORDER BY seq) FROM audit_events WHERE kind = 'bridge'";
    assert_eq!(
        schema.sql(events),
        "run_created instruction_generated task_sent response_received run_finished",
        "driven once, after the scan"
    );
}

/// A policy for [`SLOW_PLAN`]'s step. No sandbox: its tool notes its pid
/// in a file at the workspace's top, which the sandbox refuses to create.
const SLOW_POLICY: &str = r#"version = 1
[shell]
sandbox = "none"
search_path = ["/usr/bin", "/bin"]
[shell.env]
PATH = "/usr/bin:/bin"
[[shell.allow]]
program = "sh"
args = [["-c", "echo $$ >> slow.pids; sleep 6"]]
[budget]
step_timeout_secs = 60
"#;

/// Every goal's plan: a 6-second shell step, then `finish`.
const SLOW_PLAN: &str = r#"version = 1
id = "slow"
default = true

[[steps]]
id = "slow"
kind = "shell"
command = ["sh", "-c", "echo $$ >> slow.pids; sleep 6"]

[[steps]]
id = "done"
kind = "finish"
"#;

/// The node driving an accepted run is killed mid-step. Another node's
/// worker continues the agent run once its lease expires; its scan, finding
/// the bridge run interrupted while that agent run is still `running`,
/// leaves it, and settles it with the agent run's result once that ends:
/// `done`, never `failed` while the work went on and succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_bridge_run_waits_for_the_agent_run_a_worker_continues() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("bridge waits", &sandbox) else { return };
    sandbox.write("plans/slow.toml", SLOW_PLAN);
    sandbox.write("policies/default.toml", SLOW_POLICY);
    let (plans, policies) = (sandbox.path().join("plans"), sandbox.path().join("policies"));
    let (plans, policies) = (plans.to_str().expect("UTF-8"), policies.to_str().expect("UTF-8"));
    let envs = [
        ("PLANRUN_STORE", schema.url.as_str()),
        ("PLANRUN_PLANS", plans),
        ("PLANRUN_POLICIES", policies),
        ("PLANRUN_LEASE_SECS", "2"),
    ];
    let first = Node::start(&sandbox, &envs, &["--no-worker"]);
    let (status, accepted) = post(&client(), &first.url("/runs"), json!({"goal": "a slow job", "wait": false})).await;
    assert_eq!((status, accepted["status"].as_str()), (202, Some("queued")), "{accepted}");
    let pids = sandbox.workspace().join("slow.pids");
    assert!(crate::common::wait_until(Duration::from_secs(10), || pids.exists()), "the agent run's step started");
    drop(first); // SIGKILL, mid-step

    let _taking_over = Server::start_in(sandbox, &envs);
    let bridge = "SELECT status FROM runs WHERE kind = 'bridge'";
    let ended =
        crate::common::wait_until(Duration::from_secs(40), || matches!(schema.sql(bridge).as_str(), "done" | "failed"));
    assert!(ended, "the bridge run was settled");
    let events = "SELECT string_agg(line::jsonb ->> 'event_type', ' ' ORDER BY seq) FROM audit_events \
                  WHERE kind = 'bridge'";
    assert_eq!(schema.sql(bridge), "done", "{}", schema.sql(events));
    assert!(schema.sql(events).ends_with("agent_run_observed run_finished"), "{}", schema.sql(events));
    assert_eq!(schema.sql("SELECT status FROM runs WHERE kind = 'agent'"), "done");
}

/// SIGTERM (what `systemctl stop` sends) stops a worker cleanly: it takes
/// nothing new, finishes the run it is driving and gives its lease back,
/// exit 0. Before, it died at once and the run waited out its lease, to
/// have its interrupted step run again by whoever took it over.
#[test]
fn a_worker_stopped_by_sigterm_finishes_its_run_and_gives_the_lease_back() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("worker stop", &sandbox) else { return };
    sandbox.write("plans/slow.toml", SLOW_PLAN);
    sandbox.write("policies/default.toml", SLOW_POLICY);
    let store = ["--store", schema.url.as_str()];
    let queue = ["--plan", "plans/slow.toml", "--queue", "--run-id"];
    for id in ["s1", "s2"] {
        sandbox.planrun().in_sandbox().args(queue).arg(id).args(store).expect_code(0).run();
    }
    let worker = sandbox.planrun().in_sandbox().args(["worker", "--poll-ms", "100"]).args(store).spawn();
    let pids = sandbox.workspace().join("slow.pids");
    assert!(crate::common::wait_until(Duration::from_secs(10), || pids.exists()), "a run's step started");
    let pid = rustix::process::Pid::from_raw(worker.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let output = crate::common::Output::of(&sandbox, worker);
    assert_eq!(output.code, 0, "{}", output.snapshot());
    assert!(output.stderr.contains("planrun worker: stopping"), "{}", output.stderr);
    assert!(output.stdout.contains("· done (exit 0)"), "{}", output.stdout);
    assert!(output.stdout.contains("1 run(s) taken up"), "nothing new taken: {}", output.stdout);
    let states = "SELECT string_agg(status || ' ' || (owner_id IS NULL), ',' ORDER BY status) FROM runs";
    assert_eq!(schema.sql(states), "done true,queued true", "finished, lease given back; the other left queued");
    let steps = fs::read_to_string(&pids).expect("pids");
    assert_eq!(steps.lines().count(), 1, "the step ran once: {steps}");
}
