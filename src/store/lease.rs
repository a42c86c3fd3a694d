//! [`Lease`]: the exclusive hold a writer has on one run (or record)
//! folder. In the file store it is an `flock` on the folder's `.lock` file,
//! released when the lease is dropped and by the kernel when the process
//! ends (even by a crash), so a lease can never outlive its holder. A
//! database store would hold a row lock or a lease with an expiry instead;
//! the handles only need "held while I exist".

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::store::StoreError;
use crate::store::error::io_error;

/// An exclusive, non-blocking lock on one folder.
#[derive(Debug)]
pub struct Lease {
    _file: File,
}

impl Lease {
    /// Takes the lock on `<folder>/.lock`; [`StoreError::Locked`] when
    /// another holder (this process or another) has it.
    pub fn take(folder: &Path, id: &str) -> Result<Lease, StoreError> {
        let lock_path = folder.join(".lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_error("create", &lock_path))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)
            .map_err(|_| StoreError::Locked { id: id.to_string() })?;
        Ok(Lease { _file: file })
    }
}
