//! `write_file` and `read_file`, confined to the workspace.
//!
//! Every operation goes through the workspace's cap-std [`Dir`] after the
//! lexical check, so `..`, absolute paths and escaping symlinks are refused
//! by the operating system too. The final component is never followed as a
//! symlink, only regular files are read or replaced, reads and writes are
//! capped, and writes are atomic (temp file in the same folder, fsync,
//! rename).
//!
//! [`target_content`] answers a keyed write's reconciliation question —
//! "does the target already hold exactly this content?" — by the SHA-256 of
//! the file against that of the intended content, through the same
//! confinement as the writes. It is what a recovery can ask the file system
//! itself instead of trusting its own note (the runtime does, for a keyed
//! `write_file` whose own receipt says only `started`).

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::fs::{Dir, OpenOptions};

use crate::confine::{PathDenied, Workspace};
use crate::digest::sha256_hex;
use crate::model::FailureClass;

/// Why a file tool failed.
#[derive(Debug)]
pub enum FileError {
    /// Confinement refused the path (→ `security_denied`).
    Denied(PathDenied),
    /// The file does not exist.
    NotFound { path: String },
    /// The path names a directory, a device, a FIFO… (→ `file_error`).
    NotRegular { path: String },
    /// The file or the content is larger than the policy allows.
    TooLarge { path: String, size: u64, limit: u64 },
    /// The file is not valid UTF-8.
    NotUtf8 { path: String },
    /// Any other I/O failure.
    Io { path: String, op: &'static str, source: io::Error },
}

impl FileError {
    /// The failure class this error is reported with.
    pub fn class(&self) -> FailureClass {
        match self {
            FileError::Denied(_) => FailureClass::SecurityDenied,
            _ => FailureClass::FileError,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Denied(denied) => denied.fmt(f),
            FileError::NotFound { path } => write!(f, "`{path}` was not found"),
            FileError::NotRegular { path } => write!(f, "`{path}` is not a regular file"),
            FileError::TooLarge { path, size, limit } => {
                write!(f, "`{path}` is too large: {size} bytes, the limit is {limit} bytes")
            }
            FileError::NotUtf8 { path } => write!(f, "`{path}` is not valid UTF-8 text"),
            FileError::Io { path, op, source } => {
                let source = source.to_string().to_lowercase();
                write!(f, "cannot {op} `{path}`: {source}")
            }
        }
    }
}

impl std::error::Error for FileError {}

impl From<PathDenied> for FileError {
    fn from(denied: PathDenied) -> Self {
        FileError::Denied(denied)
    }
}

/// ELOOP: `O_NOFOLLOW` met a symlink as the final component.
const ELOOP: i32 = 40;

/// Maps an error from an operation through the `Dir` to a [`FileError`]:
/// cap-std reports an escape as `PermissionDenied` without an OS code.
fn classify(rel: &str, op: &'static str, err: io::Error) -> FileError {
    if err.raw_os_error() == Some(ELOOP) {
        return FileError::Denied(PathDenied::symlink(rel, "the final component is a symlink and is never followed"));
    }
    if err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none() {
        return FileError::Denied(PathDenied::symlink(rel, "a symlink or `..` leads outside the workspace"));
    }
    match err.kind() {
        io::ErrorKind::NotFound => FileError::NotFound { path: rel.to_owned() },
        io::ErrorKind::IsADirectory => FileError::NotRegular { path: rel.to_owned() },
        _ => FileError::Io { path: rel.to_owned(), op, source: err },
    }
}

/// Reads a workspace file as UTF-8 text, at most `max_bytes` bytes.
pub fn read_file(ws: &Workspace, rel: &str, max_bytes: u64) -> Result<String, FileError> {
    let bytes = read_bytes(ws, rel, max_bytes)?;
    String::from_utf8(bytes).map_err(|_| FileError::NotUtf8 { path: rel.to_owned() })
}

/// What a write's target holds, compared with the content meant for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetContent {
    /// There is no file at the path.
    Missing,
    /// The file holds exactly the intended bytes (same SHA-256).
    Matches { sha256: String },
    /// The file holds something else; `sha256` is the file's digest.
    Differs { sha256: String },
}

/// Whether the workspace file `rel` already holds exactly `content`, by
/// SHA-256. Confined like every file tool (a denied path is an error, never
/// an answer); a file larger than `max_bytes` is `TooLarge`, not read.
pub fn target_content(ws: &Workspace, rel: &str, content: &str, max_bytes: u64) -> Result<TargetContent, FileError> {
    let bytes = match read_bytes(ws, rel, max_bytes) {
        Ok(bytes) => bytes,
        Err(FileError::NotFound { .. }) => return Ok(TargetContent::Missing),
        Err(error) => return Err(error),
    };
    let sha256 = sha256_hex(&bytes);
    if sha256 == sha256_hex(content.as_bytes()) {
        Ok(TargetContent::Matches { sha256 })
    } else {
        Ok(TargetContent::Differs { sha256 })
    }
}

/// The bytes of a regular workspace file, at most `max_bytes`.
fn read_bytes(ws: &Workspace, rel: &str, max_bytes: u64) -> Result<Vec<u8>, FileError> {
    let checked = ws.check_path(rel)?;
    let path = checked.as_path();
    let mut options = OpenOptions::new();
    options
        .read(true)
        .follow(FollowSymlinks::No)
        // A FIFO must not block the open; regular files ignore this.
        .nonblock(true);
    let mut file = ws.dir().open_with(&path, &options).map_err(|err| classify(rel, "open", err))?;
    let meta = file.metadata().map_err(|err| classify(rel, "stat", err))?;
    if !meta.is_file() {
        return Err(FileError::NotRegular { path: rel.to_owned() });
    }
    if meta.len() > max_bytes {
        return Err(FileError::TooLarge { path: rel.to_owned(), size: meta.len(), limit: max_bytes });
    }
    let mut bytes = Vec::new();
    (&mut file).take(max_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(|err| classify(rel, "read", err))?;
    let size = bytes.len() as u64;
    if size > max_bytes {
        return Err(FileError::TooLarge { path: rel.to_owned(), size, limit: max_bytes });
    }
    Ok(bytes)
}

/// Writes `content` to a workspace file atomically, creating missing parent
/// folders inside the workspace. Returns the number of bytes written.
/// How [`write_file`] makes what it wrote durable.
#[derive(Clone, Copy)]
pub enum WriteSync<'a> {
    /// The new file's `fsync` before it replaces the target, then the
    /// folder's (the command line: nobody to share a sync with).
    Own,
    /// A barrier shared with the service's concurrent writers (its group
    /// commit on the workspace's file system), waited for twice: once
    /// before the rename (the new file's bytes) and once after it (the
    /// folder entry). A target in a folder on another file system (a mount
    /// inside the workspace) gets its own syncs.
    Shared(&'a (dyn Fn() -> io::Result<()> + Send + Sync)),
}

pub fn write_file(
    ws: &Workspace,
    rel: &str,
    content: &str,
    max_bytes: u64,
    sync: WriteSync<'_>,
) -> Result<u64, FileError> {
    let size = content.len() as u64;
    if size > max_bytes {
        return Err(FileError::TooLarge { path: rel.to_owned(), size, limit: max_bytes });
    }
    let checked = ws.check_path(rel)?;
    let (parent, name) = checked.split_last();
    let parent_dir = if parent.as_os_str().is_empty() {
        ws.dir().try_clone().map_err(|err| classify(rel, "open the folder of", err))?
    } else {
        open_or_create_dir(ws.dir(), &parent).map_err(|err| classify(rel, "create the folder of", err))?
    };
    match parent_dir.symlink_metadata(name) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(FileError::Denied(PathDenied::symlink(
                rel,
                "the final component is a symlink and is never followed",
            )));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(FileError::NotRegular { path: rel.to_owned() });
        }
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(classify(rel, "stat", err)),
    }
    // A folder below the workspace may be a mount of another file system.
    let sync = match sync {
        WriteSync::Shared(_) if !parent.as_os_str().is_empty() && !same_file_system(ws.dir(), &parent_dir) => {
            WriteSync::Own
        }
        sync => sync,
    };
    atomic_write(&parent_dir, name, content.as_bytes(), sync).map_err(|err| classify(rel, "write", err))?;
    Ok(size)
}

/// Whether `folder` is on the file system of the workspace `root` (the
/// one a shared barrier covers). Unknown counts as not.
fn same_file_system(root: &Dir, folder: &Dir) -> bool {
    use cap_std::fs::MetadataExt;
    match (root.dir_metadata(), folder.dir_metadata()) {
        (Ok(root), Ok(folder)) => root.dev() == folder.dev(),
        _ => false,
    }
}

/// Opens `parent` below `dir`, creating it (and its ancestors) when missing.
fn open_or_create_dir(dir: &Dir, parent: &Path) -> io::Result<Dir> {
    match dir.open_dir(parent) {
        Ok(found) => Ok(found),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            dir.create_dir_all(parent)?;
            dir.open_dir(parent)
        }
        Err(err) => Err(err),
    }
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Temp file in the same folder, made durable (its `fsync`, or the shared
/// barrier), renamed over the target, the folder made durable (its
/// `fsync`, best effort, or the shared barrier). The temp file is removed
/// on any failure before the rename.
fn atomic_write(dir: &Dir, name: &str, bytes: &[u8], sync: WriteSync<'_>) -> io::Result<()> {
    // Keep the temp name within NAME_MAX whatever the target's length.
    let mut short = name.len().min(100);
    while !name.is_char_boundary(short) {
        short -= 1;
    }
    let tmp = format!(
        ".{}.planrun-tmp-{}-{}",
        &name[..short],
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).follow(FollowSymlinks::No);
    let result = (|| {
        let mut file = dir.open_with(&tmp, &options)?;
        file.write_all(bytes)?;
        match sync {
            WriteSync::Own => file.sync_all()?,
            WriteSync::Shared(barrier) => {
                drop(file);
                barrier()?;
            }
        }
        dir.rename(&tmp, dir, name)
    })();
    if let Err(err) = result {
        let _ = dir.remove_file(&tmp);
        return Err(err);
    }
    match sync {
        // Best effort: make the rename itself durable.
        WriteSync::Own => {
            if let Ok(folder) = dir.open(".") {
                let _ = folder.sync_all();
            }
            Ok(())
        }
        // The step's record must not outlive the rename in a crash: a
        // failed barrier fails the write (the target is already replaced).
        WriteSync::Shared(barrier) => barrier(),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    use super::*;
    use crate::model::FilePolicy;

    struct Fixture {
        _tmp: tempfile::TempDir,
        outside: PathBuf,
        root: PathBuf,
        ws: Workspace,
    }

    /// `<tmp>/workspace` plus a sibling `<tmp>/workspace_evil` and a canary
    /// file `<tmp>/canary.txt` outside the workspace.
    fn fixture(deny: &[&str]) -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let outside = tmp.path().to_path_buf();
        let root = outside.join("workspace");
        fs::create_dir_all(&root).expect("mkdir");
        fs::create_dir_all(outside.join("workspace_evil")).expect("mkdir");
        fs::write(outside.join("canary.txt"), "canary").expect("canary");
        fs::write(outside.join("workspace_evil/x"), "evil").expect("evil");
        let policy =
            FilePolicy { deny: deny.iter().map(|s| s.to_string()).collect(), max_read_bytes: 64, max_write_bytes: 64 };
        let ws = Workspace::open(&root, &policy).expect("open");
        Fixture { _tmp: tmp, outside, root, ws }
    }

    /// Every file below `dir` with its content, sorted.
    fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(next) = stack.pop() {
            for entry in fs::read_dir(&next).expect("read_dir") {
                let entry = entry.expect("entry");
                let path = entry.path();
                let kind = entry.file_type().expect("file_type");
                if kind.is_dir() {
                    out.push((path.clone(), b"<dir>".to_vec()));
                    stack.push(path);
                } else if kind.is_symlink() {
                    let target = fs::read_link(&path).expect("read_link");
                    out.push((path, target.to_string_lossy().into_owned().into_bytes()));
                } else {
                    out.push((path.clone(), fs::read(&path).expect("read")));
                }
            }
        }
        out.sort();
        out
    }

    fn denied_rule(result: Result<impl fmt::Debug, FileError>) -> String {
        match result {
            Err(FileError::Denied(denied)) => denied.rule,
            other => panic!("expected a denial, got {other:?}"),
        }
    }

    #[test]
    fn denied_paths_touch_nothing() {
        let fx = fixture(&["secret/**"]);
        fs::create_dir_all(fx.root.join("inside")).expect("mkdir");
        fs::write(fx.root.join("inside/target.txt"), "inside").expect("write");
        symlink(&fx.outside, fx.root.join("outlink")).expect("symlink");
        symlink(fx.outside.join("canary.txt"), fx.root.join("final_out")).expect("symlink");
        symlink("inside/target.txt", fx.root.join("final_in")).expect("symlink");
        let cases = [
            ("../escape.txt", "files.parent"),
            ("/tmp/x", "files.absolute"),
            ("a/../../x", "files.parent"),
            ("../workspace_evil/x", "files.parent"),
            ("runs/x", "files.protected"),
            (".git/config", "files.protected"),
            ("secret/key", "files.deny[0]"),
            ("outlink/canary.txt", "files.symlink"),
            ("outlink/new.txt", "files.symlink"),
            ("outlink/sub/new.txt", "files.symlink"),
            ("final_out", "files.symlink"),
            ("final_in", "files.symlink"),
        ];
        let before = snapshot(&fx.outside);
        for (rel, rule) in cases {
            assert_eq!(denied_rule(write_file(&fx.ws, rel, "pwned", 64, WriteSync::Own)), rule, "write {rel}");
            assert_eq!(snapshot(&fx.outside), before, "write {rel} changed something");
            assert_eq!(denied_rule(read_file(&fx.ws, rel, 64)), rule, "read {rel}");
        }
        assert_eq!(fs::read_to_string(fx.outside.join("canary.txt")).expect("canary"), "canary");
        assert!(!fx.outside.join("escape.txt").exists());
        assert!(!fx.root.join("runs").exists());
        assert!(!fx.root.join(".git").exists());
        assert!(!fx.root.join("secret").exists());
    }

    #[test]
    fn target_content_compares_by_digest_through_the_confinement() {
        let fx = fixture(&["secret/**"]);
        assert_eq!(target_content(&fx.ws, "out/report.txt", "hello\n", 64).expect("missing"), TargetContent::Missing);
        write_file(&fx.ws, "out/report.txt", "hello\n", 64, WriteSync::Own).expect("write");
        let same = sha256_hex(b"hello\n");
        assert_eq!(
            target_content(&fx.ws, "out/report.txt", "hello\n", 64).expect("same"),
            TargetContent::Matches { sha256: same.clone() }
        );
        // One byte more, one byte changed: both differ, and say what is there.
        for other in ["hello\n\n", "hellO\n", ""] {
            assert_eq!(
                target_content(&fx.ws, "out/report.txt", other, 64).expect("differs"),
                TargetContent::Differs { sha256: same.clone() },
                "{other:?}"
            );
        }
        // Bytes that are not UTF-8 are compared too, never an error.
        fs::write(fx.root.join("binary"), [0xff, 0xfe]).expect("write");
        assert!(matches!(target_content(&fx.ws, "binary", "x", 64), Ok(TargetContent::Differs { .. })));
        // Confinement first: a path outside, protected or denied is refused,
        // even when what is there would match.
        symlink(fx.outside.join("canary.txt"), fx.root.join("final_out")).expect("symlink");
        for (rel, rule) in [
            ("../canary.txt", "files.parent"),
            ("final_out", "files.symlink"),
            ("runs/x", "files.protected"),
            ("secret/key", "files.deny[0]"),
        ] {
            assert_eq!(denied_rule(target_content(&fx.ws, rel, "canary", 64)), rule, "{rel}");
        }
        // Too large to read is an error, not a guess.
        fs::write(fx.root.join("big"), "x".repeat(65)).expect("write");
        assert!(matches!(target_content(&fx.ws, "big", "x", 64), Err(FileError::TooLarge { .. })));
        fs::create_dir_all(fx.root.join("folder")).expect("mkdir");
        assert!(matches!(target_content(&fx.ws, "folder", "x", 64), Err(FileError::NotRegular { .. })));
    }

    #[test]
    fn write_is_atomic_and_creates_parents() {
        let fx = fixture(&[]);
        assert_eq!(write_file(&fx.ws, "a/b/c.txt", "hello", 64, WriteSync::Own).expect("write"), 5);
        assert_eq!(fs::read_to_string(fx.root.join("a/b/c.txt")).expect("read"), "hello");
        assert_eq!(write_file(&fx.ws, "a/b/c.txt", "bye", 64, WriteSync::Own).expect("write"), 3);
        assert_eq!(read_file(&fx.ws, "a/b/c.txt", 64).expect("read"), "bye");
        assert_eq!(write_file(&fx.ws, "top.txt", "", 64, WriteSync::Own).expect("write"), 0);
        let long = "é".repeat(120);
        assert_eq!(write_file(&fx.ws, &long, "x", 64, WriteSync::Own).expect("long name"), 1);
        let names: Vec<_> = fs::read_dir(fx.root.join("a/b"))
            .expect("read_dir")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec!["c.txt"], "a temp file was left behind");
        let names: Vec<_> = fs::read_dir(&fx.root)
            .expect("read_dir")
            .map(|entry| entry.expect("entry").file_name().into_string().expect("utf8"))
            .filter(|name| name.contains("planrun-tmp"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn size_caps() {
        let fx = fixture(&[]);
        let big = "x".repeat(65);
        assert!(matches!(
            write_file(&fx.ws, "big.txt", &big, 64, WriteSync::Own),
            Err(FileError::TooLarge { size: 65, limit: 64, .. })
        ));
        assert!(!fx.root.join("big.txt").exists());
        assert_eq!(write_file(&fx.ws, "ok.txt", &big[..64], 64, WriteSync::Own).expect("write"), 64);
        fs::write(fx.root.join("big.txt"), &big).expect("write");
        let err = read_file(&fx.ws, "big.txt", 64).expect_err("too large");
        assert!(matches!(err, FileError::TooLarge { size: 65, .. }));
        assert_eq!(err.class(), FailureClass::FileError);
        assert_eq!(err.to_string(), "`big.txt` is too large: 65 bytes, the limit is 64 bytes");
        assert_eq!(read_file(&fx.ws, "ok.txt", 64).expect("read").len(), 64);
    }

    #[test]
    fn non_regular_files_are_refused() {
        let fx = fixture(&[]);
        fs::create_dir_all(fx.root.join("dir")).expect("mkdir");
        assert!(matches!(read_file(&fx.ws, "dir", 64), Err(FileError::NotRegular { .. })));
        assert!(matches!(write_file(&fx.ws, "dir", "x", 64, WriteSync::Own), Err(FileError::NotRegular { .. })));
        assert!(fx.root.join("dir").is_dir());
        let fifo = std::process::Command::new("mkfifo").arg(fx.root.join("fifo")).status();
        if fifo.map(|status| status.success()).unwrap_or(false) {
            assert!(matches!(read_file(&fx.ws, "fifo", 64), Err(FileError::NotRegular { .. })));
            assert!(matches!(write_file(&fx.ws, "fifo", "x", 64, WriteSync::Own), Err(FileError::NotRegular { .. })));
        }
    }

    /// With a shared barrier a write syncs nothing of its own: it waits
    /// for the barrier once before the rename (the new file's bytes; the
    /// target still holds the old ones then) and once after it. A barrier
    /// that fails before the rename leaves the target as it was and no
    /// temp file.
    #[test]
    fn a_write_with_a_shared_barrier_waits_for_it_before_and_after_the_rename() {
        use std::sync::Mutex;
        let fx = fixture(&[]);
        fs::write(fx.root.join("report.txt"), "old").expect("write");
        let seen = Mutex::new(Vec::new());
        let barrier = || {
            let content = fs::read_to_string(fx.root.join("report.txt")).expect("read");
            seen.lock().expect("lock").push(content);
            Ok(())
        };
        assert_eq!(write_file(&fx.ws, "report.txt", "new", 64, WriteSync::Shared(&barrier)).expect("write"), 3);
        assert_eq!(*seen.lock().expect("lock"), ["old", "new"], "before the rename, then after it");
        let failing = || Err(io::Error::other("the disk went away"));
        let err = write_file(&fx.ws, "report.txt", "newer", 64, WriteSync::Shared(&failing)).expect_err("failed");
        assert!(err.to_string().contains("the disk went away"), "{err}");
        assert_eq!(fs::read_to_string(fx.root.join("report.txt")).expect("read"), "new", "the target is as it was");
        let names: Vec<String> = fs::read_dir(&fx.root)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        assert!(names.iter().all(|name| !name.contains("planrun-tmp")), "no temp file left: {names:?}");
    }

    #[test]
    fn io_errors_name_the_path() {
        let fx = fixture(&[]);
        let err = read_file(&fx.ws, "missing.txt", 64).expect_err("missing");
        assert_eq!(err.class(), FailureClass::FileError);
        assert_eq!(err.to_string(), "`missing.txt` was not found");
        fs::write(fx.root.join("bin"), [0xff, 0xfe]).expect("write");
        assert!(matches!(read_file(&fx.ws, "bin", 64), Err(FileError::NotUtf8 { .. })));
        let err = write_file(&fx.ws, "../x", "x", 64, WriteSync::Own).expect_err("denied");
        assert_eq!(err.class(), FailureClass::SecurityDenied);
    }

    #[test]
    fn symlinked_folder_inside_is_followed_but_not_final_component() {
        let fx = fixture(&[]);
        fs::create_dir_all(fx.root.join("real")).expect("mkdir");
        symlink("real", fx.root.join("alias")).expect("symlink");
        assert_eq!(write_file(&fx.ws, "alias/f.txt", "hi", 64, WriteSync::Own).expect("write"), 2);
        assert_eq!(fs::read_to_string(fx.root.join("real/f.txt")).expect("read"), "hi");
        assert_eq!(denied_rule(write_file(&fx.ws, "alias", "x", 64, WriteSync::Own)), "files.symlink");
        assert!(fx.root.join("alias").is_symlink());
    }
}
