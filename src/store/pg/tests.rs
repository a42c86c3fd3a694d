//! The PostgreSQL store's own tests, beside the shared conformance suite
//! (`store/conformance.rs`): migrations and the refusals of an unusable
//! schema, the append-only triggers, fencing by the lease, and calls from
//! inside a tokio runtime. Skipped without `PLANRUN_TEST_PG` (see
//! `test_db.rs`).

use crate::store::pg::error::PgError;
use crate::store::pg::migrate::latest_version;
use crate::store::pg::test_db::{TestSchema, psql};
use crate::store::pg::{PgOptions, PgStores};
use crate::store::{NewEvent, RunStore, Sealer, StoreError};

fn options() -> PgOptions {
    PgOptions { lease_secs: 30, owner_id: "test:migrate".to_string() }
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
    assert_eq!((first.applied.clone(), first.version), (vec![1, 2], latest_version()));
    let second = PgStores::migrate(&location, options()).expect("migrate again");
    assert!(second.applied.is_empty(), "nothing applied the second time");
    let recorded = psql(
        &conninfo,
        "SELECT string_agg(version || ' ' || length(sha256), ',' ORDER BY version) FROM schema_migrations",
    )
    .expect("rows");
    assert_eq!(recorded, "1 64,2 64");
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

    let mut next = loaded.state.clone();
    next.state_version = 2;
    stale
        .append_event(NewEvent {
            ts: "2026-01-01T00:00:01Z".into(),
            event_type: "state_saved",
            step_id: None,
            status: Some("ok"),
            details: serde_json::Map::new(),
        })
        .expect("buffered");
    next.audit_seq = stale.audit_seq();
    next.audit_hash = stale.audit_hash().map(str::to_string);
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
