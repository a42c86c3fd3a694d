//! `shell`: resolving bare program names and running them without a shell.
//!
//! A child runs with an empty environment plus exactly the policy's `env`,
//! stdin null (or the step's `stdin` text, written by a thread of its own), the workspace root as its working directory, and in its own
//! process group. The calling thread waits for everything at once with one
//! `poll(2)`: the child's two output pipes (read as they fill, keeping the
//! first `max_output_bytes` of stdout and the last [`STDERR_TAIL_BYTES`]
//! (at most `max_output_bytes`) of stderr, and draining the rest so the
//! child never blocks) and, on Linux, a pidfd of the leader, which becomes
//! readable when it exits (elsewhere the wait wakes every [`EXIT_POLL`] to
//! ask). The leader's exit is taken with `waitid(WNOWAIT)`, which leaves it
//! a zombie: its pid (and so its process group id) cannot be reused until
//! we reap it, so killing the group is always aimed at the right processes.
//! On timeout the whole group is killed, and so it is when the run's
//! [`Fence`] stops holding (the process's lease on the run ran out: another
//! process may own the run now, so this one must stop acting at once; the
//! wait checks the fence at least every [`FENCE_POLL`]); after the leader
//! exits, whatever is left of its group is killed too, so a background
//! grandchild cannot hold the pipes open. No thread is started per step.
//! The pipes and the wait on them are `pipes.rs`.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

use crate::fence::Fence;
use crate::tools::pipes::{Keep, Output, exit_watch, leader_exited, min_wait, wait_and_read};
use crate::tools::sandbox::Launch;

/// How often a running child's fence is checked: the child outlives the
/// fence by at most this much (plus the kill).
const FENCE_POLL: Duration = Duration::from_millis(50);

/// Where the leader's exit cannot be watched with a pidfd (not Linux), how
/// often the wait asks whether it has exited.
const EXIT_POLL: Duration = Duration::from_millis(5);

/// How long the pipes may take to reach end of file once the whole process
/// group is gone. Only a process that left the group (setsid) can hold the
/// pipes longer; its output is then cut off.
const READER_GRACE: Duration = Duration::from_millis(500);

/// How much of its stderr a child keeps: the end, where a failing
/// program says what went wrong (a test runner's summary, a compiler's
/// last error), never more than the policy's `max_output_bytes`.
pub const STDERR_TAIL_BYTES: u64 = 8 * 1024;

/// What a finished (or killed) child did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellRun {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Lossy UTF-8 of the first `max_output_bytes`.
    pub stdout: String,
    /// Lossy UTF-8 of the last [`STDERR_TAIL_BYTES`] (at most
    /// `max_output_bytes`), starting on a character boundary.
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// Total bytes the child wrote to each stream (kept or not).
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub timed_out: bool,
    /// Killed because the fence stopped holding (the lease ran out).
    pub fenced: bool,
}

/// What [`run_shell`] tells its caller of the child's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEvent {
    /// The child (pid) runs; an error kills its group and ends the call.
    Started(u32),
    /// The instant past which the child (pid) must not run: the fence's
    /// deadline, told when the child starts and again each time a renewal
    /// moves it on (only for a fence that can expire).
    Deadline(u32, Instant),
    /// The child (pid) has exited and its group was killed; it is reaped
    /// next (until then its pid, and so its group id, cannot be reused).
    Reaping(u32),
}

/// What to run: a resolved program, its arguments, exactly the environment
/// it gets, and its working directory.
#[derive(Debug, Clone, Copy)]
pub struct ShellCommand<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub cwd: &'a Path,
    /// What the child reads on stdin; `None`: `/dev/null`.
    pub stdin: Option<&'a [u8]>,
    /// The sandbox it runs in (`None`: unconfined).
    pub sandbox: Option<&'a Launch>,
}

/// Runs `command.program` with its `args` directly (never through a shell),
/// with exactly its `env`, its `stdin` (else null), in its `cwd`, in its own process group, for at most
/// `timeout` and while `fence` holds; `report` is told of the child's life
/// ([`ChildEvent`]).
pub fn run_shell(
    command: &ShellCommand<'_>,
    timeout: Duration,
    max_output_bytes: u64,
    fence: &Fence,
    report: &dyn Fn(ChildEvent) -> io::Result<()>,
) -> io::Result<ShellRun> {
    let started = Instant::now();
    let mut child = match command.sandbox {
        Some(launch) => launch.command(command.program, command.args, command.env)?,
        None => {
            let mut plain = Command::new(command.program);
            plain.args(command.args).env_clear().envs(command.env);
            plain
        }
    };
    child
        .current_dir(command.cwd)
        .stdin(if command.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match command.sandbox {
        Some(launch) => launch.spawn(&mut child)?,
        None => child.spawn()?,
    };
    let (pid, child_id) = (Pid::from_child(&child), child.id());
    let kill_group = || {
        // ESRCH (nothing left) is fine.
        let _ = kill_process_group(pid, Signal::KILL);
    };
    // A failure of the wait itself: nothing of the group is left behind.
    let abandon = |child: &mut std::process::Child, error: io::Error| {
        kill_group();
        let _ = report(ChildEvent::Reaping(child_id));
        let _ = child.wait();
        Err(error)
    };
    // The fence's deadline, told when it is new (the last one told kept).
    let mut told = None;
    let mut tell_deadline = || match fence.deadline() {
        Some(deadline) if told != Some(deadline) => {
            told = Some(deadline);
            report(ChildEvent::Deadline(child_id, deadline))
        }
        _ => Ok(()),
    };
    if let Err(error) = report(ChildEvent::Started(child_id)).and_then(|()| tell_deadline()) {
        return abandon(&mut child, error);
    }
    if let (Some(text), Some(mut pipe)) = (command.stdin, child.stdin.take()) {
        // A writer thread, so a child that writes as much as it reads never
        // blocks on a full pipe. It ends when everything is written or the
        // child closes its end (`EPIPE`, its group killed at the latest).
        let text = text.to_vec();
        let spawned = std::thread::Builder::new().name("planrun-stdin".into()).spawn(move || {
            let _ = std::io::Write::write_all(&mut pipe, &text);
        });
        if let Err(error) = spawned {
            return abandon(&mut child, error);
        }
    }
    let setup = (|| {
        let stdout = Output::new(child.stdout.take(), max_output_bytes, Keep::Head)?;
        let stderr = Output::new(child.stderr.take(), max_output_bytes.min(STDERR_TAIL_BYTES), Keep::Tail)?;
        Ok::<_, io::Error>([stdout, stderr])
    })();
    let mut outputs = match setup {
        Ok(outputs) => outputs,
        Err(error) => return abandon(&mut child, error),
    };
    let watch = exit_watch(pid);

    let deadline = started.checked_add(timeout);
    let (mut timed_out, mut fenced, mut killed) = (false, false, false);
    loop {
        let exited = match leader_exited(pid) {
            Ok(exited) => exited,
            Err(error) => return abandon(&mut child, error),
        };
        if exited {
            break;
        }
        if !killed {
            // Best effort: a guard that cannot be told keeps the deadline it
            // had, and this loop kills the child at the deadline anyway.
            let _ = tell_deadline();
            if !fence.holds() {
                fenced = true;
            } else if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                timed_out = true;
            }
            if fenced || timed_out {
                // SIGKILL cannot be ignored: the leader exits now.
                kill_group();
                killed = true;
            }
        }
        let mut wait =
            if killed { None } else { deadline.map(|deadline| deadline.saturating_duration_since(Instant::now())) };
        if fence.is_bounded() && !killed {
            wait = min_wait(wait, FENCE_POLL);
        }
        if watch.is_none() {
            wait = min_wait(wait, EXIT_POLL);
        }
        if let Err(error) = wait_and_read(&mut outputs, watch.as_ref(), wait) {
            return abandon(&mut child, error);
        }
    }
    // The leader is a zombie (not yet reaped), so its pgid still names its
    // group: kill what is left of it, then reap the leader.
    kill_group();
    let _ = report(ChildEvent::Reaping(child_id));
    let status = child.wait()?;

    let grace_end = Instant::now() + READER_GRACE;
    while outputs.iter().any(|output| output.pipe.is_some()) {
        let left = grace_end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if wait_and_read(&mut outputs, None, Some(left)).is_err() {
            break;
        }
    }
    let [out, err] = outputs;
    let (stdout, stdout_bytes, stdout_truncated) = out.take();
    let (stderr, stderr_bytes, stderr_truncated) = err.take();
    Ok(ShellRun {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        stdout_bytes,
        stderr_bytes,
        timed_out,
        fenced,
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::thread;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn run(program: &str, argv: &[&str], cwd: &Path) -> ShellRun {
        run_shell(
            &ShellCommand {
                program: Path::new(program),
                args: &args(argv),
                env: &env(&[("PATH", "/usr/bin:/bin")]),
                cwd,
                stdin: None,
                sandbox: None,
            },
            Duration::from_secs(10),
            1 << 20,
            &Fence::unbounded(),
            &|_| Ok(()),
        )
        .expect("run")
    }

    /// `sh -c script` in `dir` (with `PATH`), bounded by `timeout` and
    /// `fence`; the scripts below start a background `sleep` and write its
    /// pid to `dir/pid` ([`grandchild`]).
    fn sh(dir: &Path, script: &str, timeout: Duration, fence: &Fence) -> ShellRun {
        run_shell(
            &ShellCommand {
                program: &which("sh"),
                args: &args(&["-c", script]),
                env: &env(&[("PATH", "/usr/bin:/bin")]),
                cwd: dir,
                stdin: None,
                sandbox: None,
            },
            timeout,
            1 << 20,
            fence,
            &|_| Ok(()),
        )
        .expect("run")
    }

    /// The pid a script wrote to `dir/pid`.
    fn grandchild(dir: &Path) -> i32 {
        std::fs::read_to_string(dir.join("pid")).expect("pid file").trim().parse().expect("pid")
    }

    fn which(name: &str) -> PathBuf {
        ["/usr/bin", "/bin"]
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|path| path.exists())
            .unwrap_or_else(|| panic!("{name} not installed"))
    }

    #[test]
    fn env_is_exactly_the_map() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let vars = env(&[("LANG", "C"), ("ONLY", "this")]);
        let out = run_shell(
            &ShellCommand {
                program: &which("env"),
                args: &[],
                env: &vars,
                cwd: tmp.path(),
                stdin: None,
                sandbox: None,
            },
            Duration::from_secs(10),
            1 << 20,
            &Fence::unbounded(),
            &|_| Ok(()),
        )
        .expect("run");
        assert_eq!(out.exit_code, Some(0));
        let mut lines: Vec<_> = out.stdout.lines().collect();
        lines.sort();
        assert_eq!(lines, vec!["LANG=C", "ONLY=this"]);
    }

    #[test]
    fn stdin_is_null_and_cwd_is_root() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical");
        let started = Instant::now();
        let out = run(which("cat").to_str().expect("utf8"), &[], &root);
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout, "");
        assert!(started.elapsed() < Duration::from_secs(5));
        let out = run(which("pwd").to_str().expect("utf8"), &[], &root);
        assert_eq!(out.stdout.trim_end(), root.to_str().expect("utf8"));
    }

    /// 1 MiB through `cat`, far more than a pipe buffer both ways: the
    /// writer thread and the reader never wait on each other.
    #[test]
    fn large_stdin_reaches_the_child_without_deadlock() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let text = "line of stdin \"quoted\" é\n".repeat(1 << 16);
        let out = run_shell(
            &ShellCommand {
                program: &which("cat"),
                args: &[],
                env: &env(&[]),
                cwd: tmp.path(),
                stdin: Some(text.as_bytes()),
                sandbox: None,
            },
            Duration::from_secs(20),
            4 << 20,
            &Fence::unbounded(),
            &|_| Ok(()),
        )
        .expect("run");
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout, text);
    }

    #[test]
    fn non_zero_exit_and_stderr() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let out = run(which("ls").to_str().expect("utf8"), &["definitely-missing"], tmp.path());
        assert_ne!(out.exit_code, Some(0));
        assert!(out.exit_code.is_some());
        assert!(out.stderr.contains("definitely-missing"), "{}", out.stderr);
        assert!(!out.timed_out);
    }

    #[test]
    fn output_is_truncated_and_drained() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // 200 000 bytes, far more than a pipe buffer: the child must not block.
        let out = run_shell(
            &ShellCommand {
                program: &which("sh"),
                args: &args(&[
                    "-c",
                    "i=0; while [ $i -lt 2000 ]; do printf '%0100d' 0; i=$((i+1)); done; echo err >&2",
                ]),
                env: &env(&[]),
                cwd: tmp.path(),
                stdin: None,
                sandbox: None,
            },
            Duration::from_secs(20),
            10,
            &Fence::unbounded(),
            &|_| Ok(()),
        )
        .expect("run");
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout, "0000000000");
        assert!(out.stdout_truncated);
        assert_eq!(out.stdout_bytes, 200_000);
        assert_eq!(out.stderr, "err\n");
        assert!(!out.stderr_truncated);
    }

    #[test]
    fn a_long_stderr_keeps_its_tail_from_a_character_boundary() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // "x", 10 000 bytes of "é" (two bytes each), "ok\n": the last
        // 8 KiB start inside an "é", which is dropped.
        let script =
            "printf x >&2; i=0; while [ $i -lt 500 ]; do printf 'éééééééééé' >&2; i=$((i+1)); done; printf 'ok\\n' >&2";
        let out = run_shell(
            &ShellCommand {
                program: &which("sh"),
                args: &args(&["-c", script]),
                env: &env(&[]),
                cwd: tmp.path(),
                stdin: None,
                sandbox: None,
            },
            Duration::from_secs(20),
            1 << 20,
            &Fence::unbounded(),
            &|_| Ok(()),
        )
        .expect("run");
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stderr_bytes, 10_004);
        assert!(out.stderr_truncated);
        assert_eq!(out.stderr.len(), STDERR_TAIL_BYTES as usize - 1, "the cut character is dropped");
        assert!(
            out.stderr.starts_with('é') && out.stderr.ends_with("éok\n"),
            "{:?}",
            out.stderr.chars().take(8).collect::<String>()
        );
        assert!(!out.stderr.contains('\u{FFFD}'));
    }

    fn alive(pid: i32) -> bool {
        u32::try_from(pid).is_ok_and(crate::tools::children::running)
    }

    fn wait_gone(pid: i32) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if !alive(pid) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let out = sh(tmp.path(), "sleep 30 & echo $! > pid; sleep 30", Duration::from_secs(1), &Fence::unbounded());
        let elapsed = started.elapsed();
        assert!(out.timed_out);
        assert_eq!(out.signal, Some(9));
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
        let pid = grandchild(tmp.path());
        assert!(wait_gone(pid), "grandchild {pid} survived");
    }

    #[test]
    fn background_grandchild_does_not_hang_a_fast_command() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let out = sh(tmp.path(), "sleep 30 & echo $! > pid; echo done", Duration::from_secs(20), &Fence::unbounded());
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stdout, "done\n");
        assert!(!out.timed_out);
        let pid = grandchild(tmp.path());
        assert!(wait_gone(pid), "grandchild {pid} survived");
    }

    #[test]
    fn a_fence_that_stops_holding_kills_the_whole_group() {
        let tmp = tempfile::tempdir().expect("tempdir");
        // Held for 500 ms (600 ms less a sixth), then past its deadline.
        let fence = Fence::leased(Instant::now(), Duration::from_millis(600));
        let started = Instant::now();
        let out = sh(tmp.path(), "sleep 30 & echo $! > pid; sleep 30", Duration::from_secs(20), &fence);
        let elapsed = started.elapsed();
        assert!(out.fenced && !out.timed_out, "{out:?}");
        assert_eq!(out.signal, Some(9));
        assert!(elapsed >= Duration::from_millis(500) && elapsed < Duration::from_secs(5), "took {elapsed:?}");
        let pid = grandchild(tmp.path());
        assert!(wait_gone(pid), "grandchild {pid} survived");

        // A lease known to be gone kills at the next poll.
        let fence = Fence::leased(Instant::now(), Duration::from_secs(60));
        let lose = fence.clone();
        let loser = thread::spawn(move || {
            thread::sleep(Duration::from_millis(200));
            lose.lose();
        });
        let started = Instant::now();
        let out = run_shell(
            &ShellCommand {
                program: &which("sleep"),
                args: &args(&["30"]),
                env: &env(&[]),
                cwd: tmp.path(),
                stdin: None,
                sandbox: None,
            },
            Duration::from_secs(20),
            1 << 20,
            &fence,
            &|_| Ok(()),
        )
        .expect("run");
        loser.join().expect("loser");
        assert!(out.fenced, "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn spawn_failure_is_an_error() {
        let tmp = tempfile::tempdir().expect("tempdir");
        assert!(
            run_shell(
                &ShellCommand {
                    program: Path::new("/nonexistent/program"),
                    args: &[],
                    env: &env(&[]),
                    cwd: tmp.path(),
                    stdin: None,
                    sandbox: None,
                },
                Duration::from_secs(1),
                10,
                &Fence::unbounded(),
                &|_| Ok(())
            )
            .is_err()
        );
    }
}
