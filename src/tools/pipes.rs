//! The child's output pipes and the wait on them: each pipe is read as it
//! fills, keeping the first bytes of stdout or the last of stderr up to a
//! cap and draining the rest (so the child never blocks), and one `poll(2)`
//! waits for the pipes and for the leader's exit together.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};

/// Which part of a stream that writes more than its cap is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// The first bytes (stdout: what a template reads).
    Head,
    /// The last bytes (stderr: where the error is).
    Tail,
}

/// One output pipe of the child and what was read from it.
pub(super) struct Output {
    /// `None` once it reached end of file (or failed).
    pub(super) pipe: Option<OwnedFd>,
    /// The bytes kept: at most `max` for [`Keep::Head`], at most twice
    /// `max` (the last `max` of them count) for [`Keep::Tail`].
    kept: Vec<u8>,
    total: u64,
    max: usize,
    keep: Keep,
}

impl Output {
    /// Takes the read end of a pipe (non-blocking from now on).
    pub(super) fn new(pipe: Option<impl Into<OwnedFd>>, max: u64, keep: Keep) -> io::Result<Output> {
        let pipe = pipe.map(Into::into);
        if let Some(pipe) = &pipe {
            rustix::io::ioctl_fionbio(pipe, true)?;
        }
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        Ok(Output { pipe, kept: Vec::new(), total: 0, max, keep })
    }

    /// Reads what the pipe holds now; closes it at end of file.
    fn read_available(&mut self, buf: &mut [u8]) {
        let Some(pipe) = self.pipe.take() else { return };
        loop {
            match rustix::io::read(&pipe, &mut *buf) {
                Ok(0) => break,
                Ok(n) => self.keep(&buf[..n]),
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    self.pipe = Some(pipe);
                    return;
                }
                Err(_) => break,
            }
        }
    }

    /// Counts `bytes` and keeps what the stream keeps of them.
    fn keep(&mut self, bytes: &[u8]) {
        self.total += bytes.len() as u64;
        match self.keep {
            Keep::Head => {
                let room = self.max.saturating_sub(self.kept.len());
                self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Keep::Tail if bytes.len() >= self.max => {
                self.kept.clear();
                self.kept.extend_from_slice(&bytes[bytes.len() - self.max..]);
            }
            Keep::Tail => {
                self.kept.extend_from_slice(bytes);
                // Moved down only past twice the cap: each byte is moved
                // at most once, and at most twice the cap is held.
                if self.kept.len() > self.max.saturating_mul(2) {
                    self.kept.drain(..self.kept.len() - self.max);
                }
            }
        }
    }

    /// The lossy text kept, the bytes written, and whether some were cut.
    /// A tail starts on a character boundary: the rest of a character cut
    /// in two is dropped.
    pub(super) fn take(self) -> (String, u64, bool) {
        let mut kept = self.kept.as_slice();
        if self.keep == Keep::Tail {
            kept = &kept[kept.len().saturating_sub(self.max)..];
            if self.total > kept.len() as u64 {
                // At most three continuation bytes (10xxxxxx) end a
                // character whose first byte was cut off.
                let partial = kept.iter().take(3).take_while(|byte| *byte & 0xC0 == 0x80).count();
                kept = &kept[partial..];
            }
        }
        let truncated = self.total > kept.len() as u64;
        (String::from_utf8_lossy(kept).into_owned(), self.total, truncated)
    }
}

/// A pidfd of the leader (Linux): readable once it has exited.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn exit_watch(pid: Pid) -> Option<OwnedFd> {
    // Kernels before 5.3 have none: the wait then asks every EXIT_POLL.
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn exit_watch(_pid: Pid) -> Option<OwnedFd> {
    None
}

/// Whether the leader has exited, leaving it unreaped (a zombie).
pub(super) fn leader_exited(pid: Pid) -> io::Result<bool> {
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    loop {
        match waitid(WaitId::Pid(pid), options) {
            Ok(status) => return Ok(status.is_some()),
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
}

/// Waits at most `wait` (for ever when `None`) for output on the open
/// pipes or for `watch` to become readable, then reads what came.
pub(super) fn wait_and_read(
    outputs: &mut [Output; 2],
    watch: Option<&OwnedFd>,
    wait: Option<Duration>,
) -> io::Result<()> {
    let events = PollFlags::IN | PollFlags::HUP | PollFlags::ERR;
    let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
    let mut polled = [false; 2];
    for (index, output) in outputs.iter().enumerate() {
        if let Some(pipe) = &output.pipe {
            fds.push(PollFd::from_borrowed_fd(pipe.as_fd(), events));
            polled[index] = true;
        }
    }
    if let Some(watch) = watch {
        fds.push(PollFd::from_borrowed_fd(watch.as_fd(), PollFlags::IN));
    }
    let timeout = wait.map(|wait| Timespec {
        tv_sec: wait.as_secs().try_into().unwrap_or(i64::MAX),
        tv_nsec: wait.subsec_nanos().into(),
    });
    match poll(&mut fds, timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(error) => return Err(error.into()),
    }
    drop(fds);
    let mut buf = [0u8; 16 * 1024];
    for (output, polled) in outputs.iter_mut().zip(polled) {
        if polled {
            output.read_available(&mut buf);
        }
    }
    Ok(())
}

pub(super) fn min_wait(wait: Option<Duration>, bound: Duration) -> Option<Duration> {
    Some(wait.map_or(bound, |wait| wait.min(bound)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_holds_at_most_twice_its_cap_while_it_reads() {
        let mut tail = Output::new(None::<OwnedFd>, 10, Keep::Tail).expect("output");
        for chunk in 0..1000u32 {
            tail.keep(format!("{chunk:03};").as_bytes());
            assert!(tail.kept.len() <= 20, "{}", tail.kept.len());
        }
        tail.keep(&[b'y'; 64]);
        assert_eq!(tail.kept.len(), 10);
        tail.keep(b"0123");
        assert_eq!(tail.take(), ("yyyyyy0123".to_string(), 4068, true));
        let mut short = Output::new(None::<OwnedFd>, 10, Keep::Tail).expect("output");
        short.keep("ab\u{e9}".as_bytes());
        assert_eq!(short.take(), ("ab\u{e9}".to_string(), 4, false), "nothing cut, nothing dropped");
    }
}
