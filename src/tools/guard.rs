//! The tool guard: a holder's shell children die with the holder.
//!
//! On a database store a run whose holder dies is taken over by any worker
//! of its workspace, on any machine, once the lease expires. A holder killed
//! with `SIGKILL` cannot kill its own child, and the note of that child
//! (`children.rs`) is seen only by a takeover on the same machine: without
//! more, the old tool would run on beside the step the new holder starts
//! again. A parent-death signal would need code between `fork` and `exec`,
//! which this crate does not run (`unsafe` is forbidden), so each process
//! that runs shell steps of such runs starts one guard instead: the same
//! executable, started with [`GUARD_ARG`] in a process group of its own,
//! reading a pipe whose only writer is the holder. The holder tells it each
//! child it starts (`+` and the child's identity: pid, start time, boot id)
//! and each child it is about to reap (`-` and the pid). When the holder
//! dies, however it dies, the kernel closes the pipe; the guard reads end of
//! file, kills the process group of every child still listed, and exits.
//! An exit with no child running kills nothing.
//!
//! A pid is never hit after the kernel gave it to another process: the
//! guard kills a listed group only while its leader is that very process
//! (same start time, same boot; a zombie counts), or when no process has
//! that pid any more (the leader was reaped by init and its pid is free:
//! only what is left of its group can still carry that group id).
//!
//! The holder also tells the guard each child's deadline (`=`, a pid and an
//! instant of the machine's monotonic clock): its local lease deadline
//! (`fence.rs`), told when the child starts and again whenever a renewal
//! moves it on. A holder that is frozen (`SIGSTOP`, a stalled process) or
//! cut off from the database renews nothing, so the guard kills the
//! child's group once that deadline has passed, before the database's
//! lease expires and anyone may take the run over.
//!
//! What it does not cover: a guard killed together with its holder
//! (`kill -9` of both) leaves the child to the note, as before, and so does
//! a holder killed in the instant between starting a child and telling the
//! guard; a whole machine paused (a virtual machine) pauses the guard too.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use super::process::Identity;

/// The first argument that makes the executable a guard (the command line
/// hands it to [`serve`]; it is not a command a person types).
pub const GUARD_ARG: &str = "__tool-guard";

/// This process's guard, shared by every run it holds.
pub fn shared() -> &'static ToolGuard {
    static GUARD: OnceLock<ToolGuard> = OnceLock::new();
    GUARD.get_or_init(|| ToolGuard { state: Mutex::new(GuardState::default()) })
}

/// The holder's side: the guard process and the children it was told of.
#[derive(Debug)]
pub struct ToolGuard {
    state: Mutex<GuardState>,
}

#[derive(Debug, Default)]
struct GuardState {
    process: Option<(Child, ChildStdin)>,
    /// The children told and not yet released, by pid, with the last
    /// deadline told: told again to a guard started anew (the one before
    /// died). The guard keeps the same list.
    guarded: BTreeMap<u32, Guarded>,
}

impl ToolGuard {
    /// Makes sure a guard is running: starts one when there is none or the
    /// last one died (and tells it the children still listed). Called before
    /// a child is started, so that a step whose child could not be guarded
    /// does not start.
    pub fn ready(&self) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.ready()
    }

    /// Tells the guard of child `identity` (just started, not reaped).
    pub fn guard(&self, identity: Identity) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let child = Guarded { identity, deadline_ms: None };
        let lines = child.lines();
        state.guarded.insert(child.identity.pid, child);
        state.send(&lines)
    }

    /// Tells the guard that child `pid` must not run past `deadline` (the
    /// holder's lease deadline, which moves on with each renewal).
    pub fn deadline(&self, pid: u32, deadline: Instant) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(child) = state.guarded.get_mut(&pid) else { return Ok(()) };
        let deadline_ms = monotonic_ms_at(deadline);
        child.deadline_ms = Some(deadline_ms);
        state.send(&deadline_line(pid, deadline_ms))
    }

    /// Tells the guard that child `pid` is about to be reaped (its group is
    /// killed or gone): it is no longer the guard's to kill.
    pub fn release(&self, pid: u32) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.guarded.remove(&pid).is_some() {
            // A guard that died has nothing of this child to forget.
            let _ = state.send(&format!("-{pid}\n"));
        }
    }
}

impl GuardState {
    fn ready(&mut self) -> io::Result<()> {
        let alive = match &mut self.process {
            Some((child, _)) => child.try_wait()?.is_none(),
            None => false,
        };
        if alive {
            return Ok(());
        }
        let mut child = Command::new(executable()?)
            // `ps` shows `planrun __tool-guard`.
            .arg0("planrun")
            .arg(GUARD_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .current_dir("/")
            .env_clear()
            // Not in the holder's process group: a terminal's ^C reaches the
            // holder, not its guard.
            .process_group(0)
            .spawn()
            .map_err(|error| io::Error::new(error.kind(), format!("cannot start the tool guard: {error}")))?;
        let Some(stdin) = child.stdin.take() else {
            return Err(io::Error::other("cannot start the tool guard: no pipe to it"));
        };
        let mut process = (child, stdin);
        let listed: String = self.guarded.values().map(Guarded::lines).collect();
        if !listed.is_empty() {
            process.1.write_all(listed.as_bytes())?;
        }
        self.process = Some(process);
        Ok(())
    }

    /// Sends `line`; when the guard is gone, starts another (which is told
    /// every child listed, this one included) once.
    fn send(&mut self, line: &str) -> io::Result<()> {
        let sent = match &mut self.process {
            Some((_, stdin)) => stdin.write_all(line.as_bytes()),
            None => Err(io::ErrorKind::BrokenPipe.into()),
        };
        if sent.is_ok() {
            return Ok(());
        }
        if let Some((mut child, stdin)) = self.process.take() {
            drop(stdin);
            let _ = child.kill();
            let _ = child.wait();
        }
        self.ready().map_err(|error| io::Error::new(error.kind(), format!("the tool guard is gone: {error}")))
    }
}

/// This executable, the one that serves as the guard: `/proc/self/exe` on
/// Linux, which works even when the file was replaced or removed since the
/// process started.
fn executable() -> io::Result<std::path::PathBuf> {
    if cfg!(target_os = "linux") { Ok("/proc/self/exe".into()) } else { std::env::current_exe() }
}

/// How long the guard sleeps between two reads of its pipe: a holder's
/// lines never wake it (a shell step costs its holder two small writes and
/// no context switch), and a holder's death or a passed deadline is acted
/// on within this.
const READ_EVERY: Duration = Duration::from_millis(50);

/// The monotonic clock (`CLOCK_MONOTONIC`, the same for every process of
/// the machine), in milliseconds.
fn monotonic_ms() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(now.tv_sec).unwrap_or(0) * 1000 + u64::try_from(now.tv_nsec).unwrap_or(0) / 1_000_000
}

/// Instant `at` of this process on the monotonic clock, in milliseconds.
fn monotonic_ms_at(at: Instant) -> u64 {
    let now = Instant::now();
    let ms = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    if at >= now { monotonic_ms().saturating_add(ms(at - now)) } else { monotonic_ms().saturating_sub(ms(now - at)) }
}

/// A child the guard is told of (the holder keeps the same list, to tell a
/// guard started anew).
#[derive(Debug)]
struct Guarded {
    identity: Identity,
    /// Past it (monotonic milliseconds) the child is killed, holder or not.
    deadline_ms: Option<u64>,
}

impl Guarded {
    /// What tells the guard of it: `+` and its identity, then its deadline
    /// if it has one (the lines [`take_line`] reads).
    fn lines(&self) -> String {
        let deadline = self.deadline_ms.map(|ms| deadline_line(self.identity.pid, ms)).unwrap_or_default();
        format!("+{}{deadline}", self.identity)
    }
}

/// The line that tells the guard child `pid`'s deadline.
fn deadline_line(pid: u32, deadline_ms: u64) -> String {
    format!("={pid} {deadline_ms}\n")
}

/// The guard's side (the process started with [`GUARD_ARG`], its standard
/// input the holder's pipe): reads the holder's lines until end of file,
/// killing the process group of a child whose deadline passed (its holder
/// did not renew its lease in time: frozen, or cut off), then, at end of
/// file, of every child still listed (see the module's text). Returns the
/// pids it killed.
pub fn serve(input: impl Read + AsFd) -> Vec<u32> {
    // Read what came every READ_EVERY rather than sleep in `read`.
    let _ = rustix::io::ioctl_fionbio(&input, true);
    let mut input = input;
    let mut guarded: BTreeMap<u32, Guarded> = BTreeMap::new();
    let mut killed = Vec::new();
    let mut pending = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                let complete = pending.iter().rposition(|&byte| byte == b'\n').map_or(0, |end| end + 1);
                for line in String::from_utf8_lossy(&pending[..complete]).lines() {
                    take_line(&mut guarded, line);
                }
                pending.drain(..complete);
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                let now = monotonic_ms();
                let expired: Vec<u32> = guarded
                    .iter()
                    .filter(|(_, child)| child.deadline_ms.is_some_and(|deadline| deadline <= now))
                    .map(|(pid, _)| *pid)
                    .collect();
                for pid in expired {
                    if let Some(child) = guarded.remove(&pid) {
                        killed.extend(kill_group(&child.identity));
                    }
                }
                std::thread::sleep(READ_EVERY);
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            // Nothing more can come from the holder: as its end.
            Err(_) => break,
        }
    }
    killed.extend(guarded.values().filter_map(|child| kill_group(&child.identity)));
    killed
}

/// Kills the process group `identity` led while that is only what is left
/// of it (see [`Identity::still_leads_its_group`]); its pid when it did.
fn kill_group(identity: &Identity) -> Option<u32> {
    if !identity.still_leads_its_group() {
        return None;
    }
    if let Some(group) = Pid::from_raw(identity.pid as i32) {
        // ESRCH (nothing left of the group) is fine.
        let _ = kill_process_group(group, Signal::KILL);
    }
    Some(identity.pid)
}

/// One line of the holder: `+` and a child's identity, `=`, a pid and its
/// deadline, or `-` and a pid (anything else is ignored).
fn take_line(guarded: &mut BTreeMap<u32, Guarded>, line: &str) {
    if let Some(identity) = line.strip_prefix('+').and_then(Identity::parse) {
        guarded.insert(identity.pid, Guarded { identity, deadline_ms: None });
    } else if let Some((pid, deadline)) = line.strip_prefix('=').and_then(|rest| rest.split_once(' ')) {
        if let (Ok(pid), Ok(deadline)) = (pid.parse::<u32>(), deadline.trim().parse::<u64>())
            && let Some(child) = guarded.get_mut(&pid)
        {
            child.deadline_ms = Some(deadline);
        }
    } else if let Some(pid) = line.strip_prefix('-').and_then(|pid| pid.trim().parse().ok()) {
        guarded.remove(&pid);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;
    use crate::tools::process::running;

    /// What the holder wrote, then its end: a pipe whose writer is closed.
    fn fed(text: String) -> std::io::PipeReader {
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        writer.write_all(text.as_bytes()).expect("write");
        reader
    }

    fn sleeper() -> (Child, Identity) {
        let child = Command::new("sleep").arg("30").process_group(0).spawn().expect("sleep");
        let identity = Identity::of(child.id()).expect("its identity");
        (child, identity)
    }

    #[test]
    fn at_end_of_input_the_groups_of_listed_children_are_killed() {
        let (mut child, identity) = sleeper();
        let killed = serve(fed(format!("+{}", identity)));
        assert_eq!(killed, [child.id()]);
        assert_eq!(child.wait().expect("reaped").signal(), Some(9), "killed with SIGKILL");
    }

    #[test]
    fn a_released_child_and_a_pid_of_another_process_are_never_hit() {
        let (mut released, identity) = sleeper();
        let (mut other, other_identity) = sleeper();
        // As if `other`'s pid had been another child's, whose start time was
        // another (the pid was reused since).
        let fields: Vec<String> = other_identity.to_string().split_whitespace().map(String::from).collect();
        let started: u64 = fields[1].parse().expect("start time");
        let stale = Identity::parse(&format!("{} {} {}", fields[0], started + 1, fields[2])).expect("identity");
        let input = format!("+{}-{}\n+{}garbage\n-x\n", identity, released.id(), stale);
        assert_eq!(serve(fed(input)), Vec::<u32>::new());
        assert!(running(released.id()) && running(other.id()), "neither was killed");
        for child in [&mut released, &mut other] {
            child.kill().expect("kill");
            child.wait().expect("reap");
        }
    }

    #[test]
    fn a_child_past_its_deadline_is_killed_while_the_holder_still_writes() {
        let (mut child, identity) = sleeper();
        let (mut later, later_identity) = sleeper();
        let (reader, mut writer) = std::io::pipe().expect("pipe");
        let guard = std::thread::spawn(move || serve(reader));
        let soon = monotonic_ms_at(Instant::now() + Duration::from_millis(100));
        let renewed = monotonic_ms_at(Instant::now() + Duration::from_secs(60));
        let lines = format!(
            "+{}={} {soon}\n+{}={} {soon}\n={} {renewed}\n",
            identity, identity.pid, later_identity, later_identity.pid, later_identity.pid
        );
        writer.write_all(lines.as_bytes()).expect("write");
        // The holder's end is still open: only the deadline can kill it.
        assert_eq!(child.wait().expect("reaped").signal(), Some(9), "killed at its deadline");
        assert!(running(later.id()), "a deadline renewed since is not hit");
        drop(writer);
        assert_eq!(guard.join().expect("guard"), [identity.pid, later_identity.pid], "the other one at the end");
        later.wait().expect("reaped");
    }

    #[test]
    fn a_child_listed_twice_and_reaped_since_is_only_its_groups_rest() {
        // The leader was reaped and its pid is free: killing the group hits
        // nothing else (no process has that group id).
        let (mut child, identity) = sleeper();
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert!(identity.still_leads_its_group(), "a free pid names only what is left of the group");
        let killed = serve(fed(format!("+{}+{}", identity, identity)));
        assert_eq!(killed, [identity.pid]);
    }
}
