//! Group commit: concurrent writers share one durability barrier.
//!
//! The command line makes every write durable on its own ([`Durability::PerWrite`]:
//! each file's `fsync`/`fdatasync`, no waiting for anybody). The service runs
//! many runs at once, and there one sync per file per request is what
//! bounds throughput, so it builds its store with [`Durability::Group`]:
//! writers write without syncing and then ask for a [`GroupCommit::barrier`].
//! One of the waiting writers (the leader) makes *every* write made so far
//! durable with one `syncfs(2)` on the workspace's file system and wakes the
//! others: the barrier is shared by every writer that asked for it before the
//! leader started, however many files they wrote.
//!
//! Why `syncfs` rather than a shared journal: one system call per batch, no
//! second copy of every record and no repair pass at start-up, the record
//! files stay exactly the documented layout. The trade-off: `syncfs` flushes
//! the whole file system the workspace is on, other programs' dirty data
//! included, so a barrier costs more when something else writes a lot to
//! the same file system (a compiler, a database). Put the service's
//! workspace on a file system of its own where that matters.
//!
//! A failed barrier poisons the committer: that barrier and every later one
//! fail with the first error. After a failed writeback the kernel may have
//! dropped the dirty pages and reports the error once, so a later barrier
//! that succeeds proves nothing about writes made before it (the lesson of
//! PostgreSQL's "fsyncgate"); the service answers errors until restarted.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// How a [`crate::store::FileStore`] makes its writes durable.
#[derive(Debug, Clone, Default)]
pub enum Durability {
    /// Every write syncs its own files before it returns (the command line).
    #[default]
    PerWrite,
    /// Writes wait for a barrier shared with concurrent writers (the service).
    Group(GroupCommit),
}

/// A durability barrier a tool may share (`write_file` in the service):
/// returns once every write made before the call is durable.
pub type SharedSync = Arc<dyn Fn() -> io::Result<()> + Send + Sync>;

/// The shared barrier of one workspace (cheap to clone: one committer).
#[derive(Debug, Clone)]
pub struct GroupCommit {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The workspace folder: `syncfs` flushes the file system it is on.
    anchor: File,
    batches: Mutex<Batches>,
    settled: Condvar,
}

#[derive(Debug, Default)]
struct Batches {
    /// Tickets handed out, one per barrier asked for (in order).
    issued: u64,
    /// Every ticket up to this one is durable.
    durable: u64,
    /// A leader is making a barrier right now.
    leading: bool,
    /// `syncfs` calls made.
    barriers: u64,
    /// The first failure; every barrier fails with it from then on.
    failure: Option<(io::ErrorKind, String)>,
}

impl GroupCommit {
    /// The committer of the file system `workspace` (an existing folder) is on.
    pub fn new(workspace: &Path) -> io::Result<GroupCommit> {
        let anchor = File::open(workspace)?;
        let shared = Shared { anchor, batches: Mutex::new(Batches::default()), settled: Condvar::new() };
        Ok(GroupCommit { shared: Arc::new(shared) })
    }

    /// Returns once every write this thread made before the call is durable:
    /// takes a ticket, and either waits for a barrier that started after it
    /// was taken, or (when none is being made) makes one itself for every
    /// ticket taken so far.
    pub fn barrier(&self) -> io::Result<()> {
        let mut batches = self.lock();
        batches.issued += 1;
        let ticket = batches.issued;
        loop {
            if let Some((kind, message)) = &batches.failure {
                return Err(io::Error::new(*kind, format!("an earlier durability barrier failed: {message}")));
            }
            if batches.durable >= ticket {
                return Ok(());
            }
            if batches.leading {
                batches = self.shared.settled.wait(batches).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // Every ticket issued so far was taken after its writes, and
            // the `syncfs` below starts after it was taken: it covers them.
            batches.leading = true;
            let covers = batches.issued;
            drop(batches);
            let result = sync_file_system(&self.shared.anchor);
            batches = self.lock();
            batches.leading = false;
            batches.barriers += 1;
            match result {
                Ok(()) => batches.durable = batches.durable.max(covers),
                Err(error) => batches.failure = Some((error.kind(), error.to_string())),
            }
            self.shared.settled.notify_all();
        }
    }

    /// This committer's barrier, for a tool to share.
    pub fn shared(&self) -> SharedSync {
        let commit = self.clone();
        Arc::new(move || commit.barrier())
    }

    /// How many barriers (`syncfs` calls) have been made.
    pub fn barriers(&self) -> u64 {
        self.lock().barriers
    }

    fn lock(&self) -> MutexGuard<'_, Batches> {
        // The lock guards plain counters, consistent between statements.
        self.shared.batches.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(target_os = "linux")]
fn sync_file_system(anchor: &File) -> io::Result<()> {
    rustix::fs::syncfs(anchor).map_err(io::Error::from)
}

/// Elsewhere the one portable whole-system barrier.
#[cfg(not(target_os = "linux"))]
fn sync_file_system(_anchor: &File) -> io::Result<()> {
    rustix::fs::sync();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::thread;

    use super::*;

    #[test]
    fn writers_waiting_together_share_one_syncfs() {
        let dir = tempfile::tempdir().expect("temp dir");
        let commit = GroupCommit::new(dir.path()).expect("committer");
        // A barrier in progress: writers arriving now queue behind it.
        commit.lock().leading = true;
        let writers = 8;
        let handles: Vec<_> = (0..writers)
            .map(|writer| {
                let (commit, path) = (commit.clone(), dir.path().join(format!("{writer}")));
                thread::spawn(move || {
                    std::fs::write(&path, "written").expect("write");
                    commit.barrier().expect("barrier");
                })
            })
            .collect();
        while commit.lock().issued < writers {
            thread::yield_now();
        }
        commit.lock().leading = false;
        commit.shared.settled.notify_all();
        for handle in handles {
            handle.join().expect("writer");
        }
        let batches = commit.lock();
        assert_eq!((batches.barriers, batches.durable), (1, writers), "one syncfs covered all {writers} writers");
    }

    #[test]
    fn concurrent_writers_all_return_durable() {
        let dir = tempfile::tempdir().expect("temp dir");
        let commit = GroupCommit::new(dir.path()).expect("committer");
        let (writers, rounds) = (16, 20);
        let start = Arc::new(Barrier::new(writers));
        let handles: Vec<_> = (0..writers)
            .map(|writer| {
                let (commit, start, path) = (commit.clone(), Arc::clone(&start), dir.path().join(format!("{writer}")));
                thread::spawn(move || {
                    start.wait();
                    for round in 0..rounds {
                        std::fs::write(&path, format!("{round}")).expect("write");
                        commit.barrier().expect("barrier");
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("writer");
        }
        let batches = commit.lock();
        let tickets = (writers * rounds) as u64;
        assert_eq!((batches.issued, batches.durable), (tickets, tickets));
        assert!((1..=tickets).contains(&batches.barriers), "{} barriers", batches.barriers);
    }

    #[test]
    fn a_failed_barrier_fails_every_later_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let commit = GroupCommit::new(dir.path()).expect("committer");
        commit.barrier().expect("a barrier on a healthy file system");
        commit.lock().failure = Some((io::ErrorKind::Other, "EIO".into()));
        let error = commit.barrier().expect_err("poisoned");
        assert!(error.to_string().contains("EIO"), "{error}");
        assert_eq!(commit.barriers(), 1, "no barrier is made once poisoned");
    }
}
