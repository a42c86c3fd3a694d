//! Atomic file replacement: temp file in the same folder, then rename, so
//! that a reader (or a crash) sees the old content or the new, never a mix.
//! [`write_atomic`] makes it durable on its own (fsync of the file, rename,
//! fsync of the folder); [`replace_unsynced`] leaves durability to a shared
//! barrier (group commit, see `group_commit.rs`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` durably.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, bytes, File::sync_all)?;
    File::open(folder_of(path))?.sync_all()
}

/// Replaces `path` with `bytes` without syncing: `before_rename` runs
/// between writing the temp file and renaming it into place (a barrier
/// there makes the new file whole whenever it exists); the rename is made
/// durable by the next barrier.
pub fn replace_unsynced(path: &Path, bytes: &[u8], before_rename: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    replace_with(path, bytes, |_| before_rename())
}

fn replace_with(path: &Path, bytes: &[u8], before_rename: impl FnOnce(&File) -> io::Result<()>) -> io::Result<()> {
    let temp = temp_path(path);
    {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).open(&temp)?;
        file.write_all(bytes)?;
        before_rename(&file)?;
    }
    fs::rename(&temp, path)
}

fn folder_of(path: &Path) -> &Path {
    path.parent().unwrap_or_else(|| Path::new("."))
}

pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    folder_of(path).join(format!(".{name}.tmp"))
}
