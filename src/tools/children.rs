//! The shell child a run is waiting for, noted so that the next process
//! that continues or cancels the run on this machine stops a child its
//! killed predecessor left running.
//!
//! A process killed with `SIGKILL` cannot kill its child (and a
//! parent-death signal needs code between `fork` and `exec`, which this
//! crate does not run), so the child's process group runs on until its own
//! timeout, beside the step that `resume` starts again. Each shell step
//! therefore notes its child's pid, the child's start time (field 22 of
//! `/proc/<pid>/stat`) and the boot id in the run's note file (the file
//! store's `runs/<run_id>/.child`; the PostgreSQL store's
//! `<workspace>/.planrun/children/<run_id>`, removed when the run pauses or
//! ends, and seen only by a takeover on the same machine), without a sync:
//! after a power loss the child is gone too. [`stop_left_over`] kills the noted process group only while that
//! exact process is still there (same boot, same start time), so a pid the
//! kernel gave to another process since is never hit. Linux only: elsewhere
//! nothing is noted.

use std::fs;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use crate::store::ChildNoteFile;

/// How long [`ChildNote::stop_left_over`] waits for a killed group's
/// leader to go.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The shell children of one run, noted in its store's note file.
#[derive(Debug)]
pub struct ChildNote {
    file: ChildNoteFile,
}

/// A child left running by a killed holder, and stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub pid: u32,
}

impl ChildNote {
    pub fn new(file: ChildNoteFile) -> ChildNote {
        ChildNote { file }
    }

    /// Notes child `pid`, just started in a process group of its own.
    pub fn started(&self, pid: u32) {
        if let Some(identity) = identity(pid) {
            self.file.write(&identity.to_string());
        }
    }

    /// Drops the note when its store keeps it outside the run's records.
    pub fn forget(&self) {
        self.file.forget();
    }

    /// Kills the noted child's process group if that very process is still
    /// running (a predecessor was killed while waiting for it), waits for
    /// it to go, and removes the note.
    pub fn stop_left_over(&self) -> Option<Stopped> {
        let noted = Identity::parse(&self.file.take()?)?;
        let pid = noted.pid;
        let live = stat(pid).is_some_and(|(identity, zombie)| !zombie && identity == noted);
        live.then(|| {
            if let Some(group) = Pid::from_raw(pid as i32) {
                let _ = kill_process_group(group, Signal::KILL);
            }
            let deadline = Instant::now() + STOP_WAIT;
            while running(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            Stopped { pid }
        })
    }
}

/// What tells one process from any other that ever had its pid.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    pid: u32,
    /// Clock ticks after boot (field 22 of `/proc/<pid>/stat`).
    started: u64,
    boot: String,
}

impl Identity {
    fn parse(text: &str) -> Option<Identity> {
        let mut fields = text.split_whitespace();
        let (pid, started, boot) = (fields.next()?.parse().ok()?, fields.next()?.parse().ok()?, fields.next()?);
        Some(Identity { pid, started, boot: boot.to_string() })
    }
}

impl std::fmt::Display for Identity {
    /// One length for every note (the note file is overwritten in place).
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(formatter, "{:>10} {:>20} {:>36}", self.pid, self.started, self.boot)
    }
}

/// Process `pid`'s identity, a zombie included, `None` when it is gone (or
/// not on Linux). A child that has already exited is noted all the same
/// (it is not reaped yet), so that every shell step writes its note.
fn identity(pid: u32) -> Option<Identity> {
    stat(pid).map(|(identity, _)| identity)
}

/// Process `pid`'s identity and whether it is a zombie, from one read of
/// `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
fn stat(pid: u32) -> Option<(Identity, bool)> {
    static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let boot = BOOT
        .get_or_init(|| fs::read_to_string("/proc/sys/kernel/random/boot_id").ok().map(|boot| boot.trim().to_string()));
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields after it.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    // Field 3 is the state (index 0 here), field 22 the start time.
    let zombie = *fields.first()? == "Z";
    let started = fields.get(19)?.parse().ok()?;
    Some((Identity { pid, started, boot: boot.clone()? }, zombie))
}

#[cfg(not(target_os = "linux"))]
fn stat(_pid: u32) -> Option<(Identity, bool)> {
    None
}

/// Whether `pid` is a live process: not gone, not a zombie (the tests of
/// killed process groups ask this too).
pub fn running(pid: u32) -> bool {
    stat(pid).is_some_and(|(_, zombie)| !zombie)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    use super::*;

    #[test]
    fn a_noted_child_still_running_is_stopped_and_a_gone_one_is_not_touched() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(".child");
        let note = ChildNote::new(ChildNoteFile::at(path.clone()));
        let mut child = Command::new("sleep").arg("30").process_group(0).spawn().expect("sleep");
        note.started(child.id());
        assert!(running(child.id()));
        // Reaped by the test once killed: it is this process's child.
        let reaper = std::thread::spawn(move || child.wait().expect("wait"));
        let stopped = note.stop_left_over().expect("stopped");
        assert!(!reaper.join().expect("reaper").success(), "killed");
        assert!(!running(stopped.pid));
        assert!(note.stop_left_over().is_none(), "the note is gone");

        let mut done = Command::new("true").process_group(0).spawn().expect("true");
        note.started(done.id());
        done.wait().expect("wait");
        assert!(note.stop_left_over().is_none(), "a child that ended is not touched");
        let stale = format!("{} 1 not-this-boot", std::process::id());
        fs::write(&path, stale).expect("a stale note");
        assert!(note.stop_left_over().is_none(), "another process under a reused pid is never hit");
        assert!(!path.exists());
    }
}
