//! [`Lease`]: the exclusive hold a writer has on one run (or record)
//! folder. In the file store it is an `flock` on the folder itself (its
//! open directory), released when the lease is dropped and by the kernel
//! when the process ends (even by a crash), so a lease can never outlive
//! its holder. The lock is on the folder's inode, so it moves with the
//! folder when a new run's folder is renamed into place, and it costs no
//! file of its own. A database store would hold a row lock or a lease with
//! an expiry instead; the handles only need "held while I exist".

use std::fs::File;
use std::path::Path;

use crate::store::StoreError;
use crate::store::error::io_error;

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
        rustix::fs::flock(&handle, rustix::fs::FlockOperation::NonBlockingLockExclusive)
            .map_err(|_| StoreError::Locked { id: id.to_string() })?;
        Ok(Lease { _folder: handle })
    }
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
}
