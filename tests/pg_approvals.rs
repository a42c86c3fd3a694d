//! Approvals across nodes on the PostgreSQL store, with real processes:
//! two `planrun serve` nodes on one workspace and store (a run paused on
//! node A is approved on node B and both nodes read it back the same;
//! concurrent approvals on both nodes: exactly one wins), the CLI approving
//! on one machine and `worker --once` resuming on "another", and approvals
//! refused when expired in database time, used already, or when their row
//! disagrees with the log; a use whose holder died before the step's
//! checkpoint is taken over by the next lease only (the close not repeated). Each decision is a row of `approvals` written
//! with its checkpoint; the step that uses an approval consumes its row
//! once. Skipped without `PLANRUN_TEST_PG`, as `pg_store`.

use serde_json::{Value, json};

use crate::common::Sandbox;
use crate::common::tickets::{PLAN, RUN, T_APPROVE, T_RESUME, T_RUN, close_count, ticket_sandbox};
use crate::pg_store::{Schema, resume_killed_at};
use crate::serve_harness::{self, Server, client, get_json, post};

const GOAL: &str = "close ticket";
const AGENT_RUN: &str = "agent-br-0001";

/// `approval_granted` / `approval_verified` events of `run_id` in the log.
fn events(schema: &Schema, run_id: &str, event_type: &str) -> String {
    schema.sql(&format!(
        "SELECT count(*) FROM audit_events WHERE run_id = '{run_id}' AND line::jsonb ->> 'event_type' = '{event_type}'"
    ))
}

/// The rows of `approvals` as `decision consumed`, oldest first.
fn approval_rows(schema: &Schema) -> String {
    schema.sql(
        "SELECT coalesce(string_agg(decision || ' ' || (consumed_at IS NOT NULL), ',' ORDER BY approval_id), '') \
         FROM approvals",
    )
}

/// Checks that the one consumed row names the lease that used it and the
/// seq of its `approval_verified` event in the log.
fn assert_consumed_by_its_step(schema: &Schema, run_id: &str) {
    let consumed = schema.sql(&format!(
        "SELECT a.consumed_seq = e.seq AND a.consumed_lease = e.lease_version FROM approvals AS a \
         JOIN audit_events AS e ON e.run_id = a.run_id AND e.line::jsonb ->> 'event_type' = 'approval_verified' \
         WHERE a.run_id = '{run_id}' AND a.consumed_at IS NOT NULL"
    ));
    assert_eq!(consumed, "t", "consumed at its `approval_verified`, by the lease that wrote it");
}

/// The ticket demo's run `t` paused at its approval gate, on a fresh
/// schema (`None`: skipped).
fn paused(test: &str) -> Option<(Sandbox, Schema)> {
    let sandbox = ticket_sandbox("open", 0);
    let schema = Schema::migrated(test, &sandbox)?;
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).args(store).clock(T_RUN).expect_code(3).run();
    Some((sandbox, schema))
}

/// Two nodes on one workspace and store, each with its own worker.
fn two_nodes(test: &str) -> Option<(Schema, Server, serve_harness::Node)> {
    let sandbox = ticket_sandbox("open", 0);
    let schema = Schema::migrated(test, &sandbox)?;
    let store = [("PLANRUN_STORE", schema.url.as_str())];
    let node_a = Server::start_in(sandbox, &store);
    let node_b = node_a.another_node(&store, &[]);
    Some((schema, node_a, node_b))
}

async fn start_waiting(client: &reqwest::Client, node: &Server) -> Value {
    let (status, body) = post(client, &node.url("/runs"), json!({"goal": GOAL, "adapter": "agent"})).await;
    assert_eq!((status, body["status"].as_str()), (201, Some("waiting_approval")), "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_paused_on_node_a_is_approved_on_node_b_and_both_nodes_agree() {
    let Some((schema, node_a, node_b)) = two_nodes("approve across nodes") else { return };
    let client = client();
    let waiting = start_waiting(&client, &node_a).await;
    let (status, seen) = get_json(&client, &node_b.url("/runs/br-0001")).await;
    assert_eq!((status, &seen), (200, &waiting), "node B reads the run node A paused");
    assert_eq!(approval_rows(&schema), "", "no decision yet");

    let fingerprint = waiting["pending_action"]["fingerprint"].clone();
    let body = json!({"fingerprint": fingerprint, "approved_by": "ops"});
    let (status, done) = post(&client, &node_b.url("/runs/br-0001/approve"), body).await;
    assert_eq!((status, done["status"].as_str()), (200, Some("done")), "{done}");
    assert_eq!(close_count(&node_a.sandbox, "ticket-7"), 1, "closed exactly once");
    for node in [node_a.url("/runs/br-0001"), node_b.url("/runs/br-0001")] {
        let (status, read) = get_json(&client, &node).await;
        assert_eq!((status, &read), (200, &done), "{node}");
    }
    assert_eq!(approval_rows(&schema), "approved true", "one decision, used once");
    assert_eq!(schema.sql("SELECT decided_by FROM approvals"), "ops");
    assert_consumed_by_its_step(&schema, AGENT_RUN);
    assert_eq!(schema.sql("SELECT count(*) FROM runs WHERE owner_id IS NOT NULL"), "0", "every lease given back");
    node_a.sandbox.planrun().args(["verify", AGENT_RUN, "--store", &schema.url]).expect_code(0).run();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_approvals_on_both_nodes_one_wins_and_the_action_runs_once() {
    let Some((schema, node_a, node_b)) = two_nodes("concurrent approvals") else { return };
    let client = client();
    let waiting = start_waiting(&client, &node_a).await;
    let body = json!({"fingerprint": waiting["pending_action"]["fingerprint"]});
    let urls: Vec<String> = (0..8)
        .map(|n| if n % 2 == 0 { node_a.url("/runs/br-0001/approve") } else { node_b.url("/runs/br-0001/approve") })
        .collect();
    // Sent at once: each request on its own task.
    let tasks: Vec<_> = urls
        .into_iter()
        .map(|url| {
            let (client, body) = (client.clone(), body.clone());
            tokio::spawn(async move { post(&client, &url, body).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.expect("request task"));
    }
    let won: Vec<&(u16, Value)> = answers.iter().filter(|(status, _)| *status == 200).collect();
    assert_eq!(won.len(), 1, "exactly one approval wins: {answers:?}");
    assert_eq!(won[0].1["status"], "done", "{answers:?}");
    for (status, answer) in answers.iter().filter(|(status, _)| *status != 200) {
        let code = answer["error"]["code"].as_str().unwrap_or_default();
        assert_eq!(*status, 409, "{answer}");
        assert!(["run_locked", "run_not_waiting"].contains(&code), "the documented conflict: {answer}");
    }
    assert_eq!(close_count(&node_a.sandbox, "ticket-7"), 1, "the action ran once");
    assert_eq!(events(&schema, AGENT_RUN, "approval_granted"), "1", "one approval in the log");
    assert_eq!(events(&schema, AGENT_RUN, "approval_verified"), "1");
    assert_eq!(approval_rows(&schema), "approved true", "one row, consumed");
    assert_consumed_by_its_step(&schema, AGENT_RUN);
    let (_, from_a) = get_json(&client, &node_a.url("/runs/br-0001")).await;
    let (_, from_b) = get_json(&client, &node_b.url("/runs/br-0001")).await;
    assert_eq!(from_a, from_b, "both nodes agree");
    assert_eq!(from_a["status"], "done");
}

#[test]
fn approved_with_the_cli_on_one_machine_and_resumed_by_a_worker_on_another() {
    let Some((sandbox, schema)) = paused("cli and worker") else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["approve", RUN, "--by", "ops"]).args(store).clock(T_APPROVE).expect_code(0).run();
    assert_eq!(
        schema.sql("SELECT decision || ' ' || decided_by || ' ' || (consumed_at IS NULL) FROM approvals"),
        "approved ops true"
    );
    assert_eq!(
        schema.sql("SELECT expires_at > now() + interval '59 minutes' FROM approvals"),
        "t",
        "the expiry is the database's now plus the approval's hour"
    );
    let worked = sandbox
        .planrun()
        .args(["worker", "--once", "--node-id", "node-b"])
        .args(store)
        .clock(T_RESUME)
        .expect_code(0)
        .run();
    assert!(worked.stdout.contains("run t · done (exit 0)"), "{}", worked.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(approval_rows(&schema), "approved true");
    assert_consumed_by_its_step(&schema, RUN);
    assert_eq!(
        schema.sql("SELECT e.line::jsonb ->> 'event_type' FROM approvals AS a JOIN audit_events AS e ON e.seq = a.consumed_seq AND e.run_id = a.run_id"),
        "approval_verified"
    );
    let again = sandbox.planrun().args(["worker", "--once"]).args(store).expect_code(0).run();
    assert!(again.stdout.contains("0 run(s) taken up"), "a used approval is not used again: {}", again.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
}

#[test]
fn an_approval_expired_in_database_time_is_refused_and_nothing_runs() {
    let Some((sandbox, schema)) = paused("expired approval") else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
    // Its hour has passed on the database's clock (the run's own clock,
    // the test clock, says it is still valid).
    schema.sql("UPDATE approvals SET expires_at = now() - interval '1 second'");
    let log = "SELECT count(*) || ' ' || max(seq) FROM audit_events WHERE run_id = 't'";
    let (before, version) = (schema.sql(log), schema.sql("SELECT state_version FROM runs WHERE run_id = 't'"));
    let refused = sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(1).run();
    assert!(refused.stderr.contains("approval_invalid"), "{}", refused.stderr);
    assert!(refused.stderr.contains("(database time); approve again"), "{}", refused.stderr);
    let worker = sandbox.planrun().args(["worker", "--once"]).args(store).clock(T_RESUME).expect_code(0).run();
    assert!(worker.stdout.contains("approval_invalid"), "the worker is refused too: {}", worker.stdout);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0, "nothing ran");
    assert_eq!(schema.sql(log), before, "nothing written");
    assert_eq!(schema.sql("SELECT state_version FROM runs WHERE run_id = 't'"), version);
    assert_eq!(approval_rows(&schema), "approved false", "not used");

    // Approved again: the live row is renewed, then used once.
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
    assert_eq!(approval_rows(&schema), "approved false", "renewed in place");
    sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);
    assert_eq!(approval_rows(&schema), "approved true");
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
}

#[test]
fn an_approval_row_that_disagrees_with_the_log_is_refused_as_tampered() {
    let Some((sandbox, schema)) = paused("mismatched approval") else { return };
    let store = ["--store", schema.url.as_str()];
    let wrong = sandbox
        .planrun()
        .args(["approve", RUN, "--fingerprint", &"0".repeat(64)])
        .args(store)
        .clock(T_APPROVE)
        .expect_code(1)
        .run();
    assert!(wrong.stderr.contains("approval_invalid"), "{}", wrong.stderr);
    assert_eq!(approval_rows(&schema), "", "a refused approval writes no row");
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();

    let refused = |what: &str| {
        for command in [vec!["verify", RUN], vec!["resume", RUN]] {
            let output = sandbox.planrun().args(&command).args(store).clock(T_RESUME).run();
            assert_eq!(output.code, 2, "{what}: {command:?} {}", output.snapshot());
            assert!(output.stderr.contains("failed verification"), "{what}: {}", output.stderr);
            assert!(output.stderr.contains("`approvals` table"), "{what}: {}", output.stderr);
        }
        assert_eq!(close_count(&sandbox, "ticket-7"), 0, "{what}: nothing ran");
    };
    let fingerprint = schema.sql("SELECT fingerprint FROM approvals");
    let restore = format!("fingerprint = '{fingerprint}'");
    for (edit, undo) in [
        ("fingerprint = repeat('0', 64)", restore.as_str()),
        ("state_version = state_version + 1", "state_version = state_version - 1"),
        ("decided_by = 'mallory'", "decided_by = NULL"),
    ] {
        schema.sql(&format!("UPDATE approvals SET {edit}"));
        refused(edit);
        schema.sql(&format!("UPDATE approvals SET {undo}"));
        sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
    }
    let row = schema.sql("SELECT step_id || ',' || fingerprint || ',' || state_version || ',' || scope FROM approvals");
    schema.sql("DELETE FROM approvals");
    refused("row deleted");
    let [step, fingerprint, version, scope] = row.split(',').collect::<Vec<_>>()[..] else { panic!("{row}") };
    schema.sql(&format!(
        "INSERT INTO approvals (run_id, step_id, fingerprint, state_version, scope, decision, expires_at) \
         VALUES ('t', '{step}', '{fingerprint}', {version}, '{scope}', 'approved', now() + interval '1 hour')"
    ));
    sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1);

    // A use the log records and the table lost.
    schema.sql("UPDATE approvals SET consumed_at = NULL, consumed_lease = NULL, consumed_seq = NULL");
    let verify = sandbox.planrun().args(["verify", RUN]).args(store).expect_code(2).run();
    assert!(verify.stderr.contains("records the use of the approval"), "{}", verify.stderr);
}

#[test]
fn a_rejection_is_a_row_the_log_vouches_for() {
    let Some((sandbox, schema)) = paused("rejection") else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox
        .planrun()
        .args(["reject", RUN, "--reason", "refund first"])
        .args(store)
        .clock(T_APPROVE)
        .expect_code(0)
        .run();
    assert_eq!(schema.sql("SELECT decision || ' ' || reason FROM approvals"), "rejected refund first");
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
    schema.sql("UPDATE approvals SET reason = 'fine by me'");
    let verify = sandbox.planrun().args(["verify", RUN]).args(store).expect_code(2).run();
    assert!(verify.stderr.contains("`approvals` table"), "{}", verify.stderr);
    assert_eq!(close_count(&sandbox, "ticket-7"), 0);
}

#[test]
fn a_use_whose_holder_died_before_its_checkpoint_is_taken_over_by_the_next_lease_only() {
    let Some((sandbox, schema)) = paused("use taken over") else { return };
    let store = ["--store", schema.url.as_str()];
    sandbox.planrun().args(["approve", RUN]).args(store).clock(T_APPROVE).expect_code(0).run();
    let crashed = resume_killed_at(&sandbox, &schema, "close:after_effect", "30");
    assert_eq!(crashed.code, -1, "killed by the hook: {}", crashed.snapshot());
    let dead = schema.sql("SELECT lease_version FROM runs WHERE run_id = 't'");
    let head = schema.sql("SELECT max(seq) FROM audit_events WHERE run_id = 't'");
    let use_of = "SELECT consumed_lease || ' ' || (consumed_seq > (SELECT max(seq) FROM audit_events WHERE run_id = 't')) \
         FROM approvals";
    assert_eq!(schema.sql(use_of), format!("{dead} true"), "used by the dead holder, past the log's head {head}");
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();

    // While the dead holder's lease lasts nobody takes the run; then the
    // next lease takes the use over and the close is not repeated.
    let held = sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(1).run();
    assert!(held.stderr.contains("in use"), "{}", held.stderr);
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = 't'");
    sandbox.planrun().args(["resume", RUN]).args(store).clock(T_RESUME).expect_code(0).run();
    assert_eq!(close_count(&sandbox, "ticket-7"), 1, "recovered from its receipt, not closed again");
    let token: u64 = schema.sql("SELECT lease_version FROM runs WHERE run_id = 't'").parse().expect("token");
    assert!(token > dead.parse::<u64>().expect("token"), "a newer lease");
    assert_eq!(approval_rows(&schema), "approved true", "still one row, used once");
    assert_consumed_by_its_step(&schema, RUN);
    sandbox.planrun().args(["verify", RUN]).args(store).expect_code(0).run();
}
