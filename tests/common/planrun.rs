//! One invocation of the real `planrun` binary, built fluently in the style
//! of casey/just's `tests/test.rs`:
//!
//! ```text
//! sandbox.planrun().args(["resume", "t"]).clock(T_RESUME).expect_code(0).run()
//! ```
//!
//! Whatever a test sets, the harness keeps its guarantees: the repository
//! root is the current directory unless the test picks another,
//! `--workspace` points into the sandbox, the clock is the deterministic
//! test clock, colour is off, planrun's own environment variables are
//! cleared, and machine paths are filtered out of what the binary printed.
//! To add a knob, add a method here that records it and apply it in `run`.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Output, ROOT, Sandbox, TEST_CLOCK};

/// Variables of planrun's own that must not leak in from the developer's
/// shell: a test sets the ones it wants with [`Planrun::env`] (the service
/// harness clears them too).
pub const CLEARED: &[&str] = &[
    "PLANRUN_WORKSPACE",
    "PLANRUN_PLANS",
    "PLANRUN_POLICIES",
    "PLANRUN_HMAC_KEY",
    "PLANRUN_CRASH_AT",
    "PLANRUN_STORE",
    "PLANRUN_LEASE_SECS",
    "PLANRUN_MAX_CLAIMS",
    "PLANRUN_NODE_ID",
    "PLANRUN_SANDBOX_SIMULATE",
    "PLANRUN_TEST_RESOLVE",
];

/// A `planrun` command line waiting to be run; start one with
/// [`Sandbox::planrun`].
#[must_use = "a `Planrun` does nothing until `.run()`"]
pub struct Planrun<'a> {
    sandbox: &'a Sandbox,
    args: Vec<OsString>,
    trailing: Option<Vec<OsString>>,
    envs: Vec<(OsString, OsString)>,
    current_dir: PathBuf,
    expected_code: Option<i32>,
    /// A program (and its arguments) the binary runs under, e.g. `strace`.
    wrapper: Vec<OsString>,
    /// Runs with the real clock instead of [`TEST_CLOCK`].
    real_clock: bool,
}

impl Sandbox {
    /// Starts a `planrun` invocation against this sandbox's workspace.
    pub fn planrun(&self) -> Planrun<'_> {
        Planrun {
            sandbox: self,
            args: Vec::new(),
            trailing: None,
            envs: Vec::new(),
            current_dir: PathBuf::from(ROOT),
            expected_code: None,
            wrapper: Vec::new(),
            real_clock: false,
        }
    }
}

impl Planrun<'_> {
    /// Appends arguments (before the harness's `--workspace`).
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args.extend(args.into_iter().map(|arg| arg.as_ref().to_os_string()));
        self
    }

    /// Appends one argument.
    pub fn arg(self, arg: impl AsRef<OsStr>) -> Self {
        self.args([arg])
    }

    /// A command line passed after `--` (for `policy check`), which comes
    /// after the harness's `--workspace` so that it stays the last thing on
    /// the line.
    pub fn trailing<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.trailing = Some(argv.into_iter().map(|arg| arg.as_ref().to_os_string()).collect());
        self
    }

    /// Sets an environment variable; it wins over the harness's own.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.envs.push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Gives the binary a `TMPDIR` of this sandbox's own (`tmp/`, made if
    /// missing): the sandbox's temporary folders go there, and the first
    /// one removes those of ended processes (docs/effects-sandbox.md), so a
    /// test that kills planrun or counts its system calls sees only its
    /// own, never another test's in the shared `/tmp`.
    pub fn private_temp(self) -> Self {
        let tmp = self.sandbox.path().join("tmp");
        std::fs::create_dir_all(&tmp).expect("the sandbox's TMPDIR");
        self.env("TMPDIR", tmp)
    }

    /// Starts the deterministic clock at `instant` instead of
    /// [`TEST_CLOCK`]: each stage of a trajectory is its own process, and a
    /// later start keeps its timestamps in order.
    pub fn clock(self, instant: &str) -> Self {
        self.env("PLANRUN_TEST_CLOCK", instant)
    }

    /// Runs with the real clock and ids (no `PLANRUN_TEST_CLOCK`): for
    /// what must really take time, such as a retry's wait.
    pub fn real_clock(mut self) -> Self {
        self.real_clock = true;
        self
    }

    /// Runs from `dir` instead of the repository root.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.current_dir = dir.as_ref().to_path_buf();
        self
    }

    /// Runs from the sandbox itself, for plans and policies the test wrote
    /// there.
    pub fn in_sandbox(self) -> Self {
        let dir = self.sandbox.path().to_path_buf();
        self.current_dir(dir)
    }

    /// Runs the binary under `wrapper` (a program and its arguments, e.g.
    /// `strace -e inject=…`), which comes first on the command line. A
    /// process the wrapper kills exits with code -1.
    pub fn under<I, S>(mut self, wrapper: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.wrapper = wrapper.into_iter().map(|arg| arg.as_ref().to_os_string()).collect();
        self
    }

    /// Makes [`Planrun::run`] assert the exit code, printing the command
    /// line and everything the binary said when it differs.
    pub fn expect_code(mut self, code: i32) -> Self {
        self.expected_code = Some(code);
        self
    }

    /// Runs the binary and returns what it did, paths filtered.
    pub fn run(self) -> Output {
        let output = self.command().output().expect("run planrun");
        let output = Output {
            code: output.status.code().unwrap_or(-1),
            stdout: self.sandbox.filter(&String::from_utf8_lossy(&output.stdout)),
            stderr: self.sandbox.filter(&String::from_utf8_lossy(&output.stderr)),
        };
        if let Some(expected) = self.expected_code {
            assert_eq!(output.code, expected, "planrun {}\n{}", self.command_line(), output.snapshot());
        }
        output
    }

    /// Starts the binary without waiting for it (stdout and stderr piped),
    /// for a test that signals it while it runs (`SIGSTOP`, `SIGKILL`);
    /// [`Output::of`] reads what it did once it has ended.
    pub fn spawn(self) -> std::process::Child {
        self.command()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start planrun")
    }

    /// The command line with the harness's guarantees applied.
    fn command(&self) -> Command {
        let binary = env!("CARGO_BIN_EXE_planrun");
        let mut command = match self.wrapper.split_first() {
            Some((program, arguments)) => {
                let mut command = Command::new(program);
                command.args(arguments).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        command.current_dir(&self.current_dir).args(&self.args).arg("--workspace").arg(self.sandbox.workspace());
        if let Some(trailing) = &self.trailing {
            command.arg("--").args(trailing);
        }
        command.env("PLANRUN_TEST_CLOCK", TEST_CLOCK).env("NO_COLOR", "1");
        if self.real_clock {
            command.env_remove("PLANRUN_TEST_CLOCK");
        }
        for key in CLEARED {
            command.env_remove(key);
        }
        command.envs(self.envs.iter().map(|(key, value)| (key, value)));
        command
    }

    /// The arguments as a reader would type them, for failure messages.
    fn command_line(&self) -> String {
        let mut words: Vec<String> = self.args.iter().map(|arg| arg.to_string_lossy().into_owned()).collect();
        if let Some(trailing) = &self.trailing {
            words.push("--".to_string());
            words.extend(trailing.iter().map(|arg| arg.to_string_lossy().into_owned()));
        }
        words.join(" ")
    }
}
