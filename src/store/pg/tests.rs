//! The PostgreSQL store's own tests, beside the shared conformance suite
//! (`store/conformance.rs`): migrations and the refusals of an unusable
//! schema, the append-only triggers, fencing by the lease, approvals used
//! once by the current lease (never a stale one, never expired), the
//! checkpoints after reads (kept in the handle and sent together, made
//! durable before an effect or refused when a restart lost them), and calls from inside a
//! tokio runtime. Skipped without `PLANRUN_TEST_PG` (see
//! `test_db.rs`).

use crate::store::pg::error::PgError;
use crate::store::pg::migrate::latest_version;
use crate::store::pg::test_db::{TestSchema, psql};
use crate::store::pg::{PgOptions, PgStores};
use crate::store::{ApprovalDecision, ApprovalUse, NewEvent, RunStore, Sealer, StoreError, Verdict};

fn options() -> PgOptions {
    PgOptions { lease_secs: 30, max_claims: 5, owner_id: "test:migrate".to_string() }
}

fn started(store: &dyn RunStore, run_id: &str) {
    crate::store::test_runs::started(store, run_id, "2026-01-01T00:00:00Z");
}

#[test]
fn migrate_is_idempotent_and_every_other_use_refuses_an_unusable_schema() {
    let Some((conninfo, location, _schema)) = TestSchema::unmigrated() else {
        // Skipped (or failed under PLANRUN_REQUIRE_PG=1) by the suite's set-up.
        assert!(TestSchema::create().is_none());
        return;
    };
    let refused = PgStores::connect(&location, options()).expect_err("an unmigrated schema is refused");
    assert!(matches!(&refused, PgError::Schema { .. }), "{refused}");
    assert!(refused.to_string().contains("planrun store migrate"), "{refused}");
    assert_eq!(psql(&conninfo, "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"), Ok("0".into()));

    let first = PgStores::migrate(&location, options()).expect("migrate");
    assert_eq!((first.applied.clone(), first.version), (vec![1, 2, 3, 4], latest_version()));
    let second = PgStores::migrate(&location, options()).expect("migrate again");
    assert!(second.applied.is_empty(), "nothing applied the second time");
    let recorded = psql(
        &conninfo,
        "SELECT string_agg(version || ' ' || length(sha256), ',' ORDER BY version) FROM schema_migrations",
    )
    .expect("rows");
    assert_eq!(recorded, "1 64,2 64,3 64,4 64");
    PgStores::connect(&location, options()).expect("a migrated schema is used");

    psql(&conninfo, "INSERT INTO schema_migrations (version, sha256) VALUES (99, 'x')").expect("a newer planrun");
    let newer = PgStores::connect(&location, options()).expect_err("a newer schema is refused");
    assert!(newer.to_string().contains("newer than this planrun"), "{newer}");
    assert!(PgStores::migrate(&location, options()).is_err(), "and not migrated over");
    psql(&conninfo, "DELETE FROM schema_migrations").expect("a schema that lost its versions");
    let partly = PgStores::connect(&location, options()).expect_err("refused");
    assert!(partly.to_string().contains("planrun store migrate"), "{partly}");
}

#[test]
fn the_audit_and_history_tables_refuse_updates_and_deletes() {
    let Some(schema) = TestSchema::create() else { return };
    let store = schema.store(&Sealer::plain());
    drop(crate::store::test_runs::one_step_checkpointed(&store));
    for sql in [
        "UPDATE audit_events SET line = line",
        "DELETE FROM audit_events",
        "DELETE FROM history",
        "UPDATE runs SET state = NULL, state_version = 0; DELETE FROM audit_events",
    ] {
        let refused = schema.sql(sql).expect_err(sql);
        assert!(refused.contains("append-only"), "{sql}: {refused}");
    }
    assert_eq!(schema.sql("SELECT count(*) FROM audit_events"), Ok("3".into()));
    assert_eq!(schema.sql("SELECT count(*) FROM history"), Ok("1".into()));
    assert!(store.read_run("r1").is_ok(), "intact");
}

#[test]
fn a_holder_whose_lease_was_taken_over_writes_nothing() {
    let Some(schema) = TestSchema::create() else { return };
    let first = schema.store(&Sealer::plain());
    started(&first, "r1");
    let (mut stale, loaded) = first.open_run("r1").expect("open");
    let other = schema.process("test:other", 30).store_named("test-workspace", &Sealer::plain());
    assert!(matches!(other.open_run("r1"), Err(StoreError::Locked { .. })), "held");
    // The holder froze past its lease (SIGSTOP, a pause): it expires.
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = 'r1'").expect("expire");
    let (_current, _) = other.open_run("r1").expect("an expired lease is taken over");
    let token = schema.sql("SELECT lease_version FROM runs WHERE run_id = 'r1'").expect("token");
    assert_eq!(token, "3", "create, open, take-over: one more each time");

    let next = saved(&mut stale, &loaded.state, 2);
    let refused = stale.checkpoint(&next, 1);
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
    assert_eq!(schema.sql("SELECT count(*) FROM audit_events"), Ok("2".into()), "no event written");
    assert_eq!(first.read_run("r1").expect("read").state.state_version, 1, "no checkpoint written");
}

#[test]
fn the_store_is_usable_from_inside_a_tokio_runtime() {
    let Some(schema) = TestSchema::create() else { return };
    let store = schema.store(&Sealer::plain());
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let listed = runtime.block_on(async {
        started(&store, "r1");
        let (run, _) = store.open_run("r1").expect("open");
        drop(run);
        store.list_runs().expect("list").len()
    });
    assert_eq!(listed, 1);
    let current = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    current.block_on(async { assert!(store.read_run("r1").is_ok()) });
}

#[test]
fn the_heartbeat_keeps_a_held_lease_alive_past_its_length() {
    let Some(schema) = TestSchema::create() else { return };
    let holder = schema.process("test:holder", 1).store_named("test-workspace", &Sealer::plain());
    let other = schema.process("test:other", 1).store_named("test-workspace", &Sealer::plain());
    started(&holder, "r1");
    let (mut run, loaded) = holder.open_run("r1").expect("open");
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(matches!(other.open_run("r1"), Err(StoreError::Locked { .. })), "still held after 2.5 one-second leases");
    let mut next = loaded.state.clone();
    next.state_version = 2;
    // As every checkpoint, it follows its `state_saved` event.
    run.append_event(crate::store::test_runs::event("state_saved")).expect("the holder still appends");
    next.audit_seq = run.audit_seq();
    run.checkpoint(&next, 1).expect("the holder still writes");
    drop(run);
    assert!(other.open_run("r1").is_ok(), "given back when dropped");
}

#[test]
fn a_holder_whose_lease_is_gone_stops_holding_and_writes_nothing_more() {
    let Some(schema) = TestSchema::create() else { return };
    let holder = schema.process("test:holder", 1).store_named("test-workspace", &Sealer::plain());
    started(&holder, "r1");
    let (mut run, loaded) = holder.open_run("r1").expect("open");
    let fence = run.fence();
    assert!(fence.holds() && fence.is_bounded(), "a lease is a bounded fence");
    // Taken over behind its back: the next heartbeat finds no row of its own.
    schema
        .sql("UPDATE runs SET owner_id = 'test:thief', lease_version = lease_version + 1 WHERE run_id = 'r1'")
        .expect("steal");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while fence.holds() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!fence.holds(), "the heartbeat found the lease gone");
    run.append_event(crate::store::test_runs::event("state_saved")).expect("buffered");
    let mut next = loaded.state.clone();
    next.state_version = 2;
    next.audit_seq = run.audit_seq();
    let refused = run.checkpoint(&next, 1);
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
    drop(run);
    assert_eq!(
        schema.sql("SELECT owner_id || ' ' || state_version FROM runs WHERE run_id = 'r1'"),
        Ok("test:thief 1".into()),
        "no checkpoint, and no release over the new holder"
    );
}

#[test]
fn takeovers_of_expired_leases_are_counted_until_a_checkpoint_and_past_max_claims_exhausted() {
    let Some(schema) = TestSchema::create() else { return };
    let store = schema.process("test:holder", 30).store_named("test-workspace", &Sealer::plain());
    started(&store, "r1");
    // A lease given back is not a takeover.
    let (run, _) = store.open_run("r1").expect("open");
    assert!(run.claims_exhausted().is_none());
    run.release().expect("release");
    let mut held = Vec::new();
    for claims in 0..=6_u64 {
        let (run, _) = store.open_run("r1").expect("claim");
        assert_eq!(schema.sql("SELECT claims FROM runs WHERE run_id = 'r1'"), Ok(claims.to_string()));
        let exhausted = (claims > 5).then_some(crate::store::ClaimsExhausted { claims, max_claims: 5 });
        assert_eq!(run.claims_exhausted(), exhausted, "after {claims} takeover(s)");
        // Its holder dies: the handle is never released, the lease expires.
        held.push(run);
        schema
            .sql("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = 'r1'")
            .expect("expire");
    }
    // A checkpoint is progress: the count starts again.
    let (mut run, loaded) = store.open_run("r1").expect("claim");
    assert_eq!(schema.sql("SELECT claims FROM runs WHERE run_id = 'r1'"), Ok("7".into()));
    run.append_event(crate::store::test_runs::event("state_saved")).expect("buffered");
    let mut next = loaded.state.clone();
    next.state_version = 2;
    next.audit_seq = run.audit_seq();
    run.checkpoint(&next, 1).expect("the current holder writes");
    assert_eq!(schema.sql("SELECT claims FROM runs WHERE run_id = 'r1'"), Ok("0".into()));
    drop((held, run));
}

#[test]
fn a_receipt_is_not_written_over_a_run_another_owner_holds() {
    let Some(schema) = TestSchema::create() else { return };
    let stale = schema.process("test:stale", 30).store_named("test-workspace", &Sealer::plain());
    let current = schema.process("test:current", 30).store_named("test-workspace", &Sealer::plain());
    started(&stale, "r1");
    let mut receipt = crate::store::Receipt {
        key: "k".into(),
        intent_digest: "d".into(),
        state: crate::store::ReceiptState::Started,
        run_id: "r1".into(),
        step_id: "s".into(),
        action: serde_json::json!({}),
        result: None,
        started_at: "2026-01-01T00:00:00Z".into(),
        completed_at: None,
    };
    stale.put_receipt(&receipt).expect("nobody holds the run");
    let (_held, _) = current.open_run("r1").expect("claimed by the current owner");
    receipt.state = crate::store::ReceiptState::Done;
    receipt.result = Some(serde_json::json!({"output_text": "", "output_json": null}));
    current.put_receipt(&receipt).expect("the holder writes its receipt");
    let mut overwrite = receipt.clone();
    overwrite.state = crate::store::ReceiptState::Started;
    overwrite.result = None;
    let refused = stale.put_receipt(&overwrite);
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "{refused:?}");
    assert_eq!(schema.sql("SELECT status FROM receipts"), Ok("done".into()), "the holder's receipt stands");
}

/// Run `run_id` started, then an `approval_granted` of step `s` (frozen at
/// version 1) recorded with its checkpoint, valid `expires_in`.
fn approved(store: &dyn RunStore, run_id: &str, expires_in: std::time::Duration) {
    started(store, run_id);
    let (mut run, loaded) = store.open_run(run_id).expect("open");
    let next = decided(&mut run, &loaded.state, expires_in);
    run.checkpoint(&next, 1).expect("checkpoint");
}

/// The events and the held decision of an approval of step `s`; the
/// checkpoint (version 2) that records them.
fn decided(
    run: &mut Box<dyn crate::store::RunHandle>,
    state: &crate::store::RunState,
    expires_in: std::time::Duration,
) -> crate::store::RunState {
    let details = serde_json::json!({"fingerprint": "f", "scope": "x", "state_version": 1, "approved_by": null});
    let details = details.as_object().cloned().expect("an object");
    let event = NewEvent { step_id: Some("s"), details, ..crate::store::test_runs::event("approval_granted") };
    run.append_event(event).expect("event");
    let verdict = Verdict::Approved { expires_in };
    let decision = ApprovalDecision {
        step_id: "s".into(),
        fingerprint: "f".into(),
        state_version: 1,
        scope: "x".into(),
        decided_by: None,
        verdict,
    };
    run.record_decision(decision).expect("held for the checkpoint");
    saved(run, state, 2)
}

fn used() -> ApprovalUse {
    ApprovalUse { step_id: "s".into(), fingerprint: "f".into(), state_version: 1, scope: "x".into() }
}

/// The step's `approval_verified`, appended before it uses the approval.
fn verified(run: &mut Box<dyn crate::store::RunHandle>) {
    let details = serde_json::json!({"fingerprint": "f", "scope": "x", "state_version": 1});
    let details = details.as_object().cloned().expect("an object");
    let event = NewEvent { step_id: Some("s"), details, ..crate::store::test_runs::event("approval_verified") };
    run.append_event(event).expect("event");
}

#[test]
fn an_approval_is_consumed_once_by_the_current_lease_never_by_a_stale_one() {
    let Some(schema) = TestSchema::create() else { return };
    let first = schema.store(&Sealer::plain());
    approved(&first, "r1", std::time::Duration::from_secs(3600));
    assert_eq!(
        schema.sql("SELECT decision || ' ' || (consumed_at IS NULL) FROM approvals"),
        Ok("approved true".into())
    );
    let (mut stale, _) = first.open_run("r1").expect("open");
    schema.sql("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = 'r1'").expect("expire");
    let other = schema.process("test:other", 30).store_named("test-workspace", &Sealer::plain());
    let (mut current, _) = other.open_run("r1").expect("taken over");

    verified(&mut stale);
    let refused = stale.consume_approval(&used());
    assert!(matches!(refused, Err(StoreError::LeaseLost { .. })), "the stale holder uses nothing: {refused:?}");
    assert_eq!(schema.sql("SELECT count(*) FROM approvals WHERE consumed_at IS NOT NULL"), Ok("0".into()));
    verified(&mut current);
    current.consume_approval(&used()).expect("the current holder uses it");
    let token = schema.sql("SELECT lease_version FROM runs WHERE run_id = 'r1'").expect("token");
    assert_eq!(schema.sql("SELECT consumed_lease || ' ' || consumed_seq FROM approvals"), Ok(format!("{token} 5")));
    let again = current.consume_approval(&used());
    let Err(StoreError::ApprovalRefused { reason, .. }) = again else { panic!("used once: {again:?}") };
    assert!(reason.contains("used already"), "{reason}");
    // Not yet recorded in the log (the step has not checkpointed): the
    // run still reads back.
    assert!(other.read_run("r1").is_ok());
}

#[test]
fn an_expired_or_other_approval_is_refused_and_nothing_is_written() {
    let Some(schema) = TestSchema::create() else { return };
    let store = schema.store(&Sealer::plain());
    approved(&store, "r1", std::time::Duration::from_secs(3600));
    schema.sql("UPDATE approvals SET expires_at = now() - interval '1 second'").expect("expire it");
    let (mut run, _) = store.open_run("r1").expect("open");
    verified(&mut run);
    let expired = run.consume_approval(&used());
    let Err(StoreError::ApprovalRefused { reason, .. }) = expired else { panic!("expired: {expired:?}") };
    assert!(reason.contains("expired at") && reason.contains("database time"), "{reason}");
    let other = ApprovalUse { fingerprint: "g".into(), ..used() };
    let mismatched = run.consume_approval(&other);
    let Err(StoreError::ApprovalRefused { reason, .. }) = mismatched else { panic!("other: {mismatched:?}") };
    assert!(reason.contains("different action"), "{reason}");
    assert_eq!(schema.sql("SELECT count(*) FROM approvals WHERE consumed_at IS NOT NULL"), Ok("0".into()));
}

/// The service's scan asks for the records of its own workspace that have
/// not ended and that nobody holds (statement `UNFINISHED_RECORDS`).
#[test]
fn unfinished_records_are_the_workspaces_own_unended_unheld_ones() {
    let Some(schema) = TestSchema::create() else { return };
    let sealer = Sealer::plain();
    let store = schema.store(&sealer);
    let other = schema.process("test:other", 30).store_named("another-workspace", &sealer);
    let save = |record: &mut Box<dyn crate::store::RecordHandle>, id: &str, status: &str, expected: u64| {
        record.checkpoint(&serde_json::json!({"run_id": id, "status": status}), expected).expect("checkpoint")
    };
    for (id, status) in [("br-created", "created"), ("br-running", "running"), ("br-done", "done")] {
        let mut record = store.create_record(crate::store::RecordKind::Bridge, id).expect("create");
        save(&mut record, id, status, 0);
        record.release().expect("release");
    }
    let mut held = store.create_record(crate::store::RecordKind::Bridge, "br-held").expect("create");
    save(&mut held, "br-held", "running", 0);
    let mut elsewhere = other.create_record(crate::store::RecordKind::Bridge, "br-elsewhere").expect("create");
    save(&mut elsewhere, "br-elsewhere", "created", 0);
    elsewhere.release().expect("release");
    let listed = store.unfinished_records(crate::store::RecordKind::Bridge).expect("listed");
    assert_eq!(listed, ["br-created", "br-running"], "not ended, not held, of this workspace");
    assert!(store.unfinished_records(crate::store::RecordKind::Controller).expect("listed").is_empty());
    drop(held);
}

/// Kept read checkpoints go with the next checkpoint (one statement, and
/// the record verifies), are sent by the next read's checkpoint once the
/// first of them waited [`super::run::DEFERRED_READS_FOR`], and are dropped when
/// the handle is given back without one: the row keeps the checkpoint
/// before them, which loads, verifies and continues.
#[test]
fn kept_read_checkpoints_go_with_the_next_write_or_are_dropped_with_the_handle() {
    let Some(schema) = TestSchema::create() else { return };
    let store = schema.store(&Sealer::plain());
    let version = |id: &str| schema.sql(&format!("SELECT state_version FROM runs WHERE run_id = '{id}'")).expect("v");

    started(&store, "r1");
    let (mut run, loaded) = store.open_run("r1").expect("open");
    let first = saved(&mut run, &loaded.state, 2);
    run.checkpoint_reads(&first, 1).expect("kept");
    let second = saved(&mut run, &first, 3);
    run.checkpoint_reads(&second, 2).expect("kept");
    let effect = saved(&mut run, &second, 4);
    run.checkpoint(&effect, 3).expect("a synchronous checkpoint");
    assert_eq!(version("r1"), "4");
    let read = store.read_run("r1").expect("verified");
    assert_eq!((read.state.state_version, read.audit_tail.seq), (4, run.audit_seq()));
    run.make_durable().expect("nothing left: no statement");

    started(&store, "r2");
    let (mut run, loaded) = store.open_run("r2").expect("open");
    let first = saved(&mut run, &loaded.state, 2);
    run.checkpoint_reads(&first, 1).expect("kept");
    std::thread::sleep(super::run::DEFERRED_READS_FOR + std::time::Duration::from_millis(20));
    let second = saved(&mut run, &first, 3);
    run.checkpoint_reads(&second, 2).expect("sent: the first waited long enough");
    assert_eq!(version("r2"), "3");

    // Sent without waiting, and refused (the row moved on before it got
    // there): the refusal is the answer of the next write, and nothing of
    // them was written.
    started(&store, "r5");
    let (mut run, loaded) = store.open_run("r5").expect("open");
    let moved_on = |read: u64| {
        if read == super::run::DEFERRED_READS_MAX as u64 {
            schema.sql("UPDATE runs SET state_version = 99 WHERE run_id = 'r5'").expect("another holder's checkpoint");
        }
    };
    kept_reads(&mut run, &loaded.state, super::run::DEFERRED_READS_MAX, &moved_on);
    let refused = run.make_durable();
    assert!(matches!(refused, Err(StoreError::VersionConflict { expected: 1, found: 99, .. })), "{refused:?}");
    assert_eq!(last_seq(&schema, "r5"), loaded.audit_tail.seq.to_string(), "nothing written");

    started(&store, "r3");
    let (mut run, loaded) = store.open_run("r3").expect("open");
    let kept = saved(&mut run, &loaded.state, 2);
    run.checkpoint_reads(&kept, 1).expect("kept");
    run.release().expect("given back");
    assert_eq!(version("r3"), "1", "dropped with the handle");
    let (mut again, reloaded) = store.open_run("r3").expect("the checkpoint before loads and verifies");
    assert_eq!((reloaded.state.state_version, reloaded.audit_tail.seq), (1, loaded.audit_tail.seq));
    let next = saved(&mut again, &reloaded.state, 2);
    again.checkpoint(&next, 1).expect("and continues");
    assert_eq!(store.read_run("r3").expect("verified").state.state_version, 2);
}

/// `reads` read checkpoints after `state` (versions one more each), each
/// kept by the handle or sent when it keeps as many as it keeps;
/// `before(n)` runs before the `n`-th (1-based). The last state.
fn kept_reads(
    run: &mut Box<dyn crate::store::RunHandle>,
    state: &crate::store::RunState,
    reads: usize,
    before: &dyn Fn(u64),
) -> crate::store::RunState {
    let mut last = state.clone();
    for read in 1..=reads as u64 {
        before(read);
        let version = state.state_version + read;
        last = saved(run, &last, version);
        run.checkpoint_reads(&last, version - 1).expect("a read's checkpoint");
    }
    last
}

/// The `seq` of the last audit row stored for `run_id`.
fn last_seq(schema: &TestSchema, run_id: &str) -> String {
    schema.sql(&format!("SELECT max(seq) FROM audit_events WHERE run_id = '{run_id}'")).expect("seq")
}

/// `state` as checkpoint `version` after one more `state_saved` event.
fn saved(
    run: &mut Box<dyn crate::store::RunHandle>,
    state: &crate::store::RunState,
    version: u64,
) -> crate::store::RunState {
    run.append_event(NewEvent {
        ts: "2026-01-01T00:00:01Z".into(),
        event_type: "state_saved",
        step_id: None,
        status: Some("ok"),
        details: serde_json::Map::new(),
    })
    .expect("buffered");
    let mut next = state.clone();
    next.state_version = version;
    next.audit_seq = run.audit_seq();
    next.audit_hash = run.audit_hash().map(str::to_string);
    next
}

/// A read's checkpoint is kept in the handle (the row stays at the
/// checkpoint before) and sent before anything else the handle writes:
/// `make_durable` sends it with one synchronous commit, and refuses
/// (nothing may start) when the stored checkpoint is not the one it
/// continues any more. After [`super::run::DEFERRED_READS_MAX`] kept ones they
/// are sent with an asynchronous commit, which `make_durable` then makes
/// durable (and refuses when a restart lost it). After a synchronous
/// checkpoint it sends nothing.
#[test]
fn a_read_checkpoint_is_made_durable_before_an_effect_or_refused_when_it_was_lost() {
    let Some(schema) = TestSchema::create() else { return };
    let store = schema.store(&Sealer::plain());
    started(&store, "r1");
    let (mut run, loaded) = store.open_run("r1").expect("open");
    let version = || schema.sql("SELECT state_version FROM runs WHERE run_id = 'r1'").expect("version");

    let read = saved(&mut run, &loaded.state, 2);
    run.checkpoint_reads(&read, 1).expect("a read's checkpoint");
    assert_eq!(version(), "1", "kept in the handle, not sent");
    assert_eq!(run.stored_version(), 2);
    run.make_durable().expect("made durable");
    assert_eq!(version(), "2");
    assert_eq!(store.read_run("r1").expect("read").state.state_version, 2);

    // As many as the handle keeps: sent together, committed
    // asynchronously, without waiting for the answer.
    let last = kept_reads(&mut run, &read, super::run::DEFERRED_READS_MAX, &|_| {});
    let sent = last.state_version.to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while version() != sent && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(version(), sent, "sent in one statement once the handle kept as many as it keeps");
    assert_eq!(store.read_run("r1").expect("read").state.state_version, last.state_version, "and verified");
    // A restart lost the asynchronous commit: the row is back at version 2.
    schema.sql("UPDATE runs SET state_version = 2 WHERE run_id = 'r1'").expect("as if lost");
    let refused = run.make_durable();
    let expected = last.state_version;
    assert!(
        matches!(refused, Err(StoreError::VersionConflict { expected: e, found: 2, .. }) if e == expected),
        "{refused:?}"
    );

    // A kept one the row moved on from is refused when it is sent, and
    // writes nothing.
    started(&store, "r4");
    let (mut run, loaded) = store.open_run("r4").expect("open");
    let read = saved(&mut run, &loaded.state, 2);
    run.checkpoint_reads(&read, 1).expect("kept");
    schema.sql("UPDATE runs SET state_version = 5 WHERE run_id = 'r4'").expect("another holder's checkpoint");
    let refused = run.make_durable();
    assert!(matches!(refused, Err(StoreError::VersionConflict { expected: 1, found: 5, .. })), "{refused:?}");
    assert_eq!(last_seq(&schema, "r4"), loaded.audit_tail.seq.to_string(), "nothing written");

    started(&store, "r2");
    let (mut run, loaded) = store.open_run("r2").expect("open");
    let after = saved(&mut run, &loaded.state, 2);
    run.checkpoint(&after, 1).expect("a synchronous checkpoint");
    schema.sql("UPDATE runs SET state_version = 0 WHERE run_id = 'r2'").expect("a row make_durable would refuse");
    run.make_durable().expect("nothing to make durable: no statement sent");

    // A checkpoint that records a person's decision commits synchronously,
    // even after a read: nothing is left to make durable.
    started(&store, "r3");
    let (mut run, loaded) = store.open_run("r3").expect("open");
    let with_decision = decided(&mut run, &loaded.state, std::time::Duration::from_secs(3600));
    run.checkpoint_reads(&with_decision, 1).expect("a read's checkpoint with a decision");
    assert_eq!(schema.sql("SELECT count(*) FROM approvals WHERE run_id = 'r3'"), Ok("1".into()));
    schema.sql("UPDATE runs SET state_version = 0 WHERE run_id = 'r3'").expect("a row make_durable would refuse");
    run.make_durable().expect("nothing to make durable: no statement sent");
}
