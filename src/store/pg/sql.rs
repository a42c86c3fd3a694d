//! Every SQL statement of the PostgreSQL store, one `const` each, so that
//! the statements are read (and reviewed) in one place and each is run by
//! the conformance suite against a real server. Tables: `migrations/`.
//!
//! Parameters are typed by their casts, so that Rust's `i64` / `&str` /
//! `Vec<…>` bind without a round trip to describe them. The lease guard
//! (`owner_id`, `lease_version`, an unexpired `lease_expires_at`) is part of
//! every statement that writes a run: a holder whose lease was taken over
//! writes nothing.

/// Serialises migrations of one schema (transaction-scoped, so it is
/// released by the commit or the rollback).
pub const MIGRATION_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtext('planrun.migrate.' || current_schema()))";

pub const CREATE_MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (\
     version bigint PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now(), sha256 text NOT NULL)";

/// `42P01` (undefined_table) when the schema was never migrated.
pub const APPLIED_MIGRATIONS: &str = "SELECT version, sha256 FROM schema_migrations ORDER BY version";

pub const RECORD_MIGRATION: &str = "INSERT INTO schema_migrations (version, sha256) VALUES ($1::bigint, $2::text)";

/// The session's schema, for messages.
pub const CURRENT_SCHEMA: &str = "SELECT current_schema()::text, current_setting('search_path')";

/// Creates agent run or record `$2` of kind `$1`, leased to `$4` for `$5`
/// seconds. An agent run that never reached its first checkpoint (`state`
/// NULL) and whose lease is gone may be taken over: nothing ran from it
/// (a queued one never: it belongs to the queue).
/// Returns the fencing token; no row when the id is taken.
pub const CREATE_RUN: &str = "INSERT INTO runs AS r (kind, run_id, workspace_id, owner_id, lease_version, lease_expires_at) \
     VALUES ($1::text, $2::text, $3::text, $4::text, 1, now() + make_interval(secs => $5::bigint)) \
     ON CONFLICT (kind, run_id) DO UPDATE SET owner_id = EXCLUDED.owner_id, lease_version = r.lease_version + 1, \
         lease_expires_at = EXCLUDED.lease_expires_at, workspace_id = EXCLUDED.workspace_id, updated_at = now() \
     WHERE r.kind = 'agent' AND r.state IS NULL AND r.request IS NULL \
         AND (r.lease_expires_at IS NULL OR r.lease_expires_at <= now()) \
     RETURNING lease_version";

/// Claims an existing run or record of workspace `$5` by id: free, or its
/// lease expired. Returns the new fencing token and `claims`: how often the
/// run was taken over from a holder whose lease expired (it died or froze)
/// since its last checkpoint. A lease given back is not counted: its holder
/// did not die. (In `SET`, `owner_id` is the row's value before the
/// update.) A run of another workspace is never claimed: its steps act on
/// that workspace's files.
pub const CLAIM_BY_ID: &str = "UPDATE runs SET owner_id = $3::text, lease_version = lease_version + 1, \
         lease_expires_at = now() + make_interval(secs => $4::bigint), \
         claims = claims + CASE WHEN owner_id IS NULL THEN 0 ELSE 1 END \
     WHERE kind = $1::text AND run_id = $2::text AND state IS NOT NULL AND workspace_id = $5::text \
         AND (owner_id IS NULL OR lease_expires_at <= now()) \
     RETURNING lease_version, claims::bigint";

/// Why a claim by id found no row: whether a row exists for the id, whether
/// it has a checkpoint, and the workspace it belongs to.
pub const RUN_EXISTS: &str =
    "SELECT state IS NOT NULL, workspace_id FROM runs WHERE kind = $1::text AND run_id = $2::text";

/// Renews a lease that is still held (heartbeat).
pub const RENEW_LEASE: &str = "UPDATE runs SET lease_expires_at = now() + make_interval(secs => $5::bigint) \
     WHERE kind = $1::text AND run_id = $2::text AND owner_id = $3::text AND lease_version = $4::bigint \
         AND lease_expires_at > now()";

/// Gives a lease back (the token stays: it never goes down).
pub const RELEASE_LEASE: &str = "UPDATE runs SET owner_id = NULL, lease_expires_at = NULL \
     WHERE kind = $1::text AND run_id = $2::text AND owner_id = $3::text AND lease_version = $4::bigint";

/// The guarded checkpoint, in one statement (one round trip): replaces the
/// sealed state (`$6..$12`) if the caller still holds the lease and the
/// stored version is the expected one (`$1..$5`) and, only if it did, appends
/// the audit events (`$13..$15`: seq, line, hash) and history records
/// (`$16..$17`: record_no, line) under the new state version and the
/// caller's fencing token. Returns the number of rows the guard wrote (0:
/// refused, and nothing was inserted). A checkpoint is progress: `claims`
/// (claims since the last progress) goes back to 0. With `$18` true the
/// transaction commits without waiting for the write-ahead log's flush
/// (`synchronous_commit` off for it alone: read checkpoints a holder kept
/// and sends together, made durable by the next synchronous commit,
/// [`CHECKPOINT_DURABLE`]).
pub const CHECKPOINT: &str = "WITH guard AS (\
         UPDATE runs SET state = $6::text, status = $7::text, state_version = $8::bigint, \
             audit_head_seq = $9::bigint, history_records = $10::bigint, updated_at = now(), claims = 0, \
             finished_at = CASE WHEN $11::bool THEN coalesce(finished_at, now()) ELSE NULL END, \
             lease_expires_at = now() + make_interval(secs => $12::bigint) \
         WHERE kind = $1::text AND run_id = $2::text AND owner_id = $3::text AND lease_version = $4::bigint \
             AND lease_expires_at > now() AND state_version = $5::bigint \
         RETURNING 1), \
     events AS (\
         INSERT INTO audit_events (kind, run_id, seq, line, hash, state_version, lease_version) \
         SELECT $1::text, $2::text, seq, line, hash, $8::bigint, $4::bigint \
         FROM unnest($13::bigint[], $14::text[], $15::text[]) AS e (seq, line, hash) \
         WHERE EXISTS (SELECT 1 FROM guard)), \
     records AS (\
         INSERT INTO history (run_id, record_no, line, state_version, lease_version) \
         SELECT $2::text, record_no, line, $8::bigint, $4::bigint \
         FROM unnest($16::bigint[], $17::text[]) AS h (record_no, line) \
         WHERE EXISTS (SELECT 1 FROM guard)) \
     SELECT count(*), CASE WHEN $18::bool THEN set_config('synchronous_commit', 'off', true) END FROM guard";

/// Makes an agent run's checkpoints durable (after
/// [`CHECKPOINT`] with `$18` true, an asynchronous commit): renews the
/// lease if it is still held and the stored checkpoint is still version
/// `$5`, committed synchronously, which flushes the write-ahead log up to
/// this commit and so every commit before it. No row when the lease is
/// gone or the checkpoint is not there (a server restart lost it).
pub const CHECKPOINT_DURABLE: &str = "UPDATE runs SET lease_expires_at = now() + make_interval(secs => $6::bigint) \
     WHERE kind = $1::text AND run_id = $2::text AND owner_id = $3::text AND lease_version = $4::bigint \
         AND lease_expires_at > now() AND state_version = $5::bigint";

/// Why a guarded write found no row: the stored version and whether the
/// caller's lease still holds.
pub const WRITE_REFUSED: &str = "SELECT state_version, (owner_id IS NOT DISTINCT FROM $3::text \
         AND lease_version = $4::bigint AND lease_expires_at > now()) \
     FROM runs WHERE kind = $1::text AND run_id = $2::text";

pub const INSERT_PLAN: &str = "INSERT INTO run_plans (run_id, plan, plan_hash) VALUES ($1::text, $2::text, $3::text)";

/// Appends one event of a record, guarded by the lease and by the head it
/// continues (`audit_head_seq = seq - 1`), in one statement. One row when
/// it was written.
pub const APPEND_RECORD_EVENT: &str = "WITH guard AS (\
         UPDATE runs SET audit_head_seq = $5::bigint, updated_at = now() \
         WHERE kind = $1::text AND run_id = $2::text AND owner_id = $3::text AND lease_version = $4::bigint \
             AND lease_expires_at > now() AND audit_head_seq = $5::bigint - 1 \
         RETURNING state_version, lease_version) \
     INSERT INTO audit_events (kind, run_id, seq, line, hash, state_version, lease_version) \
     SELECT $1::text, $2::text, $5::bigint, $6::text, $7::text, state_version, lease_version FROM guard";

/// A record's guarded checkpoint (its events are already written).
pub const RECORD_CHECKPOINT: &str = "UPDATE runs SET state = $6::text, status = $7::text, state_version = $8::bigint, \
         updated_at = now(), lease_expires_at = now() + make_interval(secs => $9::bigint) \
     WHERE kind = $1::text AND run_id = $2::text AND owner_id = $3::text AND lease_version = $4::bigint \
         AND lease_expires_at > now() AND state_version = $5::bigint";

/// A run's or record's checkpoint and the workspace it belongs to.
pub const READ_STATE: &str = "SELECT state, workspace_id FROM runs WHERE kind = $1::text AND run_id = $2::text";

pub const READ_PLAN: &str = "SELECT plan FROM run_plans WHERE kind = 'agent' AND run_id = $1::text";

pub const READ_EVENTS: &str =
    "SELECT seq, line, hash FROM audit_events WHERE kind = $1::text AND run_id = $2::text ORDER BY seq";

pub const READ_HISTORY: &str =
    "SELECT record_no, line FROM history WHERE kind = 'agent' AND run_id = $1::text ORDER BY record_no";

/// The agent runs of workspace `$1` nobody holds (or whose holder's lease
/// expired) that are interrupted or waiting (the caller keeps the approved
/// ones), oldest first.
pub const RUNNABLE: &str = "SELECT run_id, status, state FROM runs \
     WHERE kind = 'agent' AND workspace_id = $1::text AND state IS NOT NULL \
         AND status IN ('running', 'waiting_approval') AND not_before <= now() \
         AND (owner_id IS NULL OR lease_expires_at <= now()) \
     ORDER BY created_at, run_id";

/// Every run or record of a kind of workspace `$2` that has a checkpoint,
/// with it, and every queued run of it (its `state` NULL).
pub const LIST: &str = "SELECT run_id, state FROM runs \
     WHERE kind = $1::text AND workspace_id = $2::text AND (state IS NOT NULL OR status = 'queued')";

/// The records of kind `$1` of workspace `$2` that have not ended and that
/// nobody holds (or whose holder's lease expired), oldest first: what the
/// service's scan takes up (index `runs_unfinished`).
pub const UNFINISHED_RECORDS: &str = "SELECT run_id FROM runs \
     WHERE kind = $1::text AND workspace_id = $2::text AND status IN ('created', 'queued', 'running') \
         AND (owner_id IS NULL OR lease_expires_at <= now()) \
     ORDER BY created_at, run_id";

/// Queues agent run `$2` of workspace `$1` with its request `$3`: no
/// checkpoint, no holder. No row when the id is taken.
pub const QUEUE_RUN: &str = "INSERT INTO runs (kind, run_id, workspace_id, status, request) \
     VALUES ('agent', $2::text, $1::text, 'queued', $3::text) ON CONFLICT (kind, run_id) DO NOTHING";

/// Claims the oldest queued run of workspace `$1` (none of `$4`) for owner
/// `$2` for `$3` seconds, in one statement: the candidate is locked `FOR
/// UPDATE SKIP LOCKED` (concurrent claimers take the next one instead of
/// waiting) in a `MATERIALIZED` CTE, so that it is chosen once (a subquery
/// joined in `FROM` may be scanned again, and with `SKIP LOCKED` each scan
/// picks another row: one statement would then claim several), and the
/// update repeats the guard. Returns the run id, the new fencing token and
/// the request and `claims` (a claim from a claimer whose lease expired
/// counts, as for any run: see `CLAIM`); no row when nothing is queued.
pub const CLAIM_QUEUED: &str = "WITH next AS MATERIALIZED (SELECT kind, run_id FROM runs \
         WHERE kind = 'agent' AND workspace_id = $1::text AND status = 'queued' AND state IS NULL \
             AND not_before <= now() AND (owner_id IS NULL OR lease_expires_at <= now()) \
             AND run_id <> ALL($4::text[]) \
         ORDER BY created_at, run_id LIMIT 1 FOR UPDATE SKIP LOCKED) \
     UPDATE runs AS r SET owner_id = $2::text, lease_version = r.lease_version + 1, \
         lease_expires_at = now() + make_interval(secs => $3::bigint), \
         claims = r.claims + CASE WHEN r.owner_id IS NULL THEN 0 ELSE 1 END, updated_at = now() \
     FROM next \
     WHERE r.kind = next.kind AND r.run_id = next.run_id AND r.status = 'queued' AND r.state IS NULL \
         AND (r.owner_id IS NULL OR r.lease_expires_at <= now()) \
     RETURNING r.run_id, r.lease_version, r.request, r.claims::bigint";

/// Claims queued run `$1` of workspace `$4` for owner `$2` for `$3`
/// seconds (to cancel it). Returns the new fencing token, the request and
/// `claims`.
pub const CLAIM_QUEUED_BY_ID: &str = "UPDATE runs SET owner_id = $2::text, lease_version = lease_version + 1, \
         lease_expires_at = now() + make_interval(secs => $3::bigint), \
         claims = claims + CASE WHEN owner_id IS NULL THEN 0 ELSE 1 END, updated_at = now() \
     WHERE kind = 'agent' AND run_id = $1::text AND status = 'queued' AND state IS NULL AND workspace_id = $4::text \
         AND (owner_id IS NULL OR lease_expires_at <= now()) \
     RETURNING lease_version, request, claims::bigint";

/// Queued run `$1`: its request and whether a worker holds it now.
pub const READ_QUEUED: &str = "SELECT request, (owner_id IS NOT NULL AND lease_expires_at > now()) FROM runs \
     WHERE kind = 'agent' AND run_id = $1::text AND status = 'queued' AND state IS NULL";

/// The owner of a run's or record's valid lease, if it has one.
pub const READ_HOLDER: &str = "SELECT owner_id FROM runs \
     WHERE kind = $1::text AND run_id = $2::text AND owner_id IS NOT NULL AND lease_expires_at > now()";

pub const GET_RECEIPT: &str = "SELECT receipt FROM receipts WHERE workspace_id = $1::text AND key_sha256 = $2::text";

/// Writes receipt `$2` of run `$5`, unless another owner than `$8` holds
/// that run's lease now: a holder that was taken over while it was frozen
/// never overwrites the new holder's receipt (no row: refused).
pub const PUT_RECEIPT: &str = "INSERT INTO receipts (workspace_id, key_sha256, idem_key, status, run_id, step_id, receipt) \
     SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text \
     WHERE NOT EXISTS (SELECT 1 FROM runs WHERE kind = 'agent' AND run_id = $5::text \
         AND owner_id IS DISTINCT FROM $8::text AND lease_expires_at > now()) \
     ON CONFLICT (workspace_id, key_sha256) DO UPDATE SET idem_key = EXCLUDED.idem_key, status = EXCLUDED.status, \
         run_id = EXCLUDED.run_id, step_id = EXCLUDED.step_id, receipt = EXCLUDED.receipt, updated_at = now()";

pub const REMOVE_RECEIPT: &str = "DELETE FROM receipts WHERE workspace_id = $1::text AND key_sha256 = $2::text";

/// Wakes the workers of workspace `$1`: a run there may be runnable (sent
/// in its own autocommit statement after a lease is given back, never per
/// step: NOTIFY serialises the commits that send it).
pub const NOTIFY_RUNNABLE: &str = "SELECT pg_notify('planrun_runnable', $1::text)";

/// What a worker's listening session subscribes to.
pub const LISTEN_RUNNABLE: &str = "LISTEN planrun_runnable";

/// The guard of a step about to use an approval: the caller still holds
/// the lease and the run is at the version it loaded (the lease is renewed
/// on the way). One row when it holds; the row stays locked until the
/// transaction ends.
pub const GUARD_RUN: &str = "UPDATE runs SET lease_expires_at = now() + make_interval(secs => $6::bigint) \
     WHERE kind = $1::text AND run_id = $2::text AND owner_id = $3::text AND lease_version = $4::bigint \
         AND lease_expires_at > now() AND state_version = $5::bigint";

/// Records the approval of the frozen action (`$2` step, `$3` fingerprint,
/// `$4` the state version that froze it, `$5` scope) of run `$1` by `$6`,
/// valid `$7` seconds from now in database time (at most 10 000 years).
/// Approving it again before it was used renews the live row in place; no
/// row when the live one names another action.
pub const RECORD_APPROVAL: &str = "INSERT INTO approvals AS a \
         (run_id, step_id, fingerprint, state_version, scope, decision, decided_by, expires_at) \
     VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::text, 'approved', $6::text, \
         now() + make_interval(secs => least($7::float8, 315360000000))) \
     ON CONFLICT (run_id, state_version) WHERE decision = 'approved' AND consumed_at IS NULL \
     DO UPDATE SET decided_by = EXCLUDED.decided_by, decided_at = now(), expires_at = EXCLUDED.expires_at \
     WHERE a.step_id = EXCLUDED.step_id AND a.fingerprint = EXCLUDED.fingerprint AND a.scope = EXCLUDED.scope \
     RETURNING approval_id";

/// Records the rejection of the frozen action (as [`RECORD_APPROVAL`], `$7`
/// the reason).
pub const RECORD_REJECTION: &str = "INSERT INTO approvals \
         (run_id, step_id, fingerprint, state_version, scope, decision, decided_by, reason) \
     VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::text, 'rejected', $6::text, $7::text)";

/// Uses the approval of the frozen action (`$2` state version, `$3` step,
/// `$4` fingerprint, `$5` scope) of run `$1` for lease `$6` at audit event
/// `$7`: a live, unexpired one (database time), or one an earlier lease
/// used without its step reaching a checkpoint (`consumed_seq` past the
/// stored head `$8`: that holder died mid-step, and the step is taken over
/// as on the file store). Never one whose use the log recorded, never for
/// a lease older than the last user's. One row when it was used.
pub const CONSUME_APPROVAL: &str = "UPDATE approvals SET consumed_at = coalesce(consumed_at, now()), \
         consumed_lease = $6::bigint, consumed_seq = $7::bigint \
     WHERE approval_id = (SELECT approval_id FROM approvals \
         WHERE run_id = $1::text AND state_version = $2::bigint AND step_id = $3::text \
             AND fingerprint = $4::text AND scope = $5::text AND decision = 'approved' \
             AND ((consumed_at IS NULL AND expires_at > now()) \
                 OR (consumed_at IS NOT NULL AND consumed_lease < $6::bigint AND consumed_seq > $8::bigint)) \
         ORDER BY consumed_at IS NULL, approval_id DESC LIMIT 1 FOR UPDATE) \
     RETURNING approval_id";

/// Why [`CONSUME_APPROVAL`] found no row: the approvals of the frozen
/// action, newest first.
pub const APPROVALS_OF_ACTION: &str = "SELECT step_id, fingerprint, scope, consumed_at IS NOT NULL, consumed_lease, \
         consumed_seq, expires_at <= now(), to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') \
     FROM approvals WHERE run_id = $1::text AND state_version = $2::bigint AND decision = 'approved' \
     ORDER BY approval_id DESC";

/// Every decision on run `$1`, oldest first (checked against its log).
pub const READ_APPROVALS: &str = "SELECT state_version, step_id, fingerprint, scope, decision, decided_by, reason, \
         consumed_seq FROM approvals WHERE run_id = $1::text ORDER BY approval_id";
