//! Test support: a fresh schema per test on the server named by
//! `PLANRUN_TEST_PG` (libpq key/value form, e.g. `host=127.0.0.1
//! port=55432 user=postgres`), migrated, and dropped when the test ends.
//! Without the variable a test is skipped with one "skipped: no
//! PostgreSQL" line; with `PLANRUN_REQUIRE_PG=1` (CI) a missing or
//! unreachable server fails the test instead. Tampering goes through
//! `psql`, as an operator with write access to the tables would.

use std::process::Command;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::store::Sealer;
use crate::store::pg::location::PgLocation;
use crate::store::pg::{PgOptions, PgStore, PgStores};

static NEXT: AtomicU64 = AtomicU64::new(1);
static SKIPPED: Once = Once::new();

/// Runs `sql` with `psql` against `conninfo`; the output without its last
/// newline.
pub fn psql(conninfo: &str, sql: &str) -> Result<String, String> {
    let output = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", conninfo, "-c", sql])
        .output()
        .map_err(|error| format!("cannot run `psql`: {error}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    if text.ends_with('\n') {
        text.pop();
    }
    Ok(text)
}

/// A SQL literal of `text` (dollar-quoted: no escaping needed).
pub fn literal(text: &str) -> String {
    assert!(!text.contains("$planrun$"), "the quote tag is not in the text");
    format!("$planrun${text}$planrun$")
}

/// A variable of the test environment. Test set-up only: the engine reads
/// its environment through `runtime::process_var`, which the store (a
/// lower layer) does not import.
#[allow(clippy::disallowed_methods, reason = "test set-up: which server the store's tests use")]
fn process_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn required() -> bool {
    process_var("PLANRUN_REQUIRE_PG").is_some_and(|value| value == "1")
}

fn skip(reason: &str) -> Option<TestSchema> {
    assert!(!required(), "PLANRUN_REQUIRE_PG=1 but {reason}");
    SKIPPED.call_once(|| {
        eprintln!("skipped: no PostgreSQL ({reason}; set PLANRUN_TEST_PG to run the store's tests on one)")
    });
    None
}

/// One schema of the test server, dropped with the value.
pub struct TestSchema {
    pub name: String,
    /// `PLANRUN_TEST_PG` with this schema as the `search_path`.
    pub conninfo: String,
    admin: String,
    stores: PgStores,
}

impl TestSchema {
    /// A new, migrated schema; `None` (skipped) without a server.
    pub fn create() -> Option<TestSchema> {
        let Some(admin) = process_var("PLANRUN_TEST_PG") else { return skip("PLANRUN_TEST_PG is not set") };
        let name = format!("t_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        if let Err(error) = psql(&admin, &format!("CREATE SCHEMA {name}")) {
            return skip(&format!("cannot create a schema on `{admin}`: {error}"));
        }
        let conninfo = format!("{admin} options=-csearch_path={name}");
        let location = location(&conninfo, &name);
        let options = PgOptions { lease_secs: 30, max_claims: 5, owner_id: format!("test:{name}") };
        PgStores::migrate(&location, options).expect("migrate the test schema");
        Some(TestSchema::connected(name, conninfo, admin))
    }

    /// A new schema that is not migrated: for the tests of `migrate`
    /// and of the refusals.
    pub fn unmigrated() -> Option<(String, PgLocation, TestSchemaName)> {
        let admin = process_var("PLANRUN_TEST_PG")?;
        let name = format!("t_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        psql(&admin, &format!("CREATE SCHEMA {name}")).expect("create a schema");
        let conninfo = format!("{admin} options=-csearch_path={name}");
        Some((conninfo.clone(), location(&conninfo, &name), TestSchemaName { name, admin }))
    }

    fn connected(name: String, conninfo: String, admin: String) -> TestSchema {
        let stores = PgStores::connect(
            &location(&conninfo, &name),
            PgOptions { lease_secs: 30, max_claims: 5, owner_id: format!("test:{name}") },
        )
        .expect("connect to the test schema");
        TestSchema { name, conninfo, admin, stores }
    }

    /// The stores of another process on this schema (another owner id,
    /// its own pool), with leases of `lease_secs`.
    pub fn process(&self, owner: &str, lease_secs: u64) -> PgStores {
        let options = PgOptions { lease_secs, max_claims: 5, owner_id: owner.to_string() };
        PgStores::connect(&location(&self.conninfo, &self.name), options).expect("connect")
    }

    /// The store of a workspace in this schema.
    pub fn store(&self, sealer: &Sealer) -> PgStore {
        self.stores.store_named("test-workspace", sealer)
    }

    /// Runs `sql` in this schema.
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        psql(&self.conninfo, sql)
    }
}

/// A PostgreSQL location for `conninfo`.
pub fn location(conninfo: &str, name: &str) -> PgLocation {
    let config: tokio_postgres::Config = conninfo.parse().expect("PLANRUN_TEST_PG is a libpq key/value string");
    // The test server speaks plain TCP (the TLS tests start their own).
    let tls =
        crate::store::pg::location::TlsOptions { mode: crate::store::pg::location::TlsMode::Disable, root_cert: None };
    PgLocation { config, display: format!("postgres test schema {name}"), tls }
}

/// Drops a schema made by [`TestSchema::unmigrated`] with the value.
pub struct TestSchemaName {
    pub name: String,
    admin: String,
}

impl Drop for TestSchemaName {
    fn drop(&mut self) {
        let _ = psql(&self.admin, &format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let _ = psql(&self.admin, &format!("DROP SCHEMA {} CASCADE", self.name));
    }
}
