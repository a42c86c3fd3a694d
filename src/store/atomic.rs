//! Atomic file replacement: temp file in the same folder, rename; durable
//! ([`write_atomic`]: fsync of the file and of the folder) or not
//! ([`replace_unsynced`], for files that can be rebuilt from a durable log).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` so that a reader (or a crash) sees either the
/// old content or the new, never a mix, and the new content is durable.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (dir, temp) = temp_beside(path);
    {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&temp, path)?;
    File::open(dir)?.sync_all()
}

/// Replaces `path` with `bytes` so that a reader sees either the old content
/// or the new, never a mix, without making it durable: after a power loss
/// the file may be the old one, empty or missing. Only for files another,
/// durable record can rebuild (an agent run's views and its compact head).
pub fn replace_unsynced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let (_, temp) = temp_beside(path);
    {
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).open(&temp)?;
        file.write_all(bytes)?;
    }
    fs::rename(&temp, path)
}

/// `path`'s folder and the temp file `.<name>.tmp` in it.
fn temp_beside(path: &Path) -> (&Path, PathBuf) {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    (dir, dir.join(format!(".{name}.tmp")))
}
