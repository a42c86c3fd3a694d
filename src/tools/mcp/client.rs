//! A small JSON-RPC 2.0 client for one MCP server over stdio (protocol
//! revision 2025-06-18): newline-delimited messages on the server's stdin
//! and stdout, one request at a time, every read bounded by the session's
//! deadline and by a byte cap per message.
//!
//! The server runs in its own process group; whatever happens (an answer,
//! a timeout, garbage, a crash) the group is killed and the server reaped
//! when the session ends. A request the server sends us is answered
//! "method not found"; its notifications are read and dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustix::process::{Pid, Signal, kill_process_group};
use serde_json::{Value, json};

use crate::model::SandboxFacts;
use crate::tools::mcp::McpError;
use crate::tools::sandbox;

/// The protocol revision this client speaks.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// Earlier revisions whose `tools/list` and `tools/call` have the same shape.
const ALSO_ACCEPTED: &[&str] = &["2025-03-26", "2024-11-05"];
/// How much of the server's stderr a failure quotes (its end).
const STDERR_TAIL_BYTES: usize = 2048;

/// What the server's stdout reader saw.
enum Line {
    Message(Vec<u8>),
    TooLong,
    End,
}

/// The one place a server's process is finished: `command` (the program
/// resolved on the policy's search path with its arguments and exactly its
/// environment, inside the sandbox: [`crate::tools::sandbox::command_for`])
/// gets the workspace as its folder, piped stdio and its own process group.
pub fn server_command(mut command: Command, folder: &Path) -> Command {
    command.current_dir(folder).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    command
}

/// A running server and the state of the conversation with it.
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    stderr: Arc<Mutex<Vec<u8>>>,
    next_id: u64,
    deadline: Instant,
    /// The largest message the next answer may be, in bytes (at most the
    /// cap [`Session::start`] was given); a longer one ends the session.
    pub max_message_bytes: usize,
    /// The sandbox the server runs in, and its temporary folder (kept until
    /// the session ends).
    sandbox: (SandboxFacts, Option<sandbox::Launch>),
}

impl Session {
    /// Starts `command` (see [`server_command`]); every read ends at
    /// `deadline`, and no message may be longer than `max_message_bytes`.
    pub fn start(
        mut command: Command,
        deadline: Instant,
        max_message_bytes: usize,
        sandbox: (SandboxFacts, Option<sandbox::Launch>),
    ) -> Result<Session, McpError> {
        let mut child = command.spawn().map_err(|error| McpError::Start(error.kind().to_string()))?;
        let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (sender, lines) = mpsc::channel();
        if let Some(stdout) = stdout {
            std::thread::spawn(move || read_lines(stdout, &sender, max_message_bytes));
        }
        let tail = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut stderr) = stderr {
            let tail = Arc::clone(&tail);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                while let Ok(read @ 1..) = stderr.read(&mut buffer) {
                    let mut kept = tail.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    kept.extend_from_slice(&buffer[..read]);
                    let excess = kept.len().saturating_sub(STDERR_TAIL_BYTES);
                    kept.drain(..excess);
                }
            });
        }
        Ok(Session { child, stdin, lines, stderr: tail, next_id: 1, deadline, max_message_bytes, sandbox })
    }

    /// The sandbox the server runs in.
    pub fn sandbox_facts(&self) -> &SandboxFacts {
        &self.sandbox.0
    }

    /// `initialize`, then `notifications/initialized`.
    pub fn initialize(&mut self) -> Result<(), McpError> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "planrun", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self.request("initialize", params)?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
        if version != PROTOCOL_VERSION && !ALSO_ACCEPTED.contains(&version) {
            return Err(McpError::Garbage(format!(
                "the server speaks protocol revision `{version}`, which planrun does not"
            )));
        }
        if result.get("capabilities").and_then(|capabilities| capabilities.get("tools")).is_none() {
            return Err(McpError::Garbage("the server does not offer tools (no `capabilities.tools`)".to_string()));
        }
        self.notify("notifications/initialized")
    }

    /// Every page of `tools/list` (at most 100 pages).
    pub fn list_tools(&mut self) -> Result<Vec<Value>, McpError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let result = self.request("tools/list", params)?;
            let Some(page) = result.get("tools").and_then(Value::as_array) else {
                return Err(McpError::Garbage("`tools/list` answered without a `tools` array".to_string()));
            };
            tools.extend(page.iter().cloned());
            match result.get("nextCursor") {
                Some(Value::String(next)) => cursor = Some(next.clone()),
                None | Some(Value::Null) => return Ok(tools),
                Some(_) => return Err(McpError::Garbage("`nextCursor` is not a string".to_string())),
            }
        }
        Err(McpError::Garbage("`tools/list` has more than 100 pages".to_string()))
    }

    /// Sends request `method` and waits for its answer's `result`.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, McpError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let message = self.receive(method)?;
            if let Some(asked) = message.get("method") {
                // A request of the server's own (it has an id): refused.
                if let (Some(their_id), Some(_)) = (message.get("id"), asked.as_str()) {
                    let refusal = json!({"jsonrpc": "2.0", "id": their_id, "error": {"code": -32601, "message": "planrun answers no requests"}});
                    self.send(&refusal)?;
                }
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                return Err(McpError::Garbage(format!("an answer to `{method}` carries another id")));
            }
            if let Some(error) = message.get("error") {
                let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
                let text = error.get("message").and_then(Value::as_str).unwrap_or_default();
                return Err(McpError::Rpc { method: method.to_string(), code, message: clip(text, 300) });
            }
            return message
                .get("result")
                .filter(|result| result.is_object())
                .cloned()
                .ok_or_else(|| McpError::Garbage(format!("the answer to `{method}` has no `result` object")));
        }
    }

    fn notify(&mut self, method: &str) -> Result<(), McpError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method}))
    }

    fn send(&mut self, message: &Value) -> Result<(), McpError> {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        let written = match &mut self.stdin {
            Some(stdin) => stdin.write_all(&line).and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        written.map_err(|_| self.exited())
    }

    /// The next message: a JSON-RPC 2.0 object, or why there is none.
    fn receive(&mut self, method: &str) -> Result<Value, McpError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let line = match self.lines.recv_timeout(left) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => return Err(McpError::Timeout(method.to_string())),
            Err(RecvTimeoutError::Disconnected) => Line::End,
        };
        let bytes = match line {
            Line::Message(bytes) if bytes.len() <= self.max_message_bytes => bytes,
            Line::Message(_) | Line::TooLong => {
                return Err(McpError::TooLarge { method: method.to_string(), limit: self.max_message_bytes });
            }
            Line::End => return Err(self.exited()),
        };
        let message: Value = serde_json::from_slice(&bytes).map_err(|_| {
            McpError::Garbage(format!(
                "the server wrote something that is not JSON while planrun waited for `{method}`"
            ))
        })?;
        if !message.is_object() || message.get("jsonrpc") != Some(&json!("2.0")) {
            return Err(McpError::Garbage(format!(
                "the server wrote a message that is not JSON-RPC 2.0 (waiting for `{method}`)"
            )));
        }
        Ok(message)
    }

    /// The server is gone: how it ended and the end of its stderr.
    fn exited(&mut self) -> McpError {
        self.stdin = None;
        let status = wait_briefly(&mut self.child);
        let tail = self.stderr.lock().map(|kept| String::from_utf8_lossy(&kept).into_owned()).unwrap_or_default();
        McpError::Exited { status, stderr: clip(tail.trim(), 500) }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stdin = None;
        if let Ok(pid) = i32::try_from(self.child.id())
            && let Some(pid) = Pid::from_raw(pid)
        {
            let _ = kill_process_group(pid, Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The exit status of `child` if it ends within a moment, else "still running".
fn wait_briefly(child: &mut Child) -> String {
    let until = Instant::now() + std::time::Duration::from_millis(500);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.to_string(),
            Ok(None) if Instant::now() < until => std::thread::sleep(std::time::Duration::from_millis(5)),
            _ => return "closed its output".to_string(),
        }
    }
}

/// Reads newline-delimited messages, each at most the cap in bytes.
fn read_lines(stdout: impl Read, sender: &mpsc::Sender<Line>, limit: usize) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        let read = (&mut reader).take(limit as u64 + 1).read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => {
                let _ = sender.send(Line::End);
                return;
            }
            Ok(_) if line.last() != Some(&b'\n') && line.len() > limit => {
                let _ = sender.send(Line::TooLong);
                return;
            }
            Ok(_) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if sender.send(Line::Message(line)).is_err() {
                    return;
                }
            }
        }
    }
}

/// At most `max` bytes of `text`, cut on a character boundary, marked.
pub fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}
