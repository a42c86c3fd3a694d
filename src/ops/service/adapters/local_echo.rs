//! The `local_echo` adapter: a real child process (`echo <instruction>`),
//! never through a shell, with a cleared environment, stdin closed and a
//! timeout after which the child is killed.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::ops::service::adapters::{AdapterMode, AdapterResult};

/// The `echo` program, looked up in fixed folders (never `PATH`).
pub fn find_echo() -> Option<PathBuf> {
    ["/bin/echo", "/usr/bin/echo"].into_iter().map(PathBuf::from).find(|path| path.is_file())
}

pub async fn execute(program: &Path, instruction: &str, timeout: Duration) -> AdapterResult {
    let child = tokio::process::Command::new(program)
        .arg(instruction)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match child {
        Ok(child) => child,
        Err(error) => {
            return AdapterResult::failed(
                format!("cannot start `{}`: {error}", program.display()),
                None,
                AdapterMode::Real,
            );
        }
    };
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Err(_) => AdapterResult::failed(format!("timed out after {} ms", timeout.as_millis()), None, AdapterMode::Real),
        Ok(Err(error)) => AdapterResult::failed(format!("child failed: {error}"), None, AdapterMode::Real),
        Ok(Ok(output)) => {
            let code = output.status.code();
            let mut result = AdapterResult::ok(String::from_utf8_lossy(&output.stdout).into_owned(), AdapterMode::Real);
            result.exit_code = code;
            if code != Some(0) {
                result.error =
                    Some(format!("`echo` exited with {code:?}: {}", String::from_utf8_lossy(&output.stderr).trim()));
            }
            result
        }
    }
}
