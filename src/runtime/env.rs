//! The injected environment: clock, id generator, run store.
//!
//! Production uses [`SystemClock`] and [`SystemIds`]. Tests (and the
//! `PLANRUN_TEST_CLOCK` hook of the binary) use [`FixedClock`], which starts
//! at a given instant and advances one second per reading, and
//! [`SequentialIds`] (`run-0001`, `br-0001`, `ctrl-0001`, …), so that every
//! byte of a run's records is the same run after run.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use jiff::{Timestamp, Unit};

use crate::store::{FileStores, RunStore, Sealer, StoreFactory};

/// A source of the current time.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The real clock, rounded to milliseconds.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let now = Timestamp::now();
        now.round(Unit::Millisecond).unwrap_or(now)
    }
}

/// A clock for tests: `start`, then one `tick_ms` later at every reading.
pub struct FixedClock {
    next_ms: AtomicI64,
    tick_ms: i64,
}

impl FixedClock {
    pub fn new(start: Timestamp, tick_ms: i64) -> Self {
        FixedClock { next_ms: AtomicI64::new(start.as_millisecond()), tick_ms }
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        let ms = self.next_ms.fetch_add(self.tick_ms, Ordering::SeqCst);
        Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

/// What an id is for; each kind has its prefix and, under the test clock,
/// its own counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    /// An agent run that does not name its id (`planrun run` without `--run-id`).
    Run,
    /// A bridge run of the service (`POST /runs`).
    Bridge,
    /// A controller run of the service (`POST /controller/runs`).
    Controller,
}

impl IdKind {
    pub const ALL: [IdKind; 3] = [IdKind::Run, IdKind::Bridge, IdKind::Controller];

    /// `run`, `br`, `ctrl`.
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Run => "run",
            IdKind::Bridge => "br",
            IdKind::Controller => "ctrl",
        }
    }

    fn index(self) -> usize {
        match self {
            IdKind::Run => 0,
            IdKind::Bridge => 1,
            IdKind::Controller => 2,
        }
    }
}

/// The one source of generated ids. Uniqueness is not trusted to it: ids
/// are created with [`crate::store::create_unique`], which skips taken ones.
pub trait IdGen: Send + Sync {
    fn next_id(&self, kind: IdKind, clock: &dyn Clock) -> String;
}

/// `br-20261130T044336Z-3f9a2c`: the prefix, the start time (so ids sort
/// by it), a random suffix. Agent run ids carry no prefix
/// (`20261130T044336Z-3f9a2c`), as the README documents.
pub struct SystemIds;

impl IdGen for SystemIds {
    fn next_id(&self, kind: IdKind, clock: &dyn Clock) -> String {
        let stamp = clock.now().strftime("%Y%m%dT%H%M%SZ").to_string();
        let random = uuid::Uuid::now_v7().simple().to_string();
        let suffix = &random[random.len() - 6..];
        match kind {
            IdKind::Run => format!("{stamp}-{suffix}"),
            _ => format!("{}-{stamp}-{suffix}", kind.prefix()),
        }
    }
}

/// `run-0001`, `run-0002`, …; `br-0001`, …; `ctrl-0001`, …: one counter
/// per kind, so that every kind's ids are stable whatever the others do.
#[derive(Default)]
pub struct SequentialIds {
    next: [AtomicU64; 3],
}

impl IdGen for SequentialIds {
    fn next_id(&self, kind: IdKind, _clock: &dyn Clock) -> String {
        format!("{}-{:04}", kind.prefix(), self.next[kind.index()].fetch_add(1, Ordering::SeqCst) + 1)
    }
}

/// Where the documented crash hook stops the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// After the step's effect and its receipt, before the checkpoint.
    AfterEffect,
    /// After the effect, before its receipt is completed (the outcome is
    /// then unknowable: `tool_result_uncertain` on resume).
    BeforeReceipt,
}

/// The test hook `PLANRUN_CRASH_AT=<step_id>:after_effect|before_receipt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashAt {
    pub step_id: String,
    pub point: CrashPoint,
}

impl CrashAt {
    /// Parses `<step_id>:after_effect` or `<step_id>:before_receipt`.
    pub fn parse(text: &str) -> Result<CrashAt, String> {
        let (step_id, point) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("`{text}` is not `<step_id>:after_effect` or `<step_id>:before_receipt`"))?;
        let point = match point {
            "after_effect" => CrashPoint::AfterEffect,
            "before_receipt" => CrashPoint::BeforeReceipt,
            other => return Err(format!("unknown crash point `{other}`: use `after_effect` or `before_receipt`")),
        };
        if step_id.is_empty() {
            return Err(format!("`{text}` names no step"));
        }
        Ok(CrashAt { step_id: step_id.to_string(), point })
    }
}

/// The clock, id generator, run store, checkpoint sealer and test hooks a
/// command runs with.
pub struct RuntimeEnv {
    pub clock: Box<dyn Clock>,
    pub ids: Box<dyn IdGen>,
    /// Where runs are kept: [`FileStores`] (the documented folders) unless
    /// another store is injected.
    pub stores: Box<dyn StoreFactory>,
    pub sealer: Sealer,
    pub crash_at: Option<CrashAt>,
}

impl RuntimeEnv {
    pub fn system() -> Self {
        RuntimeEnv {
            clock: Box::new(SystemClock),
            ids: Box::new(SystemIds),
            stores: Box::new(FileStores),
            sealer: Sealer::plain(),
            crash_at: None,
        }
    }

    /// The run store of `workspace`, sealing with this environment's sealer.
    pub fn store(&self, workspace: &Path) -> Arc<dyn RunStore> {
        self.stores.open(workspace, &self.sealer)
    }

    /// The deterministic environment of tests: a [`FixedClock`] from `start`
    /// ticking one second, and [`SequentialIds`].
    pub fn fixed(start: Timestamp) -> Self {
        RuntimeEnv {
            clock: Box::new(FixedClock::new(start, 1000)),
            ids: Box::new(SequentialIds::default()),
            stores: Box::new(FileStores),
            sealer: Sealer::plain(),
            crash_at: None,
        }
    }
}

/// RFC 3339 in UTC, as written in records.
pub fn format_timestamp(timestamp: Timestamp) -> String {
    timestamp.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_clock_ticks_and_sequential_ids_count() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().expect("valid timestamp");
        let clock = FixedClock::new(start, 1000);
        assert_eq!(format_timestamp(clock.now()), "2026-01-01T00:00:00Z");
        assert_eq!(format_timestamp(clock.now()), "2026-01-01T00:00:01Z");
        let ids = SequentialIds::default();
        assert_eq!(ids.next_id(IdKind::Run, &clock), "run-0001");
        assert_eq!(ids.next_id(IdKind::Bridge, &clock), "br-0001");
        assert_eq!(ids.next_id(IdKind::Run, &clock), "run-0002");
        assert_eq!(ids.next_id(IdKind::Controller, &clock), "ctrl-0001");
        assert_eq!(ids.next_id(IdKind::Bridge, &clock), "br-0002");
    }

    #[test]
    fn system_ids_have_their_prefix_and_are_valid_run_ids() {
        for kind in IdKind::ALL {
            let id = SystemIds.next_id(kind, &SystemClock);
            assert!(crate::store::validate_run_id(&id).is_ok(), "{id}");
            // `20261130T044336Z-3f9a2c` for runs, `br-20261130T044336Z-3f9a2c` otherwise.
            let body_len = "20261130T044336Z-3f9a2c".len();
            match kind {
                IdKind::Run => assert_eq!(id.len(), body_len, "{id}"),
                _ => assert!(
                    id.starts_with(&format!("{}-", kind.prefix())) && id.len() == kind.prefix().len() + 1 + body_len,
                    "{id}"
                ),
            }
        }
    }
}
