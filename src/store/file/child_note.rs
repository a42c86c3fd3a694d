//! `runs/<run_id>/.child`: where the file store keeps the note of the shell
//! child a run's step is waiting for (see `tools/children.rs`). A hint for
//! the next process that continues the run on this machine, not a record:
//! not sealed, not synced (after a power loss the child is gone too), not
//! part of what `verify` checks. It is written when a step's child starts
//! and removed when that child ends (reaped) or when the note is taken, so
//! a run whose step is not waiting for a child has none.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// The note file of one run.
#[derive(Debug)]
pub struct ChildNoteFile {
    path: PathBuf,
    /// Removed once the run pauses or ends (a note kept outside the run's
    /// records: a database store's `<workspace>/.planrun/children/<id>`);
    /// the file store's `.child` stays in the run's folder.
    transient: bool,
    /// Opened at a child's note; closed when the note is removed.
    file: Mutex<Option<File>>,
}

impl ChildNoteFile {
    /// The note at `path`.
    pub fn at(path: PathBuf) -> ChildNoteFile {
        ChildNoteFile { path, transient: false, file: Mutex::new(None) }
    }

    /// The note at `path`, removed once the run pauses or ends.
    pub fn transient(path: PathBuf) -> ChildNoteFile {
        ChildNoteFile { path, transient: true, file: Mutex::new(None) }
    }

    /// Whether the note is kept outside the run's records (a database
    /// store's: its runs may be taken over on another machine).
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// Removes a transient note (see [`ChildNoteFile::transient`]).
    pub fn forget(&self) {
        if self.transient {
            self.take();
        }
    }

    /// Replaces the note with `note` (best effort: a note that cannot be
    /// written only loses the clean-up).
    pub fn write(&self, note: &str) {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if file.is_none() {
            let open = || OpenOptions::new().create(true).write(true).truncate(false).open(&self.path);
            // The folder of the notes may not exist yet (a database store's
            // notes are in `<workspace>/.planrun/children/`).
            *file =
                open().or_else(|_| self.path.parent().map_or(Ok(()), fs::create_dir_all).and_then(|()| open())).ok();
        }
        if let Some(file) = file.as_ref() {
            let _ = file.write_all_at(note.as_bytes(), 0).and_then(|()| file.set_len(note.len() as u64));
        }
    }

    /// Removes the note: its child has ended.
    pub fn remove(&self) {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).take();
        let _ = fs::remove_file(&self.path);
    }

    /// The note, removed.
    pub fn take(&self) -> Option<String> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner).take();
        let note = fs::read_to_string(&self.path).ok()?;
        let _ = fs::remove_file(&self.path);
        Some(note)
    }
}
