//! The injected environment: clock, id generator, run store.
//!
//! The run store is the file store unless `--store` / `PLANRUN_STORE` names
//! another ([`RuntimeEnv::select_store`]): a PostgreSQL store is connected
//! and its schema checked once, at start-up, so that a bad URL, an
//! unreachable server or an unmigrated schema stops a command before it
//! reads or writes anything.
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

use crate::store::{self, FileStores, OnWait, RunStore, Sealer, StoreFactory, StoreOptions};

/// A source of the current time, and the one way the runtime waits.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
    /// Waits `duration` (a retry's backoff). The test clock does not
    /// sleep: its time moves on by `duration` instead.
    fn sleep(&self, duration: std::time::Duration);
}

/// The real clock, rounded to milliseconds.
pub struct SystemClock;

impl Clock for SystemClock {
    #[expect(clippy::disallowed_methods, reason = "the one reader of the wall clock")]
    fn now(&self) -> Timestamp {
        let now = Timestamp::now();
        now.round(Unit::Millisecond).unwrap_or(now)
    }

    fn sleep(&self, duration: std::time::Duration) {
        std::thread::sleep(duration);
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

    fn sleep(&self, duration: std::time::Duration) {
        let ms = i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
        self.next_ms.fetch_add(ms, Ordering::SeqCst);
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
    /// A workspace's id (`<workspace>/.planrun/id`), made on first use of
    /// a database store.
    Workspace,
}

impl IdKind {
    pub const ALL: [IdKind; 4] = [IdKind::Run, IdKind::Bridge, IdKind::Controller, IdKind::Workspace];

    /// `run`, `br`, `ctrl`, `ws`.
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Run => "run",
            IdKind::Bridge => "br",
            IdKind::Controller => "ctrl",
            IdKind::Workspace => "ws",
        }
    }

    fn index(self) -> usize {
        match self {
            IdKind::Run => 0,
            IdKind::Bridge => 1,
            IdKind::Controller => 2,
            IdKind::Workspace => 3,
        }
    }
}

/// The one source of generated ids. Uniqueness is not trusted to it: ids
/// are created with [`crate::store::create_unique`], which skips taken ones.
pub trait IdGen: Send + Sync {
    fn next_id(&self, kind: IdKind, clock: &dyn Clock) -> String;
    /// How many taken ids a create skips before it gives up
    /// ([`crate::store::create_unique`]).
    fn attempts(&self) -> usize {
        crate::store::CREATE_ATTEMPTS
    }
}

/// `br-20261130T044336Z-3f9a2c`: the prefix, the start time (so ids sort
/// by it), a random suffix. Agent run ids carry no prefix
/// (`20261130T044336Z-3f9a2c`), as the README documents.
pub struct SystemIds;

impl IdGen for SystemIds {
    #[expect(clippy::disallowed_methods, reason = "the one source of fresh random ids")]
    fn next_id(&self, kind: IdKind, clock: &dyn Clock) -> String {
        let stamp = clock.now().strftime("%Y%m%dT%H%M%SZ").to_string();
        let random = uuid::Uuid::now_v7().simple().to_string();
        let suffix = &random[random.len() - 6..];
        match kind {
            IdKind::Run => format!("{stamp}-{suffix}"),
            // Shared by every machine that mounts the workspace: the whole
            // random part, not six digits of it.
            IdKind::Workspace => format!("ws-{random}"),
            _ => format!("{}-{stamp}-{suffix}", kind.prefix()),
        }
    }
}

/// `run-0001`, `run-0002`, …; `br-0001`, …; `ctrl-0001`, …: one counter
/// per kind, so that every kind's ids are stable whatever the others do.
#[derive(Default)]
pub struct SequentialIds {
    next: [AtomicU64; 4],
}

impl IdGen for SequentialIds {
    fn next_id(&self, kind: IdKind, _clock: &dyn Clock) -> String {
        format!("{}-{:04}", kind.prefix(), self.next[kind.index()].fetch_add(1, Ordering::SeqCst) + 1)
    }

    /// Every id: each process counts from 1, so one started on a workspace
    /// that holds many runs skips them all (the counter only grows, and the
    /// store holds finitely many).
    fn attempts(&self) -> usize {
        usize::MAX
    }
}

/// Where the documented crash hook stops the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Just before the step's effect (for a keyed step, after its intent
    /// receipt is written).
    BeforeEffect,
    /// After the step's effect and its receipt, before the checkpoint.
    AfterEffect,
    /// After the effect, before its receipt is completed (the outcome is
    /// then unknowable: `tool_result_uncertain` on resume).
    BeforeReceipt,
    /// After the checkpoint that follows the step's attempt (a step
    /// boundary).
    AfterCheckpoint,
}

/// The test hook
/// `PLANRUN_CRASH_AT=<step_id>:before_effect|after_effect|before_receipt|after_checkpoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrashAt {
    pub step_id: String,
    pub point: CrashPoint,
}

impl CrashAt {
    /// Parses `<step_id>:<point>`, the point one of `before_effect`,
    /// `after_effect`, `before_receipt` and `after_checkpoint`.
    pub fn parse(text: &str) -> Result<CrashAt, String> {
        const POINTS: &str = "`before_effect`, `after_effect`, `before_receipt` or `after_checkpoint`";
        let (step_id, point) =
            text.rsplit_once(':').ok_or_else(|| format!("`{text}` is not `<step_id>:<point>` (point {POINTS})"))?;
        let point = match point {
            "before_effect" => CrashPoint::BeforeEffect,
            "after_effect" => CrashPoint::AfterEffect,
            "before_receipt" => CrashPoint::BeforeReceipt,
            "after_checkpoint" => CrashPoint::AfterCheckpoint,
            other => return Err(format!("unknown crash point `{other}`: use {POINTS}")),
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
    /// How `http` steps resolve host names: the system, or the stub of the
    /// documented test hook `PLANRUN_TEST_RESOLVE=name=ADDR[,ADDR…][;…]`.
    pub resolver: Arc<dyn crate::tools::http::Resolve>,
    /// Test hook `PLANRUN_MODEL_ENDPOINT`: every agent step's model is
    /// asked there, over the OpenAI-compatible protocol (a scenario's
    /// scripted model).
    pub model_endpoint: Option<String>,
}

impl RuntimeEnv {
    pub fn system() -> Self {
        RuntimeEnv {
            clock: Box::new(SystemClock),
            ids: Box::new(SystemIds),
            stores: Box::new(FileStores),
            sealer: Sealer::plain(),
            crash_at: None,
            resolver: Arc::new(crate::tools::http::SystemResolver),
            model_endpoint: None,
        }
    }

    /// The run store of `workspace`, sealing with this environment's sealer.
    pub fn store(&self, workspace: &Path) -> Arc<dyn RunStore> {
        let fresh = || self.ids.next_id(IdKind::Workspace, self.clock.as_ref());
        self.stores.open_identified(workspace, &self.sealer, &fresh)
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
            resolver: Arc::new(crate::tools::http::SystemResolver),
            model_endpoint: None,
        }
    }
}

/// One variable of the process environment (`None` when unset or not
/// UTF-8). The one place planrun reads its environment (`clippy.toml` bans
/// `std::env::var` everywhere else): a command reads what it needs at
/// start-up and passes it in.
#[expect(clippy::disallowed_methods, reason = "the one reader of the process environment")]
pub fn process_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

impl RuntimeEnv {
    /// The environment a command runs with, from the process environment:
    /// the real clock and ids, or the deterministic test ones when the
    /// documented test hook `PLANRUN_TEST_CLOCK=<RFC 3339 instant>` is set;
    /// HMAC seals when `PLANRUN_HMAC_KEY` is set (and not empty); the crash
    /// hook `PLANRUN_CRASH_AT=<step_id>:<point>`; the resolver stub of
    /// `PLANRUN_TEST_RESOLVE`.
    pub fn from_process() -> Result<RuntimeEnv, String> {
        let mut env = match process_var("PLANRUN_TEST_CLOCK") {
            Some(start) => start.parse().map(RuntimeEnv::fixed).map_err(|error| {
                format!("`PLANRUN_TEST_CLOCK` must be an RFC 3339 instant such as `2026-01-01T00:00:00Z`: {error}")
            })?,
            None => RuntimeEnv::system(),
        };
        env.sealer = match process_var("PLANRUN_HMAC_KEY") {
            Some(key) if !key.is_empty() => Sealer::keyed(key.into_bytes()),
            _ => Sealer::plain(),
        };
        if let Some(text) = process_var("PLANRUN_CRASH_AT") {
            env.crash_at = Some(CrashAt::parse(&text).map_err(|error| format!("`PLANRUN_CRASH_AT`: {error}"))?);
        }
        if let Some(text) = process_var("PLANRUN_TEST_RESOLVE") {
            let stub = crate::tools::http::StubResolver::parse(&text)
                .map_err(|error| format!("`PLANRUN_TEST_RESOLVE`: {error}"))?;
            env.resolver = Arc::new(stub);
        }
        env.model_endpoint = process_var("PLANRUN_MODEL_ENDPOINT").filter(|endpoint| !endpoint.is_empty());
        Ok(env)
    }
}

impl RuntimeEnv {
    /// Uses the store at `location` (`file`, or a `postgres://` URL) for
    /// every run this command touches ([`store::open`]). Refuses a
    /// malformed location, an unreachable database and a schema that is
    /// not migrated to this planrun's version, before anything is written.
    /// `node_id` (a worker's `--node-id`) prefixes the owner id of the
    /// leases this process takes, so that an operator sees which machine
    /// holds a run.
    pub fn select_store(&mut self, location: &str, node_id: Option<&str>) -> Result<(), String> {
        self.use_store(location, StoreOptions { node_id, on_wait: None, var: &process_var })
    }

    /// As [`RuntimeEnv::select_store`], for a process that runs until it is
    /// stopped (`worker`, `serve`): a database that does not answer yet
    /// (refused, timed out, starting up) is waited for, with jittered
    /// exponential backoff, and `on_wait` hears each failed attempt (its
    /// message and the delay before the next); later calls wait up to a
    /// lease length for a database that went away. Every other refusal
    /// is immediate, as for `select_store`.
    pub fn select_store_waiting(
        &mut self,
        location: &str,
        node_id: Option<&str>,
        on_wait: OnWait<'_>,
    ) -> Result<(), String> {
        self.use_store(location, StoreOptions { node_id, on_wait: Some(on_wait), var: &process_var })
    }

    fn use_store(&mut self, location: &str, options: StoreOptions<'_>) -> Result<(), String> {
        self.stores = store::open(location, options).map_err(|error| error.to_string())?;
        Ok(())
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
                IdKind::Workspace => assert!(id.starts_with("ws-") && id.len() == 3 + 32, "{id}"),
                _ => assert!(
                    id.starts_with(&format!("{}-", kind.prefix())) && id.len() == kind.prefix().len() + 1 + body_len,
                    "{id}"
                ),
            }
        }
    }
}
