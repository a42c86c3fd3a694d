//! The PostgreSQL store with the real binary (`--store postgres://…`): the
//! flow_pwd and ticket demo stories on it, `planrun export` equal byte for
//! byte to the same run on the file store (a stretch of reads too, and a
//! crash inside one loses no step), `store migrate` twice, an
//! unmigrated schema and bad or unreachable URLs refused with nothing
//! written, tampered rows refused by `verify`, `show` and `resume`.
//!
//! The server is the one `PLANRUN_TEST_PG` names (libpq key/value form,
//! `.ci/run` starts one); each test gets its own schema. Without it each
//! test prints one "skipped: no PostgreSQL" line; with
//! `PLANRUN_REQUIRE_PG=1` (CI) a test that cannot reach it fails.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use planrun::runtime::process_var;

use serde_json::json;

use crate::common::tickets::{PLAN, RUN, T_APPROVE, T_RESUME, T_RESUME_AGAIN, T_RUN, close_count, ticket_sandbox};
use crate::common::{Output, ROOT, Sandbox};
use crate::serve_harness::{Server, client, get_json, post};

static NEXT: AtomicU64 = AtomicU64::new(1);

const FILES: [&str; 4] = ["state.json", "plan.json", "history.jsonl", "audit.jsonl"];

pub fn psql(conninfo: &str, sql: &str) -> Result<String, String> {
    let output = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", conninfo, "-c", sql])
        .output()
        .map_err(|error| format!("cannot run `psql`: {error}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim_end_matches('\n').to_string())
}

/// One schema of the test server, dropped with the value (also used by
/// `pg_fencing`, `pg_approvals` and `pg_queue`).
pub struct Schema {
    pub name: String,
    admin: String,
    /// `--store` for this schema.
    pub url: String,
    /// `psql` connection string for this schema.
    pub conninfo: String,
}

impl Schema {
    /// A new, empty schema; `None` (skipped, one line) without a server.
    pub(crate) fn new(test: &str) -> Option<Schema> {
        let required = process_var("PLANRUN_REQUIRE_PG").is_some_and(|value| value == "1");
        let Some(admin) = process_var("PLANRUN_TEST_PG") else {
            assert!(!required, "PLANRUN_REQUIRE_PG=1 but PLANRUN_TEST_PG is not set");
            eprintln!("{test}: skipped: no PostgreSQL (set PLANRUN_TEST_PG)");
            return None;
        };
        let name = format!("it_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        if let Err(error) = psql(&admin, &format!("CREATE SCHEMA {name}")) {
            assert!(!required, "PLANRUN_REQUIRE_PG=1 but {admin} cannot be reached: {error}");
            eprintln!("{test}: skipped: no PostgreSQL ({error})");
            return None;
        }
        let field = |key: &str| {
            admin.split_whitespace().find_map(|pair| pair.strip_prefix(&format!("{key}="))).map(str::to_string)
        };
        let host = field("host").unwrap_or_else(|| "127.0.0.1".into());
        let port = field("port").unwrap_or_else(|| "5432".into());
        let user = field("user").unwrap_or_else(|| "postgres".into());
        let database = field("dbname").unwrap_or_else(|| user.clone());
        let url = format!("postgres://{user}@{host}:{port}/{database}?sslmode=disable&options=-csearch_path%3D{name}");
        let conninfo = format!("{admin} options=-csearch_path={name}");
        Some(Schema { name, admin, url, conninfo })
    }

    /// A new schema, migrated with `planrun store migrate`.
    pub fn migrated(test: &str, sandbox: &Sandbox) -> Option<Schema> {
        let schema = Schema::new(test)?;
        sandbox.planrun().args(["store", "migrate", "--store", &schema.url]).expect_code(0).run();
        Some(schema)
    }

    pub fn sql(&self, sql: &str) -> String {
        psql(&self.conninfo, sql).unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// Runs `sql` with the append-only triggers off, as a superuser could.
    fn unguarded(&self, sql: &str) {
        self.sql(&format!(
            "ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only; {sql}; \
             ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only"
        ));
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = psql(&self.admin, &format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

/// `resume` of the ticket demo's run on `schema`, killed by the crash hook
/// at `point` (`PLANRUN_CRASH_AT`), holding a lease of `lease_secs`.
pub(crate) fn resume_killed_at(sandbox: &Sandbox, schema: &Schema, point: &str, lease_secs: &str) -> Output {
    sandbox
        .planrun()
        .args(["resume", RUN, "--store", schema.url.as_str()])
        .env("PLANRUN_LEASE_SECS", lease_secs)
        .env("PLANRUN_CRASH_AT", point)
        .clock(T_RESUME)
        .run()
}

/// Waits (at most 5 s) until the lease on run `run_id` has expired, by
/// the database's clock: a dead holder's one-second lease.
fn lease_expired(schema: &Schema, run_id: &str) {
    let expired = format!("SELECT lease_expires_at <= now() FROM runs WHERE run_id = '{run_id}'");
    for _ in 0..50 {
        if schema.sql(&expired) == "t" {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(schema.sql(&expired), "t", "a one-second lease expires");
}

/// The four files of run `run_id` in workspace `workspace`.
pub(crate) fn run_files(workspace: &Path, run_id: &str) -> Vec<(String, Vec<u8>)> {
    FILES
        .iter()
        .map(|name| {
            let path = workspace.join("runs").join(run_id).join(name);
            (name.to_string(), fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display())))
        })
        .collect()
}

/// Exports `run_id` from `schema` into `<sandbox>/<folder>` and checks the
/// export verifies with the file store and equals `twin` byte for byte.
pub(crate) fn assert_export_equals(
    sandbox: &Sandbox,
    schema: &Schema,
    run_id: &str,
    twin: &[(String, Vec<u8>)],
    folder: &str,
) {
    let out = sandbox.path().join(folder);
    sandbox.planrun().args(["export", run_id, "--store", &schema.url, "--out"]).arg(&out).expect_code(0).run();
    let exported = run_files(&out, run_id);
    for ((name, bytes), (_, expected)) in exported.iter().zip(twin) {
        assert!(
            bytes == expected,
            "{name} differs from the file store's:\n{}\n----\n{}",
            String::from_utf8_lossy(bytes),
            String::from_utf8_lossy(expected)
        );
    }
    let verify = Command::new(env!("CARGO_BIN_EXE_planrun"))
        .args(["verify", run_id, "--workspace"])
        .arg(&out)
        .env("NO_COLOR", "1")
        .env_remove("PLANRUN_STORE")
        .output()
        .expect("run planrun");
    assert!(verify.status.success(), "the file store verifies the export: {}", String::from_utf8_lossy(&verify.stderr));
    let again = sandbox.planrun().args(["export", run_id, "--store", &schema.url, "--out"]).arg(&out).run();
    assert_eq!(again.code, 2, "an existing run is never overwritten: {}", again.snapshot());
    assert!(again.stderr.contains("pick another `--out`"), "export has no --run-id: {}", again.stderr);
}

#[test]
fn flow_pwd_runs_on_postgres_and_exports_to_its_file_store_twin() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("flow_pwd", &sandbox) else { return };
    sandbox.planrun().args(["--plan", "plans/flow_pwd.toml", "--run-id", "p"]).expect_code(0).run();
    let twin = run_files(&sandbox.workspace(), "p");
    fs::remove_dir_all(sandbox.workspace().join("runs")).expect("only the database holds the run from here");
    fs::remove_file(sandbox.workspace().join("report.txt")).expect("the file the run wrote");

    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", "plans/flow_pwd.toml", "--run-id", "p"]).args(store).expect_code(0).run();
    assert!(!sandbox.workspace().join("runs").exists(), "nothing written in the file layout");
    assert_eq!(schema.sql("SELECT status FROM runs WHERE run_id = 'p'"), "done");
    let verified = sandbox.planrun().args(["verify", "p"]).args(store).expect_code(0).run();
    assert!(verified.stdout.contains("verified:"), "{}", verified.stdout);
    let listed = sandbox.planrun().args(["runs"]).args(store).expect_code(0).run();
    assert!(listed.stdout.contains('p'), "{}", listed.stdout);
    let shown = sandbox.planrun().args(["show", "latest"]).env("PLANRUN_STORE", &schema.url).expect_code(0).run();
    assert!(shown.stdout.contains("step-3"), "{}", shown.stdout);
    let again = sandbox.planrun().args(["--plan", "plans/flow_pwd.toml", "--run-id", "p"]).args(store).run();
    assert_eq!(again.code, 2, "a run is never overwritten: {}", again.snapshot());
    assert_export_equals(&sandbox, &schema, "p", &twin, "exported");
}

/// A stretch of reads on PostgreSQL (whose checkpoints the holder keeps
/// and sends 64 at a time): the records are byte for byte the file-store
/// twin's. A holder killed in the middle of the stretch leaves a stored
/// checkpoint that agrees with its rows and verifies; the next holder
/// reads again what it lost, and every step is in the history once.
#[test]
fn a_stretch_of_reads_equals_its_file_store_twin_and_a_crash_inside_it_loses_no_step() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("reads", &sandbox) else { return };
    let reads = 70;
    let mut plan = String::from("version = 1\nid = \"test\"\n");
    for i in 1..=reads {
        plan.push_str(&format!("\n[[steps]]\nid = \"r{i}\"\nkind = \"read_file\"\npath = \"in.txt\"\n"));
    }
    plan.push_str("\n[[steps]]\nid = \"end\"\nkind = \"finish\"\n");
    let policy = fs::read_to_string(Path::new(ROOT).join("policies/default.toml"))
        .expect("the default policy")
        .replace("max_steps = 32", "max_steps = 200")
        .replace("max_tool_calls = 32", "max_tool_calls = 200");
    sandbox.write_plan(&plan, &policy);
    sandbox.write("workspace/in.txt", "read me\n");
    sandbox.test_plan().expect_code(0).run();
    let twin = run_files(&sandbox.workspace(), "t");
    fs::remove_dir_all(sandbox.workspace().join("runs")).expect("only the database holds the run from here");
    let store = ["--store", schema.url.as_str()];
    sandbox.test_plan().args(store).expect_code(0).run();
    assert_eq!(schema.sql("SELECT count(*) FROM history WHERE run_id = 't'"), (reads + 1).to_string());
    assert_export_equals(&sandbox, &schema, "t", &twin, "exported");

    let crashed = sandbox
        .planrun()
        .in_sandbox()
        .args(["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "c"])
        .args(store)
        .env("PLANRUN_LEASE_SECS", "1")
        .env("PLANRUN_CRASH_AT", format!("r{reads}:after_checkpoint"))
        .run();
    assert_eq!(crashed.code, -1, "killed by the hook: {}", crashed.snapshot());
    // Whatever the dead holder had sent: the stored checkpoint covers
    // exactly the rows stored (the plan's checkpoint is version 1, each
    // read adds one version and one history row) and verifies.
    let version: u64 = schema.sql("SELECT state_version FROM runs WHERE run_id = 'c'").parse().expect("a version");
    let rows: u64 = schema.sql("SELECT count(*) FROM history WHERE run_id = 'c'").parse().expect("a count");
    assert!(version <= reads + 1 && rows == version - 1, "version {version}, {rows} history rows");
    let head =
        "SELECT audit_head_seq = (SELECT max(seq) FROM audit_events WHERE run_id = 'c') FROM runs WHERE run_id = 'c'";
    assert_eq!(schema.sql(head), "t", "no row past the stored head");
    sandbox.planrun().args(["verify", "c"]).args(store).expect_code(0).run();

    lease_expired(&schema, "c");
    sandbox.planrun().in_sandbox().args(["resume", "c", "--policies", "policies"]).args(store).expect_code(0).run();
    assert_eq!(schema.sql("SELECT status FROM runs WHERE run_id = 'c'"), "done");
    let steps = "SELECT count(*) || ' ' || count(DISTINCT line::jsonb->>'step_id') FROM history WHERE run_id = 'c'";
    assert_eq!(schema.sql(steps), format!("{} {}", reads + 1, reads + 1), "every step once");
    sandbox.planrun().args(["verify", "c"]).args(store).expect_code(0).run();
}

#[test]
fn the_ticket_demo_pauses_is_approved_and_resumes_on_postgres() {
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("ticket demo", &sandbox) else { return };
    let tickets = fs::read(sandbox.workspace().join("tickets.json")).expect("tickets");
    let story = |store: &[&str]| {
        sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
        let state = sandbox.planrun().args(["show", RUN, "--json"]).args(store).expect_code(0).run();
        let state: serde_json::Value = serde_json::from_str(&state.stdout).expect("JSON");
        let fingerprint = state["pending_action"]["fingerprint"].as_str().expect("fingerprint").to_string();
        assert_eq!(close_count(&sandbox, "ticket-7"), 0, "nothing closed before the approval");
        sandbox
            .planrun()
            .args(["approve", RUN, "--fingerprint", &fingerprint, "--by", "ops"])
            .args(store)
            .clock(T_APPROVE)
            .expect_code(0)
            .run();
        sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(0).run();
        assert_eq!(close_count(&sandbox, "ticket-7"), 1, "closed exactly once");
        let again = sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).run();
        assert_ne!(again.code, 0, "a done run is not resumed: {}", again.snapshot());
        assert_eq!(close_count(&sandbox, "ticket-7"), 1, "still once");
    };
    story(&[]);
    let twin = run_files(&sandbox.workspace(), RUN);
    fs::remove_dir_all(sandbox.workspace().join("runs")).expect("clear the file store's run");
    fs::remove_dir_all(sandbox.workspace().join(".planrun")).expect("and its receipts");
    fs::write(sandbox.workspace().join("tickets.json"), &tickets).expect("reset the tickets");

    story(&["--store", schema.url.as_str()]);
    assert!(!sandbox.workspace().join("runs").exists(), "nothing in the file layout");
    assert!(!sandbox.workspace().join(".planrun/receipts").exists(), "the receipt is in the database");
    assert_eq!(schema.sql("SELECT status FROM receipts"), "done");
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE owner_id IS NOT NULL"), "0", "every lease given back");
    assert_export_equals(&sandbox, &schema, RUN, &twin, "exported");
}

/// Two workspaces on one database (each its own `.planrun/id`) never share
/// runs: from the other one, the paused ticket run is not listed, not
/// `latest`, and cannot be approved, resumed or cancelled (exit 2, nothing
/// written: no audit row, no decision, no ticket closed on either side); it
/// can be read and verified by id, its receipt looked up in its own
/// workspace; its own workspace then finishes it as usual.
#[test]
fn a_run_of_another_workspace_is_read_by_id_but_never_listed_decided_or_continued() {
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("other workspace", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let other = ticket_sandbox("open", 0);
    // Under the test clock both workspaces would be named `ws-0001`.
    other.write("workspace/.planrun/id", "ws-other\n");
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
    let events = "SELECT count(*) FROM audit_events";
    let before = schema.sql(events);

    let listed = other.planrun().args(["runs"]).args(store).expect_code(0).run();
    let empty = other.filter(&listed.stdout);
    // The database and the workspace's id, not a runs folder that does not exist.
    assert!(empty.starts_with("no runs in postgres://"), "{empty}");
    assert!(empty.ends_with(" for workspace [WORKSPACE] (id ws-other)\n"), "{empty}");
    other.planrun().args(["show", "latest"]).args(store).expect_code(2).run();
    for command in [&["approve", RUN][..], &["reject", RUN, "--reason", "no"], &["resume", RUN], &["cancel", RUN]] {
        let refused = other.planrun().args(command).args(store).clock(T_APPROVE).expect_code(2).run();
        assert!(
            refused.stderr.contains("belongs to another workspace (id `ws-0001`; this workspace's id is `ws-other`)"),
            "{command:?}: {}",
            refused.stderr
        );
    }
    assert_eq!(schema.sql(events), before, "no audit row written");
    assert_eq!(schema.sql("SELECT count(*) FROM approvals"), "0", "no decision recorded");
    assert_eq!(schema.sql("SELECT status FROM runs WHERE run_id = 't'"), "waiting_approval");
    assert_eq!((close_count(&sandbox, "ticket-7"), close_count(&other, "ticket-7")), (0, 0));
    let shown = other.planrun().args(["show", RUN]).args(store).expect_code(0).run();
    assert!(shown.stdout.contains("waiting_approval"), "{}", shown.stdout);

    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
    sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(0).run();
    assert_eq!((close_count(&sandbox, "ticket-7"), close_count(&other, "ticket-7")), (1, 0));
    // Its log names a receipt, which is its own workspace's.
    other.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
    let listed = sandbox.planrun().args(["runs"]).args(store).expect_code(0).run();
    assert!(listed.stdout.contains(RUN), "{}", listed.stdout);
}

#[test]
fn store_migrate_twice_and_an_unmigrated_schema_is_refused_with_nothing_written() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::new("migrate") else { return };
    let store = ["--store", schema.url.as_str()];
    let refused = sandbox.planrun().args(["--plan", "plans/flow_pwd.toml"]).args(store).expect_code(2).run();
    assert!(refused.stderr.contains("planrun store migrate"), "{}", refused.stderr);
    sandbox.planrun().args(["runs"]).args(store).expect_code(2).run();
    assert_eq!(schema.sql("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"), "0");
    assert!(!sandbox.workspace().join("report.txt").exists(), "the plan did not run");

    let first = sandbox.planrun().args(["store", "migrate"]).args(store).expect_code(0).run();
    assert!(first.stdout.contains("applied migration(s) 1, 2, 3"), "{}", first.stdout);
    let second = sandbox.planrun().args(["store", "migrate"]).env("PLANRUN_STORE", &schema.url).expect_code(0).run();
    assert!(second.stdout.contains("already up to date"), "{}", second.stdout);
    assert_eq!(schema.sql("SELECT count(*) FROM schema_migrations"), "4");
    let file = sandbox.planrun().args(["store", "migrate"]).expect_code(2).run();
    assert!(file.stderr.contains("file store has no schema"), "{}", file.stderr);

    schema.sql("INSERT INTO schema_migrations (version, sha256) VALUES (99, 'from a newer planrun')");
    let newer = sandbox.planrun().args(["runs"]).args(store).expect_code(2).run();
    assert!(newer.stderr.contains("newer than this planrun"), "{}", newer.stderr);
}

/// `options=-csearch_path=<a schema nobody created>`: `current_schema()` is
/// NULL there. Every command says so (exit 2, never a panic) and nothing is
/// created or run.
#[test]
fn a_search_path_naming_no_existing_schema_is_refused_by_every_command() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::new("nosuch") else { return };
    let url = schema.url.replace(&format!("search_path%3D{}", schema.name), "search_path%3Dnosuch_schema_x");
    assert_ne!(url, schema.url);
    for args in [&["store", "migrate"][..], &["runs"], &["--plan", "plans/flow_pwd.toml"], &["worker", "--once"]] {
        let output = sandbox.planrun().args(args).args(["--store", url.as_str()]).expect_code(2).run();
        assert!(output.stderr.contains("no schema of that search path exists"), "{args:?}: {}", output.stderr);
    }
    assert_eq!(schema.sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'nosuch_schema_x'"), "0");
    assert!(!sandbox.workspace().join("report.txt").exists(), "the plan did not run");
}

#[test]
fn malformed_and_unreachable_stores_are_refused_before_anything_runs() {
    let sandbox = Sandbox::new();
    for (url, message) in [
        ("mysql://u@h/db", "unknown store"),
        ("postgres://u@h/db?sslmode=verify-full", "sslrootcert=PATH"),
        ("postgres://u@h:port/db", "malformed"),
        ("postgres://u@127.0.0.1:1/db?connect_timeout=2", "cannot reach"),
    ] {
        for args in [vec!["--plan", "plans/flow_pwd.toml"], vec!["runs"], vec!["show", "latest"]] {
            let output = sandbox.planrun().args(&args).args(["--store", url]).expect_code(2).run();
            assert!(output.stderr.contains(message), "{url} {args:?}: {}", output.stderr);
        }
        let output = sandbox.planrun().args(["store", "migrate", "--store", url]).expect_code(2).run();
        assert!(output.stderr.contains(message), "{url}: {}", output.stderr);
    }
    assert!(!sandbox.workspace().exists(), "nothing written");
    let secret =
        sandbox.planrun().args(["runs", "--store", "postgres://u:hunter2@127.0.0.1:1/db"]).expect_code(2).run();
    assert!(!secret.stderr.contains("hunter2"), "the password is never printed: {}", secret.stderr);
    // Commands that touch no run never connect.
    sandbox
        .planrun()
        .args(["check", "plans/flow_pwd.toml", "--store", "postgres://u@127.0.0.1:1/db"])
        .expect_code(0)
        .run();
}

#[test]
fn tampered_rows_are_refused_by_verify_show_and_resume() {
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("tamper", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
    let original = schema.sql("SELECT state FROM runs WHERE run_id = 't'");
    let refused = |what: &str| {
        for command in [vec!["verify", RUN], vec!["show", RUN], vec!["resume", RUN]] {
            let output = sandbox.planrun().args(&command).args(store).clock(T_RESUME).run();
            assert_eq!(output.code, 2, "{what}: {command:?} {}", output.snapshot());
            assert!(output.stderr.contains("failed verification"), "{what}: {}", output.stderr);
        }
        assert_eq!(close_count(&sandbox, "ticket-7"), 0, "{what}: nothing ran");
    };

    schema.sql("UPDATE runs SET state = replace(state, '\"waiting_approval\"', '\"running\"') WHERE run_id = 't'");
    refused("runs.state edited");
    schema.sql(&format!("UPDATE runs SET state = $q${original}$q$ WHERE run_id = 't'"));
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();

    let count: u64 = schema.sql("SELECT count(*) FROM audit_events WHERE run_id = 't'").parse().expect("count");
    assert!(count >= 3, "{count}");
    assert!(psql(&schema.conninfo, "DELETE FROM audit_events WHERE seq = 2").is_err(), "the trigger refuses");
    schema.unguarded("UPDATE audit_events SET line = replace(line, 'run_started', 'run_STARTED') WHERE seq = 1");
    refused("audit event edited");
    schema.unguarded("UPDATE audit_events SET line = replace(line, 'run_STARTED', 'run_started') WHERE seq = 1");
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
    schema.unguarded(
        "UPDATE audit_events AS e SET line = o.line, hash = o.hash FROM audit_events AS o \
         WHERE e.run_id = 't' AND o.run_id = 't' AND ((e.seq = 1 AND o.seq = 2) OR (e.seq = 2 AND o.seq = 1))",
    );
    refused("audit events re-ordered");
    schema.unguarded(
        "UPDATE audit_events AS e SET line = o.line, hash = o.hash FROM audit_events AS o \
         WHERE e.run_id = 't' AND o.run_id = 't' AND ((e.seq = 1 AND o.seq = 2) OR (e.seq = 2 AND o.seq = 1))",
    );
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
    schema.unguarded(&format!("DELETE FROM audit_events WHERE run_id = 't' AND seq = {count}"));
    refused("last audit event deleted");
}

/// A receipt the store cannot read (its table gone: the database answers
/// with an error) is a store failure, never a judgement of the receipt:
/// the approved close does not run and the run is not made
/// `tool_result_uncertain` (it stays waiting, resumable); `verify` and
/// `show` of a run whose log names a receipt say the store failed, not
/// that the run was tampered with. With the table back, the same resume
/// closes the ticket once and the run verifies.
#[test]
fn a_receipt_the_store_cannot_read_stops_the_run_and_is_never_judged() {
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("receipt outage", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
    schema.sql("ALTER TABLE receipts RENAME TO receipts_away");
    let stopped = sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).run();
    assert_ne!(stopped.code, 0, "{}", stopped.snapshot());
    assert!(stopped.stderr.contains("receipts"), "the store's own error: {}", stopped.stderr);
    assert!(!stopped.stderr.contains("uncertain"), "{}", stopped.stderr);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "nothing closed while the receipt could not be read");
    assert_eq!(schema.sql("SELECT status FROM runs WHERE run_id = 't'"), "waiting_approval");
    schema.sql("ALTER TABLE receipts_away RENAME TO receipts");
    sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "closed once");

    schema.sql("ALTER TABLE receipts RENAME TO receipts_away");
    for command in [["verify", RUN], ["show", RUN]] {
        let output = sandbox.planrun().args(command).args(store).run();
        assert_eq!(output.code, 2, "{command:?} {}", output.snapshot());
        assert!(!output.stderr.contains("failed verification"), "{command:?}: {}", output.stderr);
        assert!(output.stderr.contains("receipts"), "{command:?}: {}", output.stderr);
    }
    schema.sql("ALTER TABLE receipts_away RENAME TO receipts");
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_bridge_and_agent_runs_in_postgres() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("serve", &sandbox) else { return };
    let server = Server::start_in(sandbox, &[("PLANRUN_STORE", schema.url.as_str())]);
    let client = client();
    let (status, body) =
        post(&client, &server.url("/runs"), json!({"goal": "test flow pwd to file", "adapter": "agent"})).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!((body["run_id"].as_str(), body["status"].as_str()), (Some("br-0001"), Some("done")), "{body}");
    let (status, read) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["status"], "done");
    assert!(!server.exists("runs") && !server.exists("bridge"), "nothing in the file layout");
    let kinds = schema.sql("SELECT string_agg(kind || ':' || run_id || ':' || status, ' ' ORDER BY kind) FROM runs");
    assert_eq!(kinds, "agent:agent-br-0001:done bridge:br-0001:done");
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE owner_id IS NOT NULL"), "0", "leases given back");
}

#[test]
fn a_crashed_holder_keeps_the_run_until_its_lease_expires_then_recovery_closes_nothing_twice() {
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("crash", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let lease = ("PLANRUN_LEASE_SECS", "1");
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
    let crashed = resume_killed_at(&sandbox, &schema, "close:after_effect", lease.1);
    assert_eq!(crashed.code, -1, "killed by the hook: {}", crashed.snapshot());
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "the close happened before the crash");
    assert_eq!(schema.sql("SELECT status FROM receipts"), "done", "its receipt committed before the crash");
    assert_eq!(schema.sql("SELECT status FROM runs WHERE run_id = 't'"), "waiting_approval", "no checkpoint after it");
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE owner_id IS NOT NULL"), "1", "the dead holder's lease");

    // Wait for the dead holder's lease to expire (database time), then recover.
    lease_expired(&schema, "t");
    let token_before: u64 = schema.sql("SELECT lease_version FROM runs WHERE run_id = 't'").parse().expect("token");
    sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME_AGAIN).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "recovery must not close again");
    let token_after: u64 = schema.sql("SELECT lease_version FROM runs WHERE run_id = 't'").parse().expect("token");
    assert!(token_after > token_before, "the take-over is a new fencing token: {token_before} -> {token_after}");
    let state = sandbox.planrun().args(["show", RUN, "--json"]).args(store).expect_code(0).run();
    let state: serde_json::Value = serde_json::from_str(&state.stdout).expect("JSON");
    assert_eq!(state["status"], "done");
    assert_eq!(state["evidence"][0]["kind"], "recovered_from_receipt");
    let monotonic = "SELECT bool_and(lease_version >= previous) FROM (SELECT lease_version, \
         lag(lease_version) OVER (ORDER BY seq) AS previous FROM audit_events WHERE run_id = 't') AS chain \
         WHERE previous IS NOT NULL";
    assert_eq!(schema.sql(monotonic), "t", "the lease version never goes down along the audit");
}

#[test]
fn a_worker_takes_up_approved_and_abandoned_runs_and_leaves_held_ones_alone() {
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("worker", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let worker = || sandbox.planrun().args(["worker", "--once"]).args(store).expect_code(0).run();
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
    let idle = worker();
    assert!(idle.stdout.contains("0 run(s) taken up"), "waiting without an approval: {}", idle.stdout);
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();

    // A holder that died mid-run with a 30-second lease: the run is not
    // taken up while the lease lasts.
    let crashed = resume_killed_at(&sandbox, &schema, "close:after_effect", "30");
    assert_eq!(crashed.code, -1, "{}", crashed.snapshot());
    let held = worker();
    assert!(held.stdout.contains("0 run(s) taken up"), "a held run is left alone: {}", held.stdout);
    assert_eq!(schema.sql("SELECT status FROM runs WHERE run_id = 't'"), "waiting_approval");

    // Its lease expires (as after 30 s): the worker takes the run over.
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = 't'");
    let took = sandbox.planrun().args(["worker", "--once"]).args(store).clock(T_RESUME_AGAIN).expect_code(0).run();
    assert!(took.stdout.contains("run t · done (exit 0)"), "{}", took.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "the close is recovered from its receipt, never repeated");
    assert_eq!(schema.sql("SELECT status || ' ' || (owner_id IS NULL) FROM runs WHERE run_id = 't'"), "done true");
    let after = worker();
    assert!(after.stdout.contains("0 run(s) taken up"), "a done run is not taken up: {}", after.stdout);

    let file = sandbox.planrun().args(["worker", "--once"]).expect_code(2).run();
    assert!(file.stderr.contains("needs a database store"), "{}", file.stderr);
}

/// On PostgreSQL too, a controller run cut off mid-loop (`serve` aborts
/// inside its first bridge run's agent run) is ended by the next node's
/// scan once its lease is gone: `failed`, `interrupted`; its bridge run is
/// settled too; nothing is decided again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_run_cut_off_mid_loop_is_ended_by_the_next_node() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("controller cut off", &sandbox) else { return };
    let store = ("PLANRUN_STORE", schema.url.as_str());
    let server = Server::start_in(sandbox, &[store, ("PLANRUN_CRASH_AT", "step-2:after_effect")]);
    let sandbox = server.aborted_during("/controller/runs", &json!({"goal": "test flow pwd to file"})).await;
    assert_eq!(schema.sql("SELECT status FROM runs WHERE kind = 'controller'"), "running");
    // The dead node's leases, expired (as they would be after PLANRUN_LEASE_SECS).
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE owner_id IS NOT NULL");
    let restarted = Server::start_in(sandbox, &[store]);
    let state = restarted.settled("/controller/runs/ctrl-0001", "running").await;
    assert_eq!(
        (state["status"].as_str(), state["stop_reason"].as_str()),
        (Some("failed"), Some("interrupted")),
        "{state}"
    );
    assert_eq!(state["linked_runs"][0]["bridge_run_id"], "bri-ctrl-0001-i0", "{state}");
    // Its bridge run is settled on its own, with its agent run's result:
    // this node's worker takes the agent run over and finishes it, and the
    // scan waits for that rather than ending the bridge run `failed`.
    let bridge = restarted.settled("/runs/bri-ctrl-0001-i0", "running").await;
    assert_eq!(bridge["status"], "done", "{bridge}");
    let decisions = "SELECT count(*) FROM audit_events WHERE kind = 'controller' AND line LIKE '%\"decision_made\"%'";
    assert_eq!(schema.sql(decisions), "1", "decided once");
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE owner_id IS NOT NULL"), "0", "every lease given back");
}

#[test]
fn a_worker_names_its_node_in_the_leases_it_holds() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("node id", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let crash = ("PLANRUN_CRASH_AT", "step-2:after_effect");
    let first = sandbox
        .planrun()
        .args(["--plan", "plans/flow_pwd.toml", "--run-id", "n"])
        .args(store)
        .env(crash.0, crash.1)
        .run();
    assert_eq!(first.code, -1, "{}", first.snapshot());
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second'");
    // The worker dies inside the run too: its lease is left, named by its node.
    let worker = sandbox
        .planrun()
        .args(["worker", "--once", "--node-id", "node-a"])
        .args(store)
        .env("PLANRUN_CRASH_AT", "step-3:after_effect")
        .run();
    assert_eq!(worker.code, -1, "{}", worker.snapshot());
    assert_eq!(schema.sql("SELECT owner_id LIKE 'node-a:%' FROM runs WHERE run_id = 'n'"), "t");
    let bad = sandbox.planrun().args(["worker", "--once", "--node-id", "a b"]).args(store).expect_code(2).run();
    assert!(bad.stderr.contains("node id"), "{}", bad.stderr);
}

#[test]
fn concurrent_worker_loops_drive_every_abandoned_run_exactly_once() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("concurrency", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let ids = ["w1", "w2", "w3", "w4", "w5", "w6"];
    for id in ids {
        let crashed = sandbox
            .planrun()
            .args(["--plan", "plans/flow_pwd.toml", "--run-id", id])
            .args(store)
            .env("PLANRUN_CRASH_AT", "step-2:after_effect")
            .run();
        assert_eq!(crashed.code, -1, "{id}: {}", crashed.snapshot());
    }
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE status = 'running' AND owner_id IS NOT NULL"), "6");
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second'");
    let worked = sandbox.planrun().args(["worker", "--once", "--concurrency", "3"]).args(store).expect_code(0).run();
    for id in ids {
        let lines = worked.stdout.lines().filter(|line| line.contains(&format!("run {id} ·"))).count();
        assert_eq!(lines, 1, "{id} taken up exactly once: {}", worked.stdout);
    }
    assert!(worked.stdout.contains("6 run(s) taken up"), "{}", worked.stdout);
    assert_eq!(
        schema.sql("SELECT string_agg(DISTINCT status || ' ' || (owner_id IS NULL), ',') FROM runs"),
        "done true",
        "every run done, its lease given back"
    );
    // Driven once each: one `run_resumed` per run in its verified log (a
    // loop that claims a run another loop finished writes nothing).
    let resumed = "SELECT string_agg(DISTINCT n::text, ',') FROM (SELECT count(*) AS n FROM audit_events \
         WHERE line::jsonb ->> 'event_type' = 'run_resumed' GROUP BY run_id) AS per_run";
    assert_eq!(schema.sql(resumed), "1");
    assert_eq!(schema.sql("SELECT count(DISTINCT run_id) FROM audit_events WHERE line LIKE '%run_resumed%'"), "6");
    for id in ids {
        sandbox.planrun().args(["verify", id]).args(store).expect_code(0).run();
    }
}

#[test]
fn hmac_seals_hold_in_the_database_and_are_refused_without_the_key() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("hmac", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    let key = ("PLANRUN_HMAC_KEY", "a-key-for-the-test");
    sandbox
        .planrun()
        .args(["--plan", "plans/flow_pwd.toml", "--run-id", "k"])
        .args(store)
        .env(key.0, key.1)
        .expect_code(0)
        .run();
    let keyed = sandbox.planrun().args(["verify", "k"]).args(store).env(key.0, key.1).expect_code(0).run();
    assert!(keyed.stdout.contains("HMAC-SHA256"), "{}", keyed.stdout);
    assert!(schema.sql("SELECT state FROM runs WHERE run_id = 'k'").contains("hmac_sha256"));
    let unkeyed = sandbox.planrun().args(["verify", "k"]).args(store).expect_code(2).run();
    assert!(unkeyed.stderr.contains("PLANRUN_HMAC_KEY"), "{}", unkeyed.stderr);
    let wrong = sandbox.planrun().args(["verify", "k"]).args(store).env(key.0, "another key").expect_code(2).run();
    assert!(wrong.stderr.contains("failed verification"), "{}", wrong.stderr);
    assert_eq!(schema.sql("SELECT claims FROM runs WHERE run_id = 'k'"), "0", "a checkpoint is progress");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_survives_its_database_sessions_being_terminated() {
    let sandbox = Sandbox::new();
    let Some(schema) = Schema::migrated("terminated sessions", &sandbox) else { return };
    let name = format!("planrun-{}", schema.name);
    let url = format!("{}&application_name={name}", schema.url);
    let server = Server::start_in(sandbox, &[("PLANRUN_STORE", url.as_str())]);
    let client = client();
    let goal = json!({"goal": "test flow pwd to file", "adapter": "agent"});
    let (status, body) = post(&client, &server.url("/runs"), goal.clone()).await;
    assert_eq!((status, body["status"].as_str()), (201, Some("done")), "{body}");
    let killed = schema.sql(&format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{name}'"
    ));
    assert_ne!(killed, "0", "the service's sessions were open");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (status, body) = post(&client, &server.url("/runs"), goal).await;
    assert_eq!((status, body["status"].as_str()), (201, Some("done")), "a new session is opened: {body}");
    let (status, first) = get_json(&client, &server.url("/runs/br-0001")).await;
    assert_eq!((status, first["status"].as_str()), (200, Some("done")), "{first}");
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE status = 'done'"), "4", "two bridge and two agent runs");
}

/// Polls `sql` until it answers `want` (10 s at most); the last answer.
pub fn wait_for(schema: &Schema, sql: &str, want: &str) -> String {
    let mut answer = schema.sql(sql);
    for _ in 0..100 {
        if answer == want {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        answer = schema.sql(sql);
    }
    answer
}

#[test]
fn serve_works_approved_runs_unless_no_worker() {
    for no_worker in [false, true] {
        let sandbox = ticket_sandbox("open", 0);
        let Some(schema) = Schema::migrated("serve worker", &sandbox) else { return };
        let store = ["--store", schema.url.as_str()];
        let args: &[&str] = if no_worker { &["--no-worker"] } else { &[] };
        let mut server = Server::start_in_with(
            sandbox,
            &[("PLANRUN_STORE", schema.url.as_str()), ("PLANRUN_TEST_CLOCK", T_RESUME)],
            args,
        );
        let sandbox = &server.sandbox;
        sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
        sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
        let status = "SELECT status FROM runs WHERE kind = 'agent' AND run_id = 't'";
        if no_worker {
            std::thread::sleep(std::time::Duration::from_millis(2500));
            assert_eq!(schema.sql(status), "waiting_approval", "--no-worker: the service leaves the run alone");
            assert_eq!(close_count(sandbox, "ticket-7"), 0);
        } else {
            assert_eq!(wait_for(&schema, status, "done"), "done", "the service's worker resumed the approved run");
            assert_eq!(close_count(sandbox, "ticket-7"), 1);
        }
        assert!(server.terminate().success(), "a clean shutdown stops the service's worker too");
    }
}

#[test]
fn a_waiting_worker_is_woken_by_notify_long_before_it_would_poll() {
    let sandbox = ticket_sandbox("open", 0);
    let Some(schema) = Schema::migrated("notify", &sandbox) else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
    let name = format!("planrun-{}", schema.name);
    let worker_url = format!("{}&application_name={name}", schema.url);
    // A worker that would poll again only after ten minutes.
    let mut worker = Command::new(env!("CARGO_BIN_EXE_planrun"))
        .current_dir(crate::common::ROOT)
        .args(["worker", "--poll-ms", "600000", "--store", &worker_url, "--workspace"])
        .arg(sandbox.workspace())
        .env("PLANRUN_TEST_CLOCK", T_RESUME)
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the worker");
    let listening = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}' AND query = 'LISTEN planrun_runnable'"
    );
    assert_eq!(wait_for(&schema, &listening, "1"), "1", "the worker listens");
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
    let status = "SELECT status FROM runs WHERE run_id = 't'";
    let done = wait_for(&schema, status, "done");
    let _ = worker.kill();
    let _ = worker.wait();
    assert_eq!(done, "done", "woken by the approval's release, not by its ten-minute poll");
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
}
