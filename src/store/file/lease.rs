//! [`Lease`]: the exclusive hold a writer has on one run (or record)
//! folder. In the file store it is an `flock` on the folder itself (its
//! open directory), released when the lease is dropped and by the kernel
//! when the process ends (even by a crash), so a lease can never outlive
//! its holder. The lock is on the folder's inode, so it moves with the
//! folder when a new run's folder is renamed into place, and it costs no
//! file of its own. A database store would hold a row lock or a lease with
//! an expiry instead; the handles only need "held while I exist".
//!
//! [`Lease::holder`] says whether a live process holds a folder's lock
//! (`runs` and `show` tell a run being driven from one whose process died)
//! without waiting and without taking anything from a holder.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use crate::store::error::io_error;
use crate::store::{Holder, StoreError};

/// An exclusive, non-blocking lock on one folder.
#[derive(Debug)]
pub struct Lease {
    _folder: File,
}

impl Lease {
    /// Takes the lock on `folder`; [`StoreError::Locked`] when another
    /// holder (this process or another) has it.
    pub fn take(folder: &Path, id: &str) -> Result<Lease, StoreError> {
        let handle = File::open(folder).map_err(io_error("open", folder))?;
        let lock = || rustix::fs::flock(&handle, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        // A probe ([`Lease::holder`]) holds a shared lock for an instant:
        // tried again a few times, so that it never passes for a holder.
        let mut locked = lock();
        for _ in 0..PROBE_RETRIES {
            if locked.is_ok() {
                break;
            }
            std::thread::sleep(PROBE_WAIT);
            locked = lock();
        }
        locked.map_err(|_| StoreError::Locked { id: id.to_string() })?;
        Ok(Lease { _folder: handle })
    }

    /// Who holds the lock on `folder` now, without waiting: a shared lock
    /// is tried (it cannot be had while a holder has the exclusive one, so
    /// nothing is taken from a live holder) and given back at once. A held
    /// lock names its process where `/proc/locks` does (Linux).
    pub fn holder(folder: &Path) -> io::Result<Holder> {
        let handle = File::open(folder)?;
        match rustix::fs::flock(&handle, rustix::fs::FlockOperation::NonBlockingLockShared) {
            // Closing the folder gives the shared lock back.
            Ok(()) => Ok(Holder::Nobody),
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let metadata = handle.metadata()?;
                Ok(Holder::Process(lock_owner(metadata.dev(), metadata.ino())))
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// How many times [`Lease::take`] tries again when the lock is held, and
/// how long it waits before each: longer than a probe holds it.
const PROBE_RETRIES: u32 = 3;
const PROBE_WAIT: Duration = Duration::from_millis(2);

/// The pid of the process whose `flock` is on the file `dev`/`ino`, from
/// `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 4242 fe:00:5505150 0 EOF`);
/// `None` where it cannot be read.
fn lock_owner(dev: u64, ino: u64) -> Option<u32> {
    let file = format!("{:02x}:{:02x}:{ino}", rustix::fs::major(dev), rustix::fs::minor(dev));
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().filter(|line| !line.contains("->")).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // (A process waiting for a lock is listed with `->`: skipped.)
        let at = fields.iter().position(|field| *field == "FLOCK")?;
        (fields.get(at + 2) == Some(&"WRITE") && fields.get(at + 4) == Some(&file.as_str()))
            .then(|| fields.get(at + 3)?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_no_file_of_its_own() {
        let dir = tempfile::tempdir().expect("temp dir");
        let first = Lease::take(dir.path(), "r").expect("free");
        assert!(matches!(Lease::take(dir.path(), "r"), Err(StoreError::Locked { .. })), "held");
        drop(first);
        let again = Lease::take(dir.path(), "r").expect("released on drop");
        let moved = dir.path().with_extension("moved");
        std::fs::rename(dir.path(), &moved).expect("rename");
        assert!(matches!(Lease::take(&moved, "r"), Err(StoreError::Locked { .. })), "moves with the folder");
        drop(again);
        assert_eq!(std::fs::read_dir(&moved).expect("list").count(), 0, "the lock is no file");
        std::fs::rename(&moved, dir.path()).expect("rename back");
    }

    #[test]
    fn the_holder_is_seen_without_taking_the_lock() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(Lease::holder(dir.path()).expect("probe"), Holder::Nobody);
        let held = Lease::take(dir.path(), "r").expect("free");
        let expected = if cfg!(target_os = "linux") { Some(std::process::id()) } else { None };
        assert_eq!(Lease::holder(dir.path()).expect("probe"), Holder::Process(expected));
        assert!(matches!(Lease::take(dir.path(), "r"), Err(StoreError::Locked { .. })), "still held");
        drop(held);
        assert_eq!(Lease::holder(dir.path()).expect("probe"), Holder::Nobody);
        let _again = Lease::take(dir.path(), "r").expect("a probe leaves nothing held");
    }
}
