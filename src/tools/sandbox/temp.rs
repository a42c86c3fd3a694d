//! The private temporary folders of sandboxed programs (their `TMPDIR`),
//! under the system's temporary folder (`$TMPDIR`, else `/tmp`).
//!
//! Each folder's name tells which process made it:
//! `planrun-step-<pid>-<start>-<namespace>-XXXXXX`, the process's id, its
//! start time (clock ticks after boot, field 22 of `/proc/<pid>/stat`: a
//! later process given the same id starts later), the inode of its pid
//! namespace (`/proc/self/ns/pid`: the same id names another process in
//! another namespace, say a container sharing `/tmp`) and six random
//! letters and digits. A process that ends normally removes its folders
//! ([`remove_spare_temp_folders`]); one killed (`SIGKILL`, a crash, the
//! machine's power) cannot, so the first time a process needs a new folder
//! it removes those of processes that have ended ([`sweep`]): one read of
//! the temporary folder per process, nothing per step.
//!
//! Left alone: a folder of a process that still runs (or whose end cannot
//! be told), of another pid namespace, of another user; anything that is
//! not a directory (a symbolic link or a file of that name); names not
//! exactly of this form, among them the `planrun-step-XXXXXX` folders of
//! earlier versions, which name no process (one may belong to an older
//! `planrun serve` still running: docs/effects-sandbox.md says how to
//! remove them by hand).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Mutex, Once, OnceLock, PoisonError};

use rustix::io::Errno;
use rustix::process::{Pid, geteuid, test_kill_process};
use tempfile::TempDir;

use crate::tools::process;

/// The start of every folder's name.
const PREFIX: &str = "planrun-step-";
/// How many random letters and digits end a folder's name.
const RANDOM: usize = 6;

/// Temporary folders of steps that have ended, emptied, for the next steps
/// of this process: making and removing a folder for each step was the
/// largest part of the sandbox's cost (a `mkdir` and an `rmdir` on the
/// system's temporary folder, about 0.2 ms of CPU and, on ext4, 3 ms of
/// waiting; docs/performance.md).
static SPARE: Mutex<Vec<TempDir>> = Mutex::new(Vec::new());

/// Removes the temporary folders kept for later steps (the front end calls
/// it before the process ends).
pub fn remove_spare_temp_folders() {
    let spare = std::mem::take(&mut *SPARE.lock().unwrap_or_else(PoisonError::into_inner));
    drop(spare);
}

/// A temporary folder for one program: a spare one, or a new one.
pub(super) fn spare_or_new() -> io::Result<TempDir> {
    let spare = SPARE.lock().unwrap_or_else(PoisonError::into_inner).pop();
    match spare {
        Some(folder) => Ok(folder),
        None => new_folder(),
    }
}

/// Keeps `folder` for the next program of this process once it is emptied
/// (one that cannot be emptied is removed, as far as it can be).
pub(super) fn keep(folder: TempDir) {
    if empty(folder.path()).is_ok() {
        SPARE.lock().unwrap_or_else(PoisonError::into_inner).push(folder);
    }
}

/// A new temporary folder named after this process; the first one made
/// removes the folders of processes that have ended.
pub(super) fn new_folder() -> io::Result<TempDir> {
    static SWEPT: Once = Once::new();
    let base = std::env::temp_dir();
    let owner = Owner::this_process();
    SWEPT.call_once(|| {
        if let Some(owner) = owner {
            sweep(&base, owner);
        }
    });
    // Where `/proc` cannot tell who this process is, the name tells no one.
    let prefix = owner.map_or_else(|| PREFIX.to_string(), |owner| owner.prefix());
    tempfile::Builder::new().prefix(&prefix).rand_bytes(RANDOM).tempdir_in(base)
}

/// Removes everything in `folder` (symbolic links removed, never followed).
fn empty(folder: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// The process a folder's name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    pid: u32,
    /// Clock ticks after boot (`/proc/<pid>/stat`, field 22).
    start: u64,
    /// The inode of its pid namespace.
    namespace: u64,
}

impl Owner {
    /// This process, as `/proc` sees it (`None` where it cannot tell).
    fn this_process() -> Option<Owner> {
        static THIS: OnceLock<Option<Owner>> = OnceLock::new();
        *THIS.get_or_init(|| {
            let this = process::this_process()?;
            let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
            let namespace = link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()?;
            Some(Owner { pid: this.pid, start: this.started(), namespace })
        })
    }

    /// The start of the names of this owner's folders.
    fn prefix(&self) -> String {
        format!("{PREFIX}{}-{}-{}-", self.pid, self.start, self.namespace)
    }

    /// The owner `name` names, when it is exactly a folder's name (the
    /// prefix, then six letters and digits).
    fn of_name(name: &str) -> Option<Owner> {
        let mut fields = name.strip_prefix(PREFIX)?.split('-');
        let mut number = || fields.next().filter(|text| text.bytes().all(|byte| byte.is_ascii_digit()));
        let (pid, start, namespace) = (number()?.parse().ok()?, number()?.parse().ok()?, number()?.parse().ok()?);
        let random = fields.next()?;
        let owner = Owner { pid, start, namespace };
        let exact = fields.next().is_none()
            && random.len() == RANDOM
            && random.bytes().all(|byte| byte.is_ascii_alphanumeric())
            // No leading zeros, no other spelling of the same numbers.
            && name.len() == owner.prefix().len() + RANDOM;
        exact.then_some(owner)
    }

    /// Whether the process may still run: `false` only when `/proc` shows
    /// it a zombie or another process under its id (a later start), or no
    /// process has the id.
    fn may_run(&self) -> bool {
        match process::stat(self.pid) {
            Some((now, zombie)) => !zombie && now.started() == self.start,
            // Hidden from this `/proc` (`hidepid`) or gone: the kernel tells.
            None => i32::try_from(self.pid)
                .ok()
                .and_then(Pid::from_raw)
                .is_none_or(|pid| test_kill_process(pid) != Err(Errno::SRCH)),
        }
    }
}

/// Removes the folders in `base` made by processes of `this` one's pid
/// namespace that have ended: directories of this user only, never
/// followed through a symbolic link; what cannot be removed stays.
fn sweep(base: &Path, this: Owner) {
    let Ok(entries) = std::fs::read_dir(base) else { return };
    let user = geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(Owner::of_name) else { continue };
        if owner.namespace != this.namespace || owner == this {
            continue;
        }
        let path = entry.path();
        let Ok(metadata) = std::fs::symlink_metadata(&path) else { continue };
        if !metadata.file_type().is_dir() || metadata.uid() != user || owner.may_run() {
            continue;
        }
        // Most are empty (kept for a next step); a folder's content goes
        // too, never through a symbolic link, even one put in its place
        // since.
        if std::fs::remove_dir(&path).is_err() {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_read_back_exactly_and_nothing_else_is() {
        let owner = Owner { pid: 4242, start: 123_456, namespace: 4_026_531_836 };
        let name = format!("{}aZ09xY", owner.prefix());
        assert_eq!(name, "planrun-step-4242-123456-4026531836-aZ09xY");
        assert_eq!(Owner::of_name(&name), Some(owner));
        for other in [
            "planrun-step-aZ09xY",
            "planrun-step-4242-123456-4026531836-aZ09x",
            "planrun-step-4242-123456-4026531836-aZ09xYz",
            "planrun-step-4242-123456-4026531836-aZ0-xY",
            "planrun-step-4242-123456-4026531836-aZ09xY-",
            "planrun-step-04242-123456-4026531836-aZ09xY",
            "planrun-step-+4242-123456-4026531836-aZ09xY",
            "planrun-step-4242-123456-aZ09xY",
            "planrun-step-4242--4026531836-aZ09xY",
            "planrun-step-99999999999-123456-4026531836-aZ09xY",
            "xplanrun-step-4242-123456-4026531836-aZ09xY",
        ] {
            assert_eq!(Owner::of_name(other), None, "{other}");
        }
    }

    #[test]
    fn this_process_may_run_and_one_started_at_another_time_not() {
        let this = Owner::this_process().expect("/proc tells");
        assert_eq!(this.pid, std::process::id());
        assert!(this.may_run());
        assert!(!Owner { start: this.start + 1, ..this }.may_run(), "another process under the same id");
    }

    #[test]
    fn a_process_that_has_ended_but_is_not_reaped_yet_runs_no_more() {
        let mut child = std::process::Command::new("true").spawn().expect("start `true`");
        let pid = child.id();
        let start = process::stat(pid).expect("its stat, a zombie's included").0.started();
        let owner = Owner { pid, start, ..Owner::this_process().expect("/proc tells") };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while owner.may_run() {
            assert!(std::time::Instant::now() < deadline, "`true` never ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(process::stat(pid).is_some_and(|(_, zombie)| zombie), "not reaped yet");
        child.wait().expect("reap `true`");
        assert!(!owner.may_run(), "gone");
    }
}
