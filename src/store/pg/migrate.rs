//! The schema's versions: the SQL files of `migrations/`, embedded in the
//! binary, applied by `planrun store migrate` and checked by every other
//! command before it touches a run.
//!
//! `migrate` runs in one transaction under a transaction-scoped advisory
//! lock (so two `migrate`s of one schema take turns, and a failed one leaves
//! nothing behind), records each applied file's SHA-256 in
//! `schema_migrations`, and applies only what is missing: running it again
//! changes nothing. An applied migration whose file changed since is refused
//! rather than papered over.

use deadpool_postgres::Client;
use deadpool_postgres::GenericClient;

use crate::digest::sha256_hex;
use crate::store::pg::error::{PgError, db_error};
use crate::store::pg::sql;

/// One migration file.
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in order. Add a file and a line; never edit an applied one.
pub const MIGRATIONS: &[Migration] = &[
    Migration { version: 1, name: "0001_runs.sql", sql: include_str!("../../../migrations/0001_runs.sql") },
    Migration {
        version: 2,
        name: "0002_queued_runs.sql",
        sql: include_str!("../../../migrations/0002_queued_runs.sql"),
    },
    Migration {
        version: 3,
        name: "0003_approvals_by_run.sql",
        sql: include_str!("../../../migrations/0003_approvals_by_run.sql"),
    },
    Migration {
        version: 4,
        name: "0004_unfinished_records.sql",
        sql: include_str!("../../../migrations/0004_unfinished_records.sql"),
    },
];

/// The schema version this planrun reads and writes.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |migration| migration.version)
}

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The schema the tables are in.
    pub schema: String,
    /// Versions applied now (empty when the schema was up to date).
    pub applied: Vec<i64>,
    /// The schema's version afterwards.
    pub version: i64,
}

/// Applies the missing migrations in one transaction.
pub async fn migrate(client: &mut Client) -> Result<MigrationReport, PgError> {
    let transaction = client.transaction().await.map_err(db_error("start the migration"))?;
    transaction.execute(sql::MIGRATION_LOCK, &[]).await.map_err(db_error("lock the schema for migration"))?;
    let schema = current_schema(&transaction).await?;
    transaction.execute(sql::CREATE_MIGRATIONS_TABLE, &[]).await.map_err(db_error("create `schema_migrations`"))?;
    let applied = applied_versions(&transaction).await?;
    compare_with_embedded(&applied, &schema, false)?;
    let mut now_applied = Vec::new();
    for migration in MIGRATIONS.iter().filter(|migration| !applied.iter().any(|(v, _)| *v == migration.version)) {
        transaction.batch_execute(migration.sql).await.map_err(|error| PgError::Migration {
            name: migration.name,
            message: crate::store::pg::error::describe(&error),
        })?;
        let digest = sha256_hex(migration.sql.as_bytes());
        transaction
            .execute(sql::RECORD_MIGRATION, &[&migration.version, &digest])
            .await
            .map_err(db_error("record the migration"))?;
        now_applied.push(migration.version);
    }
    transaction.commit().await.map_err(db_error("commit the migration"))?;
    Ok(MigrationReport { schema, applied: now_applied, version: latest_version() })
}

/// Refuses a schema this planrun cannot use: never migrated, partly
/// migrated, migrated by a newer planrun, or migrated from other files.
pub async fn check_schema(client: &Client) -> Result<(), PgError> {
    let schema = current_schema(client).await?;
    let applied = match client.query(sql::APPLIED_MIGRATIONS, &[]).await {
        Ok(rows) => rows.iter().map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1))).collect(),
        Err(error) if error.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => Vec::new(),
        Err(error) => return Err(db_error("read `schema_migrations`")(error)),
    };
    compare_with_embedded(&applied, &schema, true)
}

/// The schema planrun's tables are in: the first schema of the session's
/// `search_path` that exists. None exists when the URL's `options` name a
/// schema nobody created (`current_schema()` is then NULL).
async fn current_schema(client: &impl GenericClient) -> Result<String, PgError> {
    let row = client.query_one(sql::CURRENT_SCHEMA, &[]).await.map_err(db_error("read the current schema"))?;
    let search_path: String = row.try_get(1).unwrap_or_default();
    match row.try_get::<_, Option<String>>(0) {
        Ok(Some(schema)) => Ok(schema),
        _ => Err(PgError::Schema {
            schema: search_path.clone(),
            reason: "no schema of that search path exists; create it (`CREATE SCHEMA …`) \
                 or name an existing one in the URL's `options=-csearch_path=…`"
                .to_string(),
        }),
    }
}

async fn applied_versions(transaction: &deadpool_postgres::Transaction<'_>) -> Result<Vec<(i64, String)>, PgError> {
    let rows = transaction.query(sql::APPLIED_MIGRATIONS, &[]).await.map_err(db_error("read `schema_migrations`"))?;
    Ok(rows.iter().map(|row| (row.get::<_, i64>(0), row.get::<_, String>(1))).collect())
}

/// Compares the applied versions with the embedded files. With
/// `require_all`, a missing one is refused too (every command but `migrate`).
fn compare_with_embedded(applied: &[(i64, String)], schema: &str, require_all: bool) -> Result<(), PgError> {
    let latest = latest_version();
    let schema = schema.to_string();
    if let Some((newer, _)) = applied.iter().find(|(version, _)| *version > latest) {
        return Err(PgError::Schema {
            schema,
            reason: format!("it is at version {newer}, newer than this planrun's {latest}; use a newer planrun"),
        });
    }
    for (version, digest) in applied {
        let embedded = MIGRATIONS.iter().find(|migration| migration.version == *version);
        match embedded {
            Some(migration) if sha256_hex(migration.sql.as_bytes()) == *digest => {}
            Some(migration) => {
                return Err(PgError::Schema {
                    schema,
                    reason: format!(
                        "migration {version} was applied from another `{}` than this planrun's",
                        migration.name
                    ),
                });
            }
            None => {
                return Err(PgError::Schema {
                    schema,
                    reason: format!("it records migration {version}, which this planrun does not know"),
                });
            }
        }
    }
    if require_all {
        let at = applied.last().map_or(0, |(version, _)| *version);
        if applied.is_empty() {
            return Err(PgError::Schema {
                schema,
                reason: "it has no planrun tables: run `planrun store migrate --store URL` first".to_string(),
            });
        }
        if at < latest || applied.len() < MIGRATIONS.len() {
            return Err(PgError::Schema {
                schema,
                reason: format!(
                    "it is partly migrated (version {at} of {latest}): run `planrun store migrate --store URL`"
                ),
            });
        }
    }
    Ok(())
}
