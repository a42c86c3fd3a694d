//! The run store seam: [`RunStore`] and the handles it hands out.
//!
//! Everything a run writes goes through it: agent runs (checkpoint, audit
//! log, history, plan copy), bridge and controller records, and idempotency
//! receipts. Its one implementation today is [`crate::store::FileStore`]
//! (the folder layout the README documents); the signatures are shaped so
//! that a database implementation can follow without touching the runtime:
//!
//! - a run is created, never over an existing one ([`StoreError::RunExists`]);
//! - writing needs a handle, and a handle holds the run's lock or lease
//!   (taken by `create_*` / `open_*`, released when the handle is dropped);
//! - events and history are appended, never rewritten;
//! - a checkpoint names the `state_version` it expects to replace
//!   (compare-and-set, [`StoreError::VersionConflict`]);
//! - reading back verifies strictly (seal, hash chain, their agreement,
//!   and that the receipts the log names by `receipt_link` are those);
//! - runs can be listed.
//!
//! Every method takes `&self` / `&mut self` and returns boxed handles, so
//! the store is used as `&dyn RunStore` or `Arc<dyn RunStore>`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::fence::Fence;
use crate::store::{
    ApprovalDecision, ApprovalUse, ChildNoteFile, Holder, LoadedRecord, LoadedRun, Receipt, ReceiptError, RecordHandle,
    RecordKind, RunState, Sealer, SharedSync, StepRecord, StoreError,
};

/// How many ids [`create_unique`] tries before it gives up.
pub const CREATE_ATTEMPTS: usize = 100;

/// One audit event to append. The store adds `seq`, `run_id` and the hash
/// chain (`prev_hash`).
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent<'a> {
    pub ts: String,
    pub event_type: &'a str,
    pub step_id: Option<&'a str>,
    pub status: Option<&'a str>,
    pub details: Map<String, Value>,
}

/// One entry of [`RunStore::list_runs`] or [`RunStore::list_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunListing {
    pub run_id: String,
    /// From the run's checkpoint (a record's `created_at`); `None` when it
    /// cannot be read (the run is listed anyway, so that a broken run is
    /// visible).
    pub started_at: Option<String>,
}

/// Where a store keeps a workspace's runs, for messages such as an empty
/// list's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunsPlace {
    /// The runs folder (`<workspace>/runs`).
    Folder(PathBuf),
    /// A database store (its redacted address) and the workspace's id there
    /// (or why the workspace has none).
    Database { store: String, workspace_id: String },
}

/// Where one run's records are, for messages such as "records in …".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunRecords {
    /// The run's folder (`<workspace>/runs/<run_id>`), which holds its
    /// record files once the run has a checkpoint.
    Folder(PathBuf),
    /// A database store: its redacted address and the run there.
    Database(String),
}

impl std::fmt::Display for RunRecords {
    /// The folder's path, or the database's place.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunRecords::Folder(folder) => write!(formatter, "{}", folder.display()),
            RunRecords::Database(place) => formatter.write_str(place),
        }
    }
}

/// An agent run a worker may take up: free (or its holder's lease has
/// expired), and either interrupted (`running`) or approved and waiting to
/// be resumed. Its `state_version` tells one attempt from the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runnable {
    pub run_id: String,
    pub state_version: u64,
}

/// A queued agent run (submitted without being driven: `--queue`,
/// `POST /runs` with `"wait": false`) that has no records yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRun {
    pub run_id: String,
    /// What it was submitted with, as the submitter wrote it (the store
    /// keeps it as opaque text; [`crate::runtime`] reads it).
    pub request: String,
    /// Whether a worker holds it now, starting it.
    pub starting: bool,
}

/// A queued run claimed to be started: its handle holds the lease (a new
/// fencing token) and has no records yet, as a created run's.
pub struct QueuedClaim {
    pub handle: Box<dyn RunHandle>,
    pub request: String,
}

/// An open agent run, locked (or leased) for the holder while it lives.
pub trait RunHandle: Send {
    fn run_id(&self) -> &str;
    /// Where the run's records are, for messages.
    fn records(&self) -> RunRecords;
    /// `seq` of the last audit event written (0 before the first).
    fn audit_seq(&self) -> u64;
    /// Hash of the last audit line written.
    fn audit_hash(&self) -> Option<&str>;
    /// The `state_version` of the stored checkpoint (0 before the first).
    fn stored_version(&self) -> u64;
    /// Appends one audit event; returns its `seq`.
    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError>;
    /// Appends one step record to the history.
    fn append_history(&mut self, record: &StepRecord) -> Result<(), StoreError>;
    /// Stores the plan exactly as it runs, once, at the start.
    fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError>;
    /// Makes the appended events and history durable, then replaces the
    /// checkpoint with `state` if the stored `state_version` is `expected`;
    /// otherwise [`StoreError::VersionConflict`] and nothing is written.
    fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError>;
    /// A checkpoint of a run that goes on after a step that changes nothing
    /// outside it (`!`[`crate::model::Action::may_change_the_world`]): it may wait for the next
    /// sync instead of its own, since losing it in a crash only makes those
    /// steps read again. The run calls [`RunHandle::make_durable`] before
    /// anything that may change the world, and every later checkpoint
    /// covers it. The default (a store whose every write is durable at
    /// once) is [`RunHandle::checkpoint`]; the file store leaves out its
    /// sync, the PostgreSQL store keeps it and sends several together.
    fn checkpoint_reads(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        self.checkpoint(state, expected)
    }
    /// Makes every checkpoint taken so far durable: called before a step
    /// that may change the world starts. Nothing to do unless a
    /// [`RunHandle::checkpoint_reads`] is still waiting for its sync.
    fn make_durable(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Records a person's decision on the frozen action with the next
    /// checkpoint, in the same transaction (its event is in the log
    /// already). A store whose only record of decisions is the log (the
    /// file store) has nothing more to write: the default.
    fn record_decision(&mut self, decision: ApprovalDecision) -> Result<(), StoreError> {
        let _ = decision;
        Ok(())
    }
    /// Uses the approval of the frozen action, once, before the action
    /// runs (its `approval_verified` event is the last one appended): a
    /// shared store refuses an approval it holds as expired, used already
    /// or for another action ([`StoreError::ApprovalRefused`]), and nothing
    /// runs. The default (the file store: the run's lock is the only
    /// coordination needed) accepts.
    fn consume_approval(&mut self, approval: &ApprovalUse) -> Result<(), StoreError> {
        let _ = approval;
        Ok(())
    }
    /// Gives the run's lock or lease back. Dropping the handle does the
    /// same without a report; a store whose release can fail (a database
    /// lease) says so here. The file store's `flock` cannot fail to go.
    fn release(self: Box<Self>) -> Result<(), StoreError> {
        Ok(())
    }
    /// Whether the holder may still act on the run: the local deadline of
    /// a lease, which the store renews while the handle lives (the runtime
    /// asks it before every write and effect, a running tool is killed
    /// past it). The file store's lock never expires (the default).
    fn fence(&self) -> Fence {
        Fence::unbounded()
    }
    /// Where the shell child a step waits for is noted, so that the next
    /// process continuing the run on this machine stops one a killed holder
    /// left running (`tools/children.rs`): the file store's
    /// `runs/<id>/.child`. A database store keeps none (the default): a
    /// takeover may be on another machine.
    fn child_note(&self) -> Option<ChildNoteFile> {
        None
    }
    /// The durability barrier the run's file writes may share with the
    /// store's other writers, where the store has one for the workspace's
    /// file system (the file store's group commit, in the service):
    /// `write_file` then waits for it instead of syncing on its own.
    /// `None` (the default): each write syncs its own files.
    fn shared_sync(&self) -> Option<SharedSync> {
        None
    }
    /// When this handle's claim took the run over from holders that died
    /// more often without progress than the store allows (a run that kills
    /// every process driving it): how often, and the limit. The runtime
    /// then ends the run `failed` (`recovery_exhausted`) instead of running
    /// it again. `None` for a store without such takeovers (the default).
    fn claims_exhausted(&self) -> Option<ClaimsExhausted> {
        None
    }
}

/// A run taken over `claims` times since its last checkpoint, more than
/// the `max_claims` the store allows ([`RunHandle::claims_exhausted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimsExhausted {
    pub claims: u64,
    pub max_claims: u64,
}

/// Where runs, records and receipts are kept.
pub trait RunStore: Send + Sync {
    /// Creates agent run `run_id` and locks it; [`StoreError::RunExists`]
    /// when it exists.
    fn create_run(&self, run_id: &str) -> Result<Box<dyn RunHandle>, StoreError>;
    /// Locks agent run `run_id`, reads it back strictly, and drops history
    /// written after its last checkpoint (an attempt the checkpoint does not
    /// cover did not happen as far as the run is concerned).
    fn open_run(&self, run_id: &str) -> Result<(Box<dyn RunHandle>, LoadedRun), StoreError>;
    /// Reads agent run `run_id` back strictly, without locking it.
    fn read_run(&self, run_id: &str) -> Result<LoadedRun, StoreError>;
    /// Who holds agent run `run_id`'s lock or lease now, seen without
    /// waiting and without taking it ([`Holder::Nobody`] for a run that is
    /// not held).
    fn holder(&self, run_id: &str) -> Result<Holder, StoreError>;
    /// Writes verified agent run `run_id` in the file store's layout,
    /// `<out>/runs/<run_id>/` (`state.json`, `plan.json`, `history.jsonl`,
    /// `audit.jsonl`), with the same seal and chains, and returns the
    /// folder. A store whose runs are such folders already has nothing to
    /// export.
    fn export_run(&self, run_id: &str, out: &Path) -> Result<PathBuf, StoreError> {
        let _ = (run_id, out);
        Err(StoreError::Unsupported("`export` reads a database store: the file store's runs are folders already"))
    }
    /// The agent runs of this workspace a worker may take up, oldest
    /// first (a hint: taking one up claims it and verifies it). Only a
    /// shared store has them: with the file store a run is continued by
    /// `resume` on its machine.
    fn runnable_runs(&self) -> Result<Vec<Runnable>, StoreError> {
        Err(StoreError::Unsupported("`worker` needs a database store (`--store postgres://…`)"))
    }
    /// Whether the store is shared between processes (and machines), so
    /// that workers may take up its runs ([`RunStore::runnable_runs`]) and
    /// runs may be queued. `false` (the default): the file store, whose
    /// runs are continued on their machine.
    fn shared(&self) -> bool {
        false
    }
    /// Waits up to `timeout` for a hint that a run may have become
    /// runnable (another process gave a lease back); `true` when one came.
    /// A hint only: callers poll as well. Without hints, it just waits.
    fn wait_for_runnable(&self, timeout: std::time::Duration) -> bool {
        std::thread::sleep(timeout);
        false
    }
    /// Records agent run `run_id` as queued with its submitted `request`,
    /// durably, without driving it: a worker of this workspace starts it
    /// ([`RunStore::claim_queued`]). [`StoreError::RunExists`] when the id
    /// is taken. Only a shared store queues: with the file store a run is
    /// driven by the command that starts it.
    fn queue_run(&self, run_id: &str, request: &str) -> Result<(), StoreError> {
        let _ = (run_id, request);
        Err(StoreError::Unsupported(
            "`--queue` needs a database store (`--store postgres://…`): with the file store there is no worker, \
             a run is driven by the command that starts it",
        ))
    }
    /// Claims the oldest queued run of this workspace nobody is starting
    /// (or whose starter's lease expired before its first checkpoint),
    /// other than those in `skip` (runs this caller could not start), in
    /// one guarded statement; `None` when there is none.
    fn claim_queued(&self, skip: &[String]) -> Result<Option<QueuedClaim>, StoreError> {
        let _ = skip;
        Ok(None)
    }
    /// Claims queued run `run_id` (to cancel it); [`StoreError::Locked`]
    /// when a worker is starting it, [`StoreError::NotFound`] when it is
    /// not queued.
    fn claim_queued_run(&self, run_id: &str) -> Result<QueuedClaim, StoreError> {
        Err(StoreError::NotFound { id: run_id.to_string(), path: PathBuf::from("queue") })
    }
    /// Queued run `run_id`, if it is one.
    fn queued_run(&self, run_id: &str) -> Result<Option<QueuedRun>, StoreError> {
        let _ = run_id;
        Ok(None)
    }
    /// Where agent run `run_id`'s checkpoint is (for messages and links).
    fn run_state_location(&self, run_id: &str) -> String;
    /// Where this workspace's runs are kept (for messages).
    fn runs_place(&self) -> RunsPlace;
    /// Every agent run, newest first.
    fn list_runs(&self) -> Result<Vec<RunListing>, StoreError>;
    /// Every record of `kind` that has a checkpoint, newest first (by its
    /// `created_at`; unreadable ones last, listed all the same).
    fn list_records(&self, kind: RecordKind) -> Result<Vec<RunListing>, StoreError>;
    /// The ids of the records of `kind` of this workspace that may not have
    /// ended and that nobody may hold: what the service's scan takes up (it
    /// reads each one again under its lock). The default is every record;
    /// a database store asks its index.
    fn unfinished_records(&self, kind: RecordKind) -> Result<Vec<String>, StoreError> {
        Ok(self.list_records(kind)?.into_iter().map(|listing| listing.run_id).collect())
    }

    /// Creates record `id` of `kind` and locks it.
    fn create_record(&self, kind: RecordKind, id: &str) -> Result<Box<dyn RecordHandle>, StoreError>;
    /// Locks record `id` of `kind` and reads it back strictly.
    fn open_record(&self, kind: RecordKind, id: &str) -> Result<(Box<dyn RecordHandle>, LoadedRecord), StoreError>;
    /// Reads record `id` of `kind` back strictly, without locking it;
    /// [`StoreError::NotFound`] when it has no checkpoint yet.
    fn read_record(&self, kind: RecordKind, id: &str) -> Result<LoadedRecord, StoreError>;
    /// Who holds record `id` of `kind` now (see [`RunStore::holder`]).
    fn record_holder(&self, kind: RecordKind, id: &str) -> Result<Holder, StoreError>;

    /// The receipt for idempotency key `key`, if any.
    fn get_receipt(&self, key: &str) -> Result<Option<Receipt>, ReceiptError>;
    /// Writes a receipt durably.
    fn put_receipt(&self, receipt: &Receipt) -> Result<(), StoreError>;
    /// Removes the receipt for `key` (no error when there is none).
    fn remove_receipt(&self, key: &str) -> Result<(), StoreError>;

    /// Makes every write made through this store before the call durable.
    /// A store whose every write is durable when it returns has nothing to
    /// do (the default, and the file store of the command line); under
    /// group commit (the service) this is the barrier shared with
    /// concurrent writers, which the service passes before it answers.
    fn make_durable(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Opens the store of a workspace: how the runtime and the service get a
/// [`RunStore`] without naming its implementation (injected through
/// [`crate::runtime::RuntimeEnv`]).
pub trait StoreFactory: Send + Sync {
    fn open(&self, workspace: &Path, sealer: &Sealer) -> Arc<dyn RunStore>;

    /// [`StoreFactory::open`], with `fresh` to name the workspace when a
    /// shared store needs an id for it and it has none yet (the database
    /// store: `<workspace>/.planrun/id`). The file store needs none.
    fn open_identified(&self, workspace: &Path, sealer: &Sealer, fresh: &dyn Fn() -> String) -> Arc<dyn RunStore> {
        let _ = fresh;
        self.open(workspace, sealer)
    }

    /// The factory of the same stores for many concurrent writers of
    /// `workspace` sharing their durability barriers (group commit), when
    /// this kind of store has such a mode; `None` keeps this factory (the
    /// default: every write durable on its own). The service asks for it.
    fn group_commit(&self, _workspace: &Path) -> std::io::Result<Option<Box<dyn StoreFactory>>> {
        Ok(None)
    }
}

/// The one create-unique loop: takes ids from `next_id` and creates with
/// `create` until an id is free, skipping taken ones
/// ([`StoreError::RunExists`]) at most `attempts` times (the id
/// generator's: [`CREATE_ATTEMPTS`] for random ids). Any other error ends
/// the loop at once.
pub fn create_unique<H>(
    attempts: usize,
    mut next_id: impl FnMut() -> String,
    mut create: impl FnMut(&str) -> Result<H, StoreError>,
) -> Result<(String, H), StoreError> {
    let mut attempt = 1;
    loop {
        let id = next_id();
        match create(&id) {
            Ok(handle) => return Ok((id, handle)),
            Err(StoreError::RunExists { .. }) if attempt < attempts => attempt += 1,
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_unique_skips_taken_ids_and_stops_on_other_errors() {
        let mut counter = 0;
        let taken = ["id-1", "id-2"];
        let (id, ()) = create_unique(
            CREATE_ATTEMPTS,
            || {
                counter += 1;
                format!("id-{counter}")
            },
            |id| {
                if taken.contains(&id) {
                    Err(StoreError::RunExists { id: id.into(), path: "runs".into() })
                } else {
                    Ok(())
                }
            },
        )
        .expect("a free id");
        assert_eq!(id, "id-3");

        let mut tries = 0;
        let locked = create_unique(
            CREATE_ATTEMPTS,
            || "x".to_string(),
            |_| -> Result<(), StoreError> {
                tries += 1;
                Err(StoreError::Locked { id: "x".into() })
            },
        );
        assert!(matches!(locked, Err(StoreError::Locked { .. })));
        assert_eq!(tries, 1, "only `RunExists` is retried");

        let mut tries = 0;
        let full = create_unique(
            CREATE_ATTEMPTS,
            || "x".to_string(),
            |id| -> Result<(), StoreError> {
                tries += 1;
                Err(StoreError::RunExists { id: id.into(), path: "runs".into() })
            },
        );
        assert!(matches!(full, Err(StoreError::RunExists { .. })));
        assert_eq!(tries, CREATE_ATTEMPTS, "bounded");

        // A counter (the test clock's ids) skips every taken id, however
        // many runs the workspace holds.
        let mut counter = 0;
        let (id, ()) = create_unique(
            usize::MAX,
            || {
                counter += 1;
                format!("id-{counter}")
            },
            |id| -> Result<(), StoreError> {
                let number: u32 = id.trim_start_matches("id-").parse().expect("a counted id");
                if number <= 150 { Err(StoreError::RunExists { id: id.into(), path: "runs".into() }) } else { Ok(()) }
            },
        )
        .expect("past the taken ones");
        assert_eq!(id, "id-151");
    }
}
