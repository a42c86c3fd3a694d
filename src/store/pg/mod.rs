//! [`PgStore`]: the [`RunStore`](crate::store::RunStore) in PostgreSQL (cargo feature `postgres`,
//! `--store postgres://…`). The tables are in `migrations/`, every
//! statement in `sql.rs`, the schema's versions in `migrate.rs`.
//!
//! The records are the file store's, byte for byte: one row per audit line,
//! each checkpoint the sealed head line the file store writes (`head.rs`:
//! the held `state_saved`/`run_finished` event with the checkpoint, the
//! step records since the previous head and, on the first, the plan), one
//! row per history line, the plan copy (`run_plans.plan`), and the compact
//! head of the last head line (`runs.state`, the file store's `state.json`). Seals
//! and chains are computed by planrun over those bytes ([`Sealer`](crate::store::Sealer)), never
//! over what `jsonb` gives back, and checked again on every read
//! (`verify.rs`), so an edited, deleted or re-ordered row is found, and
//! `planrun export` writes files the file store's verifier accepts.
//!
//! A **queued** run (`queue_run`) is a row with status `queued`, no
//! checkpoint and the submitted request (opaque text); `claim_queued`
//! takes the oldest of the workspace in one `FOR UPDATE SKIP LOCKED`
//! statement and hands out a handle as `create_run` does. The workspace is
//! named by its `.planrun/id` (`workspace_id.rs`), not by its path.
//!
//! A handle holds the run's **lease**: `owner_id`, the fencing token
//! `lease_version` (one more on every claim) and `lease_expires_at` on the
//! run's row, renewed by a heartbeat at a third of `PLANRUN_LEASE_SECS`
//! while the handle lives, given back when it is released or dropped, and
//! expiring by itself when the process dies. Every write is guarded by the
//! lease in the statement that writes: a holder whose lease was taken over
//! writes nothing ([`StoreError::LeaseLost`](crate::store::StoreError::LeaseLost)). The handle also keeps the
//! lease's local deadline ([`Fence`](crate::fence::Fence), [`RunHandle::fence`](crate::store::RunHandle::fence)): from the
//! instant each claim, heartbeat or checkpoint was sent, the lease less a
//! sixth; past it (or once a heartbeat finds the lease gone) the handle
//! sends nothing more, not even the release, and the runtime starts no
//! effect and kills a running tool.
//!
//! An agent run's events and history are kept in its handle until its
//! next checkpoint and committed with it in one transaction (one commit per
//! checkpoint; the compare-and-set on `state_version` is in the same
//! statement as the lease guard), so a database run has no crash tail. The
//! checkpoints after reads are kept too, and sent together before the
//! run's next other write (`PgRun::checkpoint_reads`). A
//! record's events are written as they happen (its log may run past its
//! checkpoint, as in the file store).
//!
//! The rooms: `stores.rs` opens the process's one session (`session.rs`:
//! the pool, the store's runtime `runtime.rs`, waiting for and retrying a
//! database that went away; TLS in `tls.rs`, errors in `error.rs`; its `--store` URL in
//! `location.rs`, this process's settings in `options.rs`) and
//! hands out the [`PgStore`] of each workspace (`store.rs`: the
//! [`crate::store::RunStore`] impl; its snapshot reads in `read.rs`, the
//! checks over what it read in `verify.rs`, the approval rows in
//! `approvals.rs`, wake-ups in `wake.rs`). A handle is built from its
//! parts (`lease::HandleParts`: the session, the lease it took in
//! `lease.rs`, the sealer, its place): `PgRun` (`run/`, how it sends its
//! checkpoints in `run/checkpoint.rs`) and `PgRecord` (`record.rs`). Both make
//! their log lines' bytes in `lines.rs`.

mod approvals;
pub mod error;
mod lease;
mod lines;
mod location;
pub mod migrate;
mod options;
mod read;
mod record;
mod run;
mod runtime;
mod session;
mod sql;
mod store;
mod stores;
#[cfg(test)]
pub(crate) mod test_db;
#[cfg(test)]
mod tests;
mod tls;
mod verify;
mod wake;

pub use location::PgLocation;
pub use migrate::MigrationReport;
pub(crate) use options::PgBackend;
pub use store::PgStore;
pub use stores::{PgOptions, PgStores};
