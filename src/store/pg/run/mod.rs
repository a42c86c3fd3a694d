//! [`PgRun`]: an agent run leased by this process, its log, history and
//! plan kept until the next checkpoint (the [`RunHandle`] impl). How its
//! checkpoints are sent is in `checkpoint.rs`.

mod checkpoint;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio_postgres::types::ToSql;

use crate::fence::Fence;
use crate::store::records::audit::LineRef;
use crate::store::records::head::{Links, PendingHead, plan_bytes};
use crate::store::records::version::compare_version;
use crate::store::{
    ApprovalDecision, ApprovalUse, ChildNoteFile, ClaimsExhausted, LoadedRun, NewEvent, RunHandle, RunRecords,
    RunState, Sealer, StepRecord, StoreError,
};

use super::approvals;
use super::lease::{HandleParts, HeldLease, refusal};
use super::lines::{event_line, line_text};
use super::session::{Session, connect, execute};
use super::sql;
use super::verify::EventRow;
#[cfg(test)]
pub(super) use checkpoint::{DEFERRED_READS_FOR, DEFERRED_READS_MAX};
#[cfg(not(test))]
use checkpoint::{DEFERRED_READS_FOR, DEFERRED_READS_MAX};
use checkpoint::{DeferredHead, InFlight};

/// An agent run leased by this process.
pub(super) struct PgRun {
    /// The workspace's folder on this machine, where the run's shell child
    /// is noted (`RunHandle::child_note`).
    workspace: Option<PathBuf>,
    /// The statements go through it, guarded by the lease.
    session: Arc<Session>,
    lease: HeldLease,
    location: PathBuf,
    sealer: Sealer,
    /// The version of the last checkpoint this handle wrote (kept or sent).
    stored_version: u64,
    /// The version the database holds, as far as this handle knows: the
    /// guard of its next statement. Behind `stored_version` while read
    /// checkpoints are kept in the handle (`deferred`).
    committed_version: u64,
    audit_seq: u64,
    audit_hash: Option<String>,
    history_records: u64,
    history_hash: Option<String>,
    /// The plan's text and link, once written; `plan_stored` once committed.
    plan: Option<(String, String)>,
    plan_stored: bool,
    /// Appended since the last checkpoint, committed with the next one.
    events: Vec<EventRow>,
    history: Vec<(i64, String)>,
    /// What the coming head line carries that no row holds yet, as in
    /// the file store (`head.rs`).
    pending: PendingHead,
    /// A decision on the frozen action, written with the next checkpoint.
    decision: Option<ApprovalDecision>,
    /// The last checkpoint was committed asynchronously
    /// ([`RunHandle::checkpoint_reads`]) and no synchronous commit of this
    /// run followed it yet.
    unsynced: bool,
    /// The read checkpoints kept in the handle and not sent yet
    /// ([`RunHandle::checkpoint_reads`]): the last one's head.
    deferred: Option<DeferredHead>,
    /// Kept read checkpoints sent without waiting (when as many were kept
    /// as a handle keeps): the run reads on while the server writes them;
    /// the answer is taken before anything else is sent.
    in_flight: Option<InFlight>,
}

impl PgRun {
    /// The handle of a run made of `parts`, with its shell child noted
    /// in `workspace` (this machine's folder, when known); `loaded` when
    /// the run has a checkpoint (it was claimed, not created).
    pub(super) fn new(parts: HandleParts, workspace: Option<PathBuf>, loaded: Option<&LoadedRun>) -> PgRun {
        let HandleParts { session, lease, sealer, location } = parts;
        let mut run = PgRun {
            workspace,
            session,
            lease,
            location,
            sealer,
            stored_version: 0,
            committed_version: 0,
            audit_seq: 0,
            audit_hash: None,
            history_records: 0,
            history_hash: None,
            plan: None,
            plan_stored: false,
            events: Vec::new(),
            history: Vec::new(),
            pending: PendingHead::default(),
            decision: None,
            unsynced: false,
            deferred: None,
            in_flight: None,
        };
        if let Some(loaded) = loaded {
            run.stored_version = loaded.state.state_version;
            run.committed_version = loaded.state.state_version;
            run.audit_seq = loaded.audit_tail.seq;
            run.audit_hash = loaded.audit_tail.hash.clone();
            run.history_records = loaded.history.len() as u64;
            run.history_hash = loaded.heads.history_hash.clone();
            run.plan = Some((String::new(), loaded.heads.plan_hash.clone()));
            run.plan_stored = true;
        }
        run
    }

    fn serialize_error(&self, message: impl std::fmt::Display) -> StoreError {
        StoreError::Io {
            action: "serialize",
            path: self.location.clone(),
            source: std::io::Error::other(message.to_string()),
        }
    }

    /// Adds `event` as the next audit row (a head line when `sealed`).
    fn push_event(&mut self, event: NewEvent<'_>, sealed: bool) -> Result<u64, StoreError> {
        let line =
            event_line(self.lease.id(), self.audit_seq + 1, self.audit_hash.as_deref(), event, sealed, &self.sealer)
                .map_err(|error| self.serialize_error(error))?;
        let hash = self.sealer.link(line.as_bytes());
        self.audit_seq += 1;
        self.events.push(EventRow { seq: i64::try_from(self.audit_seq).unwrap_or(i64::MAX), line, hash: hash.clone() });
        self.audit_hash = Some(hash);
        Ok(self.audit_seq)
    }

    /// The head line of checkpoint `state` (not added yet), its link, and
    /// the checkpoint it carries (the compact head is made of it when sent:
    /// [`full_payload`](crate::store::records::head::full_payload)).
    pub(super) fn head_line(
        &self,
        state: &RunState,
    ) -> Result<(EventRow, String, serde_json::Map<String, Value>), StoreError> {
        let Some((_, plan_hash)) = &self.plan else {
            return Err(self.serialize_error("a run's first checkpoint comes after its plan is stored"));
        };
        let checkpoint = self
            .pending
            .checkpoint(state, Links { plan_hash, history_hash: self.history_hash.as_deref() })
            .map_err(|error| self.serialize_error(error))?;
        let head = self.pending.line(&checkpoint).map_err(|error| self.serialize_error(error))?;
        let seq = self.audit_seq + 1;
        let event = LineRef {
            seq,
            ts: &head.held.ts,
            run_id: self.lease.id(),
            event_type: head.columns().event_type,
            step_id: head.columns().step_id,
            status: head.columns().status,
            details: &head.details,
            prev_hash: self.audit_hash.as_deref(),
        };
        let line = line_text(&event, true, &self.sealer).map_err(|error| self.serialize_error(error))?;
        let head_hash = self.sealer.link(line.as_bytes());
        let row = EventRow { seq: i64::try_from(seq).unwrap_or(i64::MAX), line, hash: head_hash.clone() };
        Ok((row, head_hash, checkpoint))
    }
}

impl RunHandle for PgRun {
    fn run_id(&self) -> &str {
        self.lease.id()
    }

    fn records(&self) -> RunRecords {
        RunRecords::Database(self.location.display().to_string())
    }

    fn audit_seq(&self) -> u64 {
        self.pending.seq(self.audit_seq)
    }

    fn audit_hash(&self) -> Option<&str> {
        // The last line written; a held head line's link is known once the
        // checkpoint has written it.
        self.audit_hash.as_deref()
    }

    fn stored_version(&self) -> u64 {
        self.stored_version
    }

    fn append_event(&mut self, event: NewEvent<'_>) -> Result<u64, StoreError> {
        let mut pending = std::mem::take(&mut self.pending);
        let appended = pending.append(event, self.audit_seq, |event| self.push_event(event, false));
        self.pending = pending;
        appended
    }

    fn append_history(&mut self, record: &StepRecord) -> Result<(), StoreError> {
        let line = serde_json::to_string(record).map_err(|error| self.serialize_error(error))?;
        self.history_hash = Some(self.sealer.chain(self.history_hash.as_deref(), line.as_bytes()));
        self.history_records += 1;
        self.history.push((i64::try_from(self.history_records).unwrap_or(i64::MAX), line));
        self.pending.record(record);
        Ok(())
    }

    fn write_plan(&mut self, plan: &Value) -> Result<(), StoreError> {
        let bytes = plan_bytes(plan).map_err(|error| self.serialize_error(error))?;
        let text = String::from_utf8(bytes).map_err(|error| self.serialize_error(error))?;
        let hash = self.sealer.link(text.as_bytes());
        self.plan = Some((text, hash));
        self.pending.plan(plan.clone());
        Ok(())
    }

    /// The checkpoint, if the stored `state_version` is `expected`: the
    /// held `state_saved`/`run_finished` event becomes the head line (the
    /// checkpoint, the step records since the previous head, on the first
    /// head the plan, sealed: the file store's line), `runs.state` the
    /// compact head of that line, all committed in one transaction.
    fn checkpoint(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        self.write_checkpoint(state, expected, true)
    }

    /// The checkpoint after a read. A run's read checkpoints in a row are
    /// kept in the handle and sent together, in one statement: when
    /// [`DEFERRED_READS_MAX`] are kept or the first of them is older than
    /// [`DEFERRED_READS_FOR`] (at the next read's checkpoint), committed
    /// without waiting for the write-ahead log's flush and without waiting
    /// for the answer, which is taken before the next statement; and
    /// before anything else this handle writes ([`RunHandle::make_durable`]
    /// before an effect, a pause or an end, a use of an approval),
    /// synchronously. Until then the database holds the checkpoint before
    /// them: a crash (or a server crash that loses the asynchronous commit)
    /// loses them, never tears them, and the run reads again from there.
    /// The lines are the same either way. The first checkpoint (the plan)
    /// and one with a decision are sent at once, synchronously.
    fn checkpoint_reads(&mut self, state: &RunState, expected: u64) -> Result<(), StoreError> {
        if !self.plan_stored || self.decision.is_some() {
            return self.write_checkpoint(state, expected, false);
        }
        compare_version(self.lease.id(), self.stored_version, expected)?;
        // A refusal or failure of the statement in flight stops the run now.
        self.settle(false)?;
        // A holder whose lease's deadline passed keeps nothing either.
        self.lease.before_write()?;
        let (row, head_hash, checkpoint) = self.head_line(state)?;
        self.events.push(row);
        self.pending.written();
        self.audit_seq += 1;
        self.audit_hash = Some(head_hash.clone());
        self.stored_version = state.state_version;
        let (reads, since) = self.deferred.as_ref().map_or((1, Instant::now()), |kept| (kept.reads + 1, kept.since));
        self.deferred = Some(DeferredHead {
            checkpoint,
            head_hash,
            version: state.state_version,
            audit_seq: self.audit_seq,
            history_records: self.history_records,
            status: state.status.as_str().to_string(),
            events: self.events.len(),
            history: self.history.len(),
            reads,
            since,
        });
        if reads >= DEFERRED_READS_MAX || since.elapsed() >= DEFERRED_READS_FOR {
            self.send_deferred(false, false)?;
        }
        Ok(())
    }

    /// After an asynchronous checkpoint: one guarded, synchronous commit
    /// (the lease renewed if the checkpoint is still the stored one), so
    /// the effect that follows never starts on a checkpoint a server crash
    /// lost: then this is refused and nothing runs.
    ///
    /// Read checkpoints the handle kept are sent now, synchronously, in
    /// one statement instead.
    fn make_durable(&mut self) -> Result<(), StoreError> {
        self.settle(true)?;
        if self.deferred.is_some() {
            return self.send_deferred(true, true);
        }
        if !self.unsynced {
            return Ok(());
        }
        let sent = self.lease.before_write()?;
        let key = self.lease.key().clone();
        let expected = self.committed_version;
        let version = i64::try_from(expected).unwrap_or(i64::MAX);
        let written = self.session.idempotent(move |pool| {
            let key = key.clone();
            async move {
                let client = connect(&pool).await?;
                let params: [&(dyn ToSql + Sync); 6] =
                    [&key.kind, &key.id, &key.owner, &key.token, &version, &key.secs];
                if execute(&client, sql::CHECKPOINT_DURABLE, &params, "make the checkpoint durable").await? == 1 {
                    return Ok(());
                }
                Err(refusal(&client, &key, expected).await)
            }
        });
        self.lease.after_write(sent, written)?;
        self.unsynced = false;
        Ok(())
    }

    fn record_decision(&mut self, decision: ApprovalDecision) -> Result<(), StoreError> {
        self.decision = Some(decision);
        Ok(())
    }

    /// One transaction before the approved action runs: the lease and the
    /// loaded version guard it, then the approval's row is used
    /// (`approvals.rs`). The step's `approval_verified` is the last event
    /// appended; the stored head is the last one committed.
    fn consume_approval(&mut self, approval: &ApprovalUse) -> Result<(), StoreError> {
        self.send_deferred(true, true)?;
        let key = self.lease.key().clone();
        let head = self.audit_seq - self.events.len() as u64;
        let seqs = (self.stored_version, head, self.audit_seq);
        let approval = approval.clone();
        self.session.call(move |pool| async move { approvals::consume(&pool, &key, seqs, &approval).await })
    }

    /// Read checkpoints still kept are dropped: the database holds the
    /// checkpoint before them, from which the run reads again.
    fn release(mut self: Box<Self>) -> Result<(), StoreError> {
        // The statement in flight is answered before the lease is given
        // back (whatever the answer: the run is given back either way).
        let _ = self.settle(true);
        self.deferred = None;
        self.lease.release()
    }

    fn fence(&self) -> Fence {
        self.lease.fence()
    }

    fn child_note(&self) -> Option<ChildNoteFile> {
        let note = |workspace: &PathBuf| workspace.join(".planrun").join("children").join(self.lease.id());
        self.workspace.as_ref().map(|workspace| ChildNoteFile::transient(note(workspace)))
    }

    fn claims_exhausted(&self) -> Option<ClaimsExhausted> {
        self.lease.claims_exhausted()
    }
}

impl Drop for PgRun {
    /// A statement still in flight is answered before the lease is given
    /// back (by the lease's own drop, after this).
    fn drop(&mut self) {
        if let Some(flight) = self.in_flight.take() {
            let _ = flight.answer.wait();
        }
    }
}
