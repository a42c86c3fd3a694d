//! `runs/<run_id>/.child`: where the file store keeps the note of the shell
//! child a run's step is waiting for (see `tools/children.rs`). A hint for
//! the next process that continues the run on this machine, not a record:
//! not sealed, not synced (after a power loss the child is gone too), not
//! part of what `verify` checks. It is opened once per process and
//! overwritten in place at each shell step (one `pwrite`; notes of one
//! length, so it is never truncated), and removed when it is taken.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// The note file of one run.
#[derive(Debug)]
pub struct ChildNoteFile {
    path: PathBuf,
    /// Opened at the first note; closed when the note is taken.
    file: Mutex<Option<File>>,
}

impl ChildNoteFile {
    /// The note at `path`.
    pub fn at(path: PathBuf) -> ChildNoteFile {
        ChildNoteFile { path, file: Mutex::new(None) }
    }

    /// Replaces the note with `note`, which is as long as every note the
    /// caller writes (best effort: a note that cannot be written only loses
    /// the clean-up).
    pub fn write(&self, note: &str) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if file.is_none() {
            *file = OpenOptions::new().create(true).write(true).truncate(false).open(&self.path).ok();
        }
        if let Some(file) = file.as_ref() {
            let _ = file.write_all_at(note.as_bytes(), 0);
        }
    }

    /// The note, removed.
    pub fn take(&self) -> Option<String> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).take();
        let note = fs::read_to_string(&self.path).ok()?;
        let _ = fs::remove_file(&self.path);
        Some(note)
    }
}
