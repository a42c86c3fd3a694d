//! How a front-end process ends, shared by the command line and
//! `planrun serve` (which may not import each other): [`fail`], the error
//! line and exit code of a command that did not do what was asked, and
//! [`StopSignals`], the SIGTERM and SIGINT that `planrun worker` and
//! `planrun serve` stop on.

use std::process::ExitCode;

use anstyle::{AnsiColor, Style};

/// How the word `error` is painted (stripped when colour is off).
const ERROR: Style = AnsiColor::Red.on_default().bold();

/// Prints `error: <message>` to stderr and returns `code` (an
/// `ops::ExitStatus`).
pub fn fail(code: impl Into<ExitCode>, message: &str) -> ExitCode {
    anstream::eprintln!("{ERROR}error{ERROR:#}: {message}");
    code.into()
}

/// The signals that ask a long-running command to stop: SIGTERM
/// (`systemctl stop`, `kill`) and SIGINT (Ctrl-C), installed together.
#[cfg(any(feature = "server", feature = "postgres"))]
pub struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

#[cfg(any(feature = "server", feature = "postgres"))]
impl StopSignals {
    /// Installs the handlers; call it inside a tokio runtime (with I/O
    /// enabled). An error means no handler could be installed.
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals { terminate: signal(SignalKind::terminate())?, interrupt: signal(SignalKind::interrupt())? })
    }

    /// Waits for the next of them; returns the exit code of a process that
    /// signal would have killed (128 + its number).
    pub async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.terminate.recv() => 128 + 15,
            _ = self.interrupt.recv() => 128 + 2,
        }
    }
}
