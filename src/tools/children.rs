//! The shell child a run is waiting for, noted so that the next process
//! that continues or cancels the run on this machine stops a child its
//! killed predecessor left running.
//!
//! A process killed with `SIGKILL` cannot kill its child, so the child's
//! process group runs on until its own timeout, beside the step that
//! `resume` starts again; on a database store the tool guard (`guard.rs`)
//! kills it, and this note is the fallback for what the guard does not
//! cover. Each shell step notes its child's identity (`process.rs`: pid,
//! start time, boot id) and the step's id in the run's note file, removed
//! again when the child ends (the file store's
//! `runs/<run_id>/.child`; a database store's
//! `<workspace>/.planrun/children/<run_id>`, seen only by a takeover on the
//! same machine), without a sync:
//! after a power loss the child is gone too. [`ChildNote::stop_left_over`]
//! kills the noted process group only while that exact process is still
//! there, so a pid the kernel gave to another process since is never hit.
//! Linux only: elsewhere nothing is noted.

use std::io;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use super::guard::{self, ToolGuard};
pub use super::process::running;
use super::process::{Identity, stat};
use crate::store::ChildNoteFile;

/// How long [`ChildNote::stop_left_over`] waits for a killed group's
/// leader to go.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The shell children of one run, noted in its store's note file, and
/// told to this process's tool guard (`guard.rs`) where the store keeps the
/// note outside the run's records: a database store's, whose runs may be
/// taken over on another machine, where the note is not seen.
#[derive(Debug)]
pub struct ChildNote {
    file: ChildNoteFile,
    guard: Option<&'static ToolGuard>,
    /// The step whose children are noted now ([`ChildNote::at_step`]).
    step_id: Option<String>,
}

/// A child left running by a killed holder, and stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub pid: u32,
    /// The step that started it, as its note says (`None` for a note
    /// written before notes named their step).
    pub step_id: Option<String>,
}

/// The line of a note that names the step after the identity's line.
const STEP: &str = "step ";

impl ChildNote {
    pub fn new(file: ChildNoteFile) -> ChildNote {
        let guard = file.is_transient().then(guard::shared);
        ChildNote { file, guard, step_id: None }
    }

    /// The children noted from now on are step `step_id`'s.
    pub fn at_step(&mut self, step_id: &str) {
        self.step_id = Some(step_id.to_string());
    }

    /// Before a child is started: makes sure the tool guard runs, where
    /// children are guarded (an error means the child must not start).
    pub fn prepare(&self) -> io::Result<()> {
        self.guard.map_or(Ok(()), ToolGuard::ready)
    }

    /// Notes child `pid`, just started in a process group of its own (and
    /// tells the guard). An error means the child is not guarded: the
    /// caller kills it.
    pub fn started(&self, pid: u32) -> io::Result<()> {
        let identity = Identity::of(pid);
        if let Some(identity) = &identity {
            let step = self.step_id.as_deref().map(|step| format!("{STEP}{step}\n")).unwrap_or_default();
            self.file.write(&format!("{identity}{step}"));
        }
        match (self.guard, identity) {
            (Some(guard), Some(identity)) => guard.guard(identity),
            (Some(_), None) => Err(io::Error::other(format!("cannot guard the tool: no /proc/{pid}/stat"))),
            (None, _) => Ok(()),
        }
    }

    /// Child `pid` must not run past `deadline` (its holder's lease): the
    /// guard kills it then, even while its holder is frozen.
    pub fn deadline(&self, pid: u32, deadline: std::time::Instant) -> io::Result<()> {
        self.guard.map_or(Ok(()), |guard| guard.deadline(pid, deadline))
    }

    /// Child `pid` is about to be reaped (its group killed, nothing of it
    /// left running): the guard lets it go and its note is removed.
    pub fn reaping(&self, pid: u32) {
        if let Some(guard) = self.guard {
            guard.release(pid);
        }
        self.file.remove();
    }

    /// Drops the note when its store keeps it outside the run's records.
    pub fn forget(&self) {
        self.file.forget();
    }

    /// Kills the noted child's process group if that very process is still
    /// running (a predecessor was killed while waiting for it), waits for
    /// it to go, and removes the note.
    pub fn stop_left_over(&self) -> Option<Stopped> {
        let text = self.file.take()?;
        let noted = Identity::parse(text.lines().next()?)?;
        let step_id = text.lines().nth(1).and_then(|line| line.strip_prefix(STEP)).map(str::to_string);
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
            Stopped { pid, step_id }
        })
    }
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
        let mut note = ChildNote::new(ChildNoteFile::at(path.clone()));
        note.at_step("wait");
        let mut child = Command::new("sleep").arg("30").process_group(0).spawn().expect("sleep");
        note.started(child.id()).expect("noted");
        assert!(running(child.id()));
        // Reaped by the test once killed: it is this process's child.
        let reaper = std::thread::spawn(move || child.wait().expect("wait"));
        let stopped = note.stop_left_over().expect("stopped");
        assert!(!reaper.join().expect("reaper").success(), "killed");
        assert!(!running(stopped.pid));
        assert_eq!(stopped.step_id.as_deref(), Some("wait"), "the note names the step of its child");
        assert!(note.stop_left_over().is_none(), "the note is gone");

        let mut ended = Command::new("true").process_group(0).spawn().expect("true");
        note.started(ended.id()).expect("noted");
        assert!(path.exists());
        note.reaping(ended.id());
        ended.wait().expect("wait");
        assert!(!path.exists(), "a child's note goes when the child is reaped");

        let mut done = Command::new("true").process_group(0).spawn().expect("true");
        note.started(done.id()).expect("noted");
        done.wait().expect("wait");
        assert!(note.stop_left_over().is_none(), "a child that ended is not touched");
        let stale = format!("{} 1 not-this-boot", std::process::id());
        std::fs::write(&path, stale).expect("a stale note");
        assert!(note.stop_left_over().is_none(), "another process under a reused pid is never hit");
        assert!(!path.exists());
    }
}
