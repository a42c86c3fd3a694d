//! How a [`PgRun`] sends its checkpoints: one guarded statement (or a
//! transaction with the plan or a decision), synchronous or not; the read
//! checkpoints kept in the handle ([`DeferredHead`]) and the statement in
//! flight that sends them ([`InFlight`]).

use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::types::ToSql;

use crate::store::records::head::full_payload;
use crate::store::records::version::compare_version;
use crate::store::{ApprovalDecision, RunState, StoreError};

use super::PgRun;
use crate::store::pg::approvals;
use crate::store::pg::error::store_error;
use crate::store::pg::lease::refusal;
use crate::store::pg::lines::sealed_text;
use crate::store::pg::runtime::Pending;
use crate::store::pg::session::{connect, execute, query};
use crate::store::pg::sql;
use crate::store::pg::verify::EventRow;

/// Runs [`sql::CHECKPOINT`] with its 18 parameters; `false` when its
/// guard refused (nothing was written).
async fn checkpoint_written<C: GenericClient + Sync>(
    client: &C,
    params: &[&(dyn ToSql + Sync)],
) -> Result<bool, StoreError> {
    let rows = query(client, sql::CHECKPOINT, params, "write the checkpoint").await?;
    Ok(rows.first().is_some_and(|row| row.get::<_, i64>(0) == 1))
}

/// The statement that sends kept read checkpoints, not answered yet.
pub(super) struct InFlight {
    pub(super) answer: Pending<()>,
    pub(super) sent: Instant,
    /// The last of them.
    pub(super) deferred: DeferredHead,
    pub(super) asynchronous: bool,
}

/// How many read checkpoints in a row a handle keeps before it sends them
/// (in one statement: their rows and the last one's head).
pub(in crate::store::pg) const DEFERRED_READS_MAX: usize = 64;

/// How long the first of the kept read checkpoints may wait: the next
/// read's checkpoint after that sends them all.
pub(in crate::store::pg) const DEFERRED_READS_FOR: Duration = Duration::from_millis(200);

/// The last of the read checkpoints a handle keeps: its head line is the
/// last row of `events[..events]`, and it covers `history[..history]`.
pub(super) struct DeferredHead {
    /// The checkpoint its head line carries, and the line's link: the
    /// compact head (`runs.state`) is made of them when sent.
    pub(super) checkpoint: serde_json::Map<String, Value>,
    pub(super) head_hash: String,
    pub(super) version: u64,
    pub(super) audit_seq: u64,
    pub(super) history_records: u64,
    pub(super) status: String,
    pub(super) events: usize,
    pub(super) history: usize,
    /// Read checkpoints kept, and since when.
    pub(super) reads: usize,
    pub(super) since: Instant,
}

/// One checkpoint statement's content: the head, the rows before it, and
/// on a run's first checkpoint its plan or with a decision its row.
struct HeadToSend {
    text: String,
    status: String,
    finished: bool,
    version: u64,
    audit_seq: u64,
    history_records: u64,
    events: Vec<EventRow>,
    history: Vec<(i64, String)>,
    plan: Option<(String, String)>,
    decision: Option<ApprovalDecision>,
}

impl PgRun {
    /// [`RunHandle::checkpoint`](crate::store::RunHandle::checkpoint), committed synchronously, or (`synchronous`
    /// false, and it stores neither the plan nor a decision) without
    /// waiting for the write-ahead log's flush. It also sends the read
    /// checkpoints the handle kept.
    pub(super) fn write_checkpoint(
        &mut self,
        state: &RunState,
        expected: u64,
        synchronous: bool,
    ) -> Result<(), StoreError> {
        compare_version(self.lease.id(), self.stored_version, expected)?;
        self.settle(true)?;
        let (row, head_hash, checkpoint) = self.head_line(state)?;
        let seq = self.audit_seq + 1;
        let compact = full_payload(&checkpoint, seq, &head_hash);
        let text = sealed_text(&self.sealer, self.lease.id(), Value::Object(compact))?;
        // Written into the handle only once the transaction commits: a
        // refused checkpoint leaves the handle as it was.
        let mut events = self.events.clone();
        events.push(row);
        let plan = if self.plan_stored { None } else { self.plan.clone() };
        let head = HeadToSend {
            text,
            status: state.status.as_str().to_string(),
            finished: state.status.is_terminal(),
            version: state.state_version,
            audit_seq: seq,
            history_records: self.history_records,
            events,
            history: self.history.clone(),
            plan,
            decision: self.decision.clone(),
        };
        let asynchronous = self.send(head, synchronous)?;
        self.plan_stored = true;
        self.events.clear();
        self.history.clear();
        self.pending.written();
        self.decision = None;
        self.deferred = None;
        self.audit_seq = seq;
        self.audit_hash = Some(head_hash);
        self.stored_version = state.state_version;
        self.committed_version = state.state_version;
        // A synchronous commit flushes the log up to it, and so every
        // earlier commit; an asynchronous one waits for the next.
        self.unsynced = asynchronous;
        Ok(())
    }

    /// Sends the read checkpoints the handle kept (nothing when none): their
    /// rows and the last one's head, in one statement, once the statement
    /// in flight was answered; waits for the answer when `wait` (else
    /// [`PgRun::settle`] takes it later). Kept as they were when it fails,
    /// so that a later write sends them again.
    pub(super) fn send_deferred(&mut self, synchronous: bool, wait: bool) -> Result<(), StoreError> {
        self.settle(true)?;
        let Some(deferred) = self.deferred.take() else { return Ok(()) };
        match self.deferred_head(&deferred).and_then(|head| self.start_send(head, synchronous)) {
            Ok((sent, answer, asynchronous)) => {
                self.in_flight = Some(InFlight { answer, sent, deferred, asynchronous });
            }
            Err(error) => {
                self.deferred = Some(deferred);
                return Err(error);
            }
        }
        if wait { self.settle(true) } else { Ok(()) }
    }

    /// The statement that sends the kept read checkpoints up to `deferred`.
    fn deferred_head(&self, deferred: &DeferredHead) -> Result<HeadToSend, StoreError> {
        let compact = full_payload(&deferred.checkpoint, deferred.audit_seq, &deferred.head_hash);
        Ok(HeadToSend {
            text: sealed_text(&self.sealer, self.lease.id(), Value::Object(compact))?,
            status: deferred.status.clone(),
            finished: false,
            version: deferred.version,
            audit_seq: deferred.audit_seq,
            history_records: deferred.history_records,
            events: self.events[..deferred.events].to_vec(),
            history: self.history[..deferred.history].to_vec(),
            plan: None,
            decision: None,
        })
    }

    /// Takes the answer of the statement in flight, waiting for it when
    /// `wait` (else only when it is there): its rows leave the handle and
    /// its version is the stored one. A refusal or a failure is returned,
    /// and the rows stay kept, so that the next write sends them again,
    /// guarded by the version before.
    pub(super) fn settle(&mut self, wait: bool) -> Result<(), StoreError> {
        let Some(mut flight) = self.in_flight.take() else { return Ok(()) };
        let answer = if wait {
            flight.answer.wait()
        } else {
            match flight.answer.ready() {
                Some(answer) => answer,
                None => {
                    self.in_flight = Some(flight);
                    return Ok(());
                }
            }
        };
        let InFlight { sent, deferred, asynchronous, .. } = flight;
        if let Err(error) = self.lease.after_write(sent, answer) {
            // Kept ones since cover these rows too.
            self.deferred.get_or_insert(deferred);
            return Err(error);
        }
        self.events.drain(..deferred.events);
        self.history.drain(..deferred.history);
        if let Some(kept) = &mut self.deferred {
            kept.events -= deferred.events;
            kept.history -= deferred.history;
        }
        self.committed_version = deferred.version;
        self.unsynced = asynchronous;
        Ok(())
    }

    /// One checkpoint statement, guarded by the lease and by the version
    /// the database holds (`committed_version`); in a transaction with the
    /// plan or the decision when there is one. Whether it was committed
    /// asynchronously: only a statement of its own, when not `synchronous`.
    fn send(&self, head: HeadToSend, synchronous: bool) -> Result<bool, StoreError> {
        let (sent, answer, asynchronous) = self.start_send(head, synchronous)?;
        self.lease.after_write(sent, answer.wait())?;
        Ok(asynchronous)
    }

    /// [`PgRun::send`] without waiting for the answer: when it was sent,
    /// the answer, and whether it commits asynchronously.
    fn start_send(&self, head: HeadToSend, synchronous: bool) -> Result<(Instant, Pending<()>, bool), StoreError> {
        let sent = self.lease.before_write()?;
        let key = self.lease.key().clone();
        let to_i64 = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        let expected = self.committed_version;
        let HeadToSend { text, status, finished, version, audit_seq, history_records, events, history, plan, decision } =
            head;
        // A step's own checkpoint is one statement; the first one (the
        // plan) or one with a person's decision is a transaction, which
        // always commits synchronously.
        let one_statement = plan.is_none() && decision.is_none();
        let asynchronous = !synchronous && one_statement;
        let (expected_i, version) = (to_i64(expected), to_i64(version));
        let (audit_seq, history_records) = (to_i64(audit_seq), to_i64(history_records));
        let answer = self.session.begin(move |pool| async move {
            let mut client = connect(&pool).await?;
            let seqs: Vec<i64> = events.iter().map(|row| row.seq).collect();
            let lines: Vec<&str> = events.iter().map(|row| row.line.as_str()).collect();
            let hashes: Vec<&str> = events.iter().map(|row| row.hash.as_str()).collect();
            let numbers: Vec<i64> = history.iter().map(|(number, _)| *number).collect();
            let records: Vec<&str> = history.iter().map(|(_, line)| line.as_str()).collect();
            let params: [&(dyn ToSql + Sync); 18] = [
                &key.kind,
                &key.id,
                &key.owner,
                &key.token,
                &expected_i,
                &text,
                &status,
                &version,
                &audit_seq,
                &history_records,
                &finished,
                &key.secs,
                &seqs,
                &lines,
                &hashes,
                &numbers,
                &records,
                &asynchronous,
            ];
            if one_statement {
                // A step's checkpoint: the one statement, one round trip.
                if !checkpoint_written(&client, &params).await? {
                    return Err(refusal(&client, &key, expected).await);
                }
                return Ok(());
            }
            // The first checkpoint stores the plan, an approval's its row:
            // the same statement and those in one transaction.
            let transaction = client.transaction().await.map_err(store_error("start the checkpoint"))?;
            if !checkpoint_written(&transaction, &params).await? {
                return Err(refusal(&transaction, &key, expected).await);
            }
            if let Some((plan, plan_hash)) = &plan {
                execute(&transaction, sql::INSERT_PLAN, &[&key.id, plan, plan_hash], "store the plan").await?;
            }
            if let Some(decision) = &decision {
                approvals::record(&transaction, &key.id, decision).await?;
            }
            transaction.commit().await.map_err(store_error("commit the checkpoint"))
        });
        Ok((sent, answer, asynchronous))
    }
}
