//! The ticket demo (`plans/ticket_close.toml`) as the bounded-runtime tests
//! use it: a sandbox filled with the sample tickets, one clock start per
//! stage of a trajectory and what the tickets and the audit say afterwards.
//! The golden snapshots of the trajectories are declared scenarios
//! (`plans/ticket_close.scenarios.toml`).

use std::fs;
use std::path::Path;

use serde_json::{Value, json};

use super::{Output, ROOT, Sandbox};

pub const PLAN: &str = "plans/ticket_close.toml";
pub const RUN: &str = "t";

/// Each stage of a trajectory is its own process; each gets its own clock
/// start so timestamps read in order.
pub const T_RUN: &str = "2026-01-01T00:00:00Z";
pub const T_APPROVE: &str = "2026-01-01T00:10:00Z";
pub const T_RESUME: &str = "2026-01-01T00:20:00Z";
pub const T_RESUME_AGAIN: &str = "2026-01-01T00:30:00Z";

/// A sandbox whose workspace holds the sample tickets, with `ticket-7` in
/// `status` and closed `close_count` times so far.
pub fn ticket_sandbox(status: &str, close_count: u64) -> Sandbox {
    let sandbox = Sandbox::new();
    let text = fs::read_to_string(Path::new(ROOT).join("plans/ticket_close.tickets.json")).expect("sample tickets");
    let mut tickets: Value = serde_json::from_str(&text).expect("tickets JSON");
    tickets["tickets"]["ticket-7"]["status"] = json!(status);
    tickets["tickets"]["ticket-7"]["close_count"] = json!(close_count);
    sandbox.write("workspace/tickets.json", &serde_json::to_string_pretty(&tickets).expect("JSON"));
    sandbox
}

/// The workspace's `tickets.json`.
pub fn tickets(sandbox: &Sandbox) -> Value {
    serde_json::from_str(&fs::read_to_string(sandbox.workspace().join("tickets.json")).expect("tickets")).expect("JSON")
}

/// How many times `ticket` was really closed.
pub fn close_count(sandbox: &Sandbox, ticket: &str) -> u64 {
    tickets(sandbox)["tickets"][ticket]["close_count"].as_u64().expect("close_count")
}

/// The `event_type` of every audit line of run `t`, in order.
pub fn event_types(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .record(RUN, "audit.jsonl")
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("audit line")["event_type"].as_str().unwrap_or("").to_string()
        })
        .collect()
}

/// The ticket demo in a sandbox (`ticket-7` in `status`, closed
/// `close_count` times) with `max_tool_calls = limit` in its own copy of
/// the plan (and the repository's default policy); run it `in_sandbox()`
/// with `--plan plans/ticket_close.toml --policies policies`.
pub fn demo_with_tool_calls(status: &str, close_count: u64, limit: u64) -> Sandbox {
    let sandbox = ticket_sandbox(status, close_count);
    let plan = fs::read_to_string(Path::new(ROOT).join(PLAN))
        .expect("plan")
        .replace("max_tool_calls = 6", &format!("max_tool_calls = {limit}"));
    sandbox.write("plans/ticket_close.toml", &plan);
    sandbox.write(
        "policies/default.toml",
        &fs::read_to_string(Path::new(ROOT).join("policies/default.toml")).expect("policy"),
    );
    sandbox
}

/// Every file of the run, for "records unchanged" checks.
pub fn records(sandbox: &Sandbox) -> Vec<String> {
    ["state.json", "audit.jsonl", "history.jsonl", "plan.json"].iter().map(|file| sandbox.record(RUN, file)).collect()
}

/// Runs the demo plan as run `t` up to its approval gate (exit 3).
pub fn pause(sandbox: &Sandbox) -> Output {
    sandbox.planrun().args(["--plan", PLAN, "--run-id", RUN]).clock(T_RUN).expect_code(3).run()
}
