//! `runs/<run_id>/.child`: where the file store keeps the note of the shell
//! child a run's step is waiting for (see `tools/children.rs`). A hint for
//! the next process that continues the run on this machine, not a record:
//! not sealed, not synced (after a power loss the child is gone too), not
//! part of what `verify` checks; it is overwritten in place at each shell
//! step and removed when it is taken.

use std::fs;
use std::path::PathBuf;

/// The note file of one run.
#[derive(Debug, Clone)]
pub struct ChildNoteFile {
    path: PathBuf,
}

impl ChildNoteFile {
    /// The note at `path`.
    pub fn at(path: PathBuf) -> ChildNoteFile {
        ChildNoteFile { path }
    }

    /// Replaces the note (best effort: a note that cannot be written only
    /// loses the clean-up).
    pub fn write(&self, note: &str) {
        let _ = fs::write(&self.path, note);
    }

    /// The note, removed.
    pub fn take(&self) -> Option<String> {
        let note = fs::read_to_string(&self.path).ok()?;
        let _ = fs::remove_file(&self.path);
        Some(note)
    }
}
