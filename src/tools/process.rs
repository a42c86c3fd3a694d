//! What tells one process from any other that ever had its pid: its pid,
//! its start time (field 22 of `/proc/<pid>/stat`, clock ticks after boot)
//! and the boot id. The shell children's note (`children.rs`) and the tool
//! guard (`guard.rs`) check it before they kill a process group, so that a
//! pid the kernel gave to another process since is never hit. Linux only:
//! elsewhere no process has an identity.

use std::fs;

/// What tells one process from any other that ever had its pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub pid: u32,
    /// Clock ticks after boot (field 22 of `/proc/<pid>/stat`).
    started: u64,
    boot: String,
}

impl Identity {
    /// An identity from its text (as its `Display` writes it).
    pub fn parse(text: &str) -> Option<Identity> {
        let mut fields = text.split_whitespace();
        let (pid, started, boot) = (fields.next()?.parse().ok()?, fields.next()?.parse().ok()?, fields.next()?);
        Some(Identity { pid, started, boot: boot.to_string() })
    }

    /// Process `pid`'s identity, a zombie included, `None` when it is gone
    /// (or not on Linux). A child that has already exited has one all the
    /// same until it is reaped.
    pub fn of(pid: u32) -> Option<Identity> {
        stat(pid).map(|(identity, _)| identity)
    }

    /// Whether killing the process group this process led hits only what
    /// is left of it: the leader is still this very process (a zombie
    /// counts), or no process has its pid any more (reaped, the pid free:
    /// only the rest of its group can still carry that group id). Not when
    /// another process has the pid now.
    pub fn still_leads_its_group(&self) -> bool {
        stat(self.pid).is_none_or(|(now, _)| now == *self)
    }

    /// When the process started: clock ticks after boot.
    pub fn started(&self) -> u64 {
        self.started
    }
}

impl std::fmt::Display for Identity {
    /// One line, of one length for every identity.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(formatter, "{:>10} {:>20} {:>36}", self.pid, self.started, self.boot)
    }
}

/// Process `pid`'s identity and whether it is a zombie, from one read of
/// `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
pub(super) fn stat(pid: u32) -> Option<(Identity, bool)> {
    read_stat(&pid.to_string())
}

/// This process's identity as `/proc` sees it (`/proc/self`: its pid
/// there, which is the one the other processes reading `/proc` see).
#[cfg(target_os = "linux")]
pub(super) fn this_process() -> Option<Identity> {
    read_stat("self").map(|(identity, _)| identity)
}

/// `/proc/<name>/stat`: the identity (its pid is field 1) and whether the
/// process is a zombie.
#[cfg(target_os = "linux")]
fn read_stat(name: &str) -> Option<(Identity, bool)> {
    static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let boot = BOOT
        .get_or_init(|| fs::read_to_string("/proc/sys/kernel/random/boot_id").ok().map(|boot| boot.trim().to_string()));
    let stat = fs::read_to_string(format!("/proc/{name}/stat")).ok()?;
    let pid = stat.split_once(' ')?.0.parse().ok()?;
    // The command name may hold spaces and parentheses: fields after it.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    // Field 3 is the state (index 0 here), field 22 the start time.
    let zombie = *fields.first()? == "Z";
    let started = fields.get(19)?.parse().ok()?;
    Some((Identity { pid, started, boot: boot.clone()? }, zombie))
}

#[cfg(not(target_os = "linux"))]
pub(super) fn stat(_pid: u32) -> Option<(Identity, bool)> {
    None
}

#[cfg(not(target_os = "linux"))]
pub(super) fn this_process() -> Option<Identity> {
    None
}

/// Whether `pid` is a live process: not gone, not a zombie (the tests of
/// killed process groups ask this too).
pub fn running(pid: u32) -> bool {
    stat(pid).is_some_and(|(_, zombie)| !zombie)
}
