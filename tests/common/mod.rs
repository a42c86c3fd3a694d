//! The test harness: runs the real `planrun` binary in a throwaway workspace
//! with the deterministic clock, and snapshots what it printed and wrote.
//!
//! Every test runs with the repository root as the current directory (so plan
//! paths read `plans/flow_pwd.toml`) and its own temporary workspace. Machine
//! paths are filtered to `[WORKSPACE]` and `[TMP]`.
//!
//! - [`Sandbox`] (here): the temporary folder, its files and records.
//! - [`Planrun`] (`planrun.rs`): one invocation of the binary, built
//!   fluently: `sandbox.planrun().args(["show", "t"]).run()`.
//! - `tickets.rs`: the ticket demo's sandbox, filled with the sample tickets, and its trajectories.

#![allow(dead_code)]

pub mod fake_model;
pub mod http_fixture;
pub mod planrun;
pub mod tickets;
pub mod tls;

use std::fs;
use std::path::{Path, PathBuf};

pub use planrun::Planrun;

pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");
pub const TEST_CLOCK: &str = "2026-01-01T00:00:00Z";

/// A temporary folder holding a workspace (and, when a test needs them,
/// its own plans and policies).
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

/// What one invocation of the binary did.
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Sandbox {
    pub fn new() -> Self {
        // Always under `/tmp` (not `$TMPDIR`): the workspace path, whose length shows in
        // byte counts of `pwd` output, is then the same on every machine.
        Sandbox { dir: tempfile::Builder::new().prefix("planrun").tempdir_in("/tmp").expect("temp dir") }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    /// Replaces machine paths with stable placeholders.
    pub fn filter(&self, text: &str) -> String {
        let mut text = text.to_string();
        let workspace = self.workspace();
        let canonical = self.path().canonicalize().unwrap_or_else(|_| self.path().to_path_buf());
        for (from, to) in [
            (canonical.join("workspace").display().to_string(), "[WORKSPACE]"),
            (workspace.display().to_string(), "[WORKSPACE]"),
            (canonical.display().to_string(), "[TMP]"),
            (self.path().display().to_string(), "[TMP]"),
        ] {
            text = text.replace(&from, to);
        }
        text
    }

    /// A file of the run's record folder, filtered.
    pub fn record(&self, run_id: &str, name: &str) -> String {
        let path = self.workspace().join("runs").join(run_id).join(name);
        self.filter(&fs::read_to_string(&path).unwrap_or_else(|error| panic!("read {}: {error}", path.display())))
    }

    /// Writes a file into the sandbox (creating folders).
    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path().join(relative);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("create dir");
        }
        fs::write(&path, text).expect("write file");
        path
    }

    /// Every file below the sandbox, as sorted relative paths.
    pub fn tree(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(self.path(), self.path(), &mut out);
        out.sort();
        out
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        out.push(path.strip_prefix(root).unwrap_or(&path).display().to_string());
        if path.is_dir() && !path.is_symlink() {
            walk(root, &path, out);
        }
    }
}

impl Output {
    /// What a process started with [`Planrun::spawn`] did, once it has
    /// ended (code -1 when a signal ended it), paths filtered.
    pub fn of(sandbox: &Sandbox, child: std::process::Child) -> Output {
        let output = child.wait_with_output().expect("wait for planrun");
        Output {
            code: output.status.code().unwrap_or(-1),
            stdout: sandbox.filter(&String::from_utf8_lossy(&output.stdout)),
            stderr: sandbox.filter(&String::from_utf8_lossy(&output.stderr)),
        }
    }

    /// uv-style: exit code, stdout and stderr in one text.
    pub fn snapshot(&self) -> String {
        format!("exit_code: {}\n----- stdout -----\n{}----- stderr -----\n{}", self.code, self.stdout, self.stderr)
    }
}

/// insta settings that put snapshots in the top-level `snapshots/<area>`.
pub fn snapshot_settings(area: &str) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(ROOT).join("snapshots").join(area));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}

/// A policy for tests that need programs the default policy does not allow.
pub const TEST_POLICY: &str = r#"version = 1
[shell]
blocked = ["bash", "rm", "curl"]
search_path = ["/usr/bin", "/bin"]
[shell.env]
PATH = "/usr/bin:/bin"
LANG = "C.UTF-8"
[[shell.allow]]
program = "pwd"
[[shell.allow]]
program = "echo"
prefix = true
[[shell.allow]]
program = "env"
[[shell.allow]]
program = "cat"
args = [[{ slot = "path" }]]
[[shell.allow]]
program = "git"
args = [["status"]]
[[shell.allow]]
program = "sleep"
args = [["30"]]
[[shell.allow]]
id = "sh-grandchild"
program = "sh"
args = [["-c", "sleep 30 & echo $! > child.pid; wait"]]
[[shell.allow]]
program = "false"
[retry]
execution_error = 2
[budget]
step_timeout_secs = 1
max_output_bytes = 64
"#;

impl Sandbox {
    /// Writes `plans/test.toml` and `policies/default.toml` into the sandbox.
    pub fn write_plan(&self, plan: &str, policy: &str) {
        self.write("plans/test.toml", plan);
        self.write("policies/default.toml", policy);
    }

    /// The invocation that runs the sandbox's `plans/test.toml` (see
    /// [`Sandbox::write_plan`]) from the sandbox as run `t`; add what the
    /// test needs (`.env(..)`, `.arg(..)`) before `.run()`.
    pub fn test_plan(&self) -> Planrun<'_> {
        self.planrun().in_sandbox().args(["--plan", "plans/test.toml", "--policies", "policies", "--run-id", "t"])
    }

    /// Writes the plan and the policy, then runs the plan as run `t`.
    pub fn run_plan(&self, plan: &str, policy: &str) -> Output {
        self.write_plan(plan, policy);
        self.test_plan().run()
    }

    /// The parsed lines of a run's `history.jsonl`.
    pub fn history(&self, run_id: &str) -> Vec<serde_json::Value> {
        self.record(run_id, "history.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).expect("history line is JSON"))
            .collect()
    }

    /// The run's checkpoint: the payload of `state.json` (inside its
    /// integrity envelope), or — while the run goes on, when `state.json`
    /// (written when a run pauses or ends) is missing or older — the
    /// checkpoint of the last head line of its log, with its `audit_seq`.
    pub fn state(&self, run_id: &str) -> serde_json::Value {
        let log = self.record(run_id, "audit.jsonl");
        let lines: Vec<&str> = log.lines().collect();
        let head = lines.iter().enumerate().rev().find_map(|(index, line)| {
            let event: serde_json::Value = serde_json::from_str(line).ok()?;
            let mut state = event["details"].get("checkpoint")?["state"].clone();
            state["audit_seq"] = serde_json::json!(index + 1);
            Some(state)
        });
        let path = self.workspace().join("runs").join(run_id).join("state.json");
        let compact = fs::read_to_string(path).ok().and_then(|text| {
            let envelope: serde_json::Value = serde_json::from_str(&self.filter(&text)).ok()?;
            Some(envelope["payload"].clone())
        });
        match (compact, head) {
            (Some(compact), Some(head)) if compact["audit_seq"] != head["audit_seq"] => head,
            (Some(compact), _) => compact,
            (None, Some(head)) => head,
            (None, None) => panic!("run `{run_id}` has no checkpoint"),
        }
    }
}

/// Waits up to `limit` for `ready` (asked every 20 ms); whether it came.
pub fn wait_until(limit: std::time::Duration, mut ready: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        if ready() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ready()
}

/// A plan of one step (given as TOML lines) followed by `finish`.
pub fn one_step_plan(step: &str) -> String {
    format!(
        "version = 1\nid = \"test\"\n\n[[steps]]\nid = \"step-1\"\n{step}\n\n[[steps]]\nid = \"step-2\"\nkind = \"finish\"\n"
    )
}
