//! `planrun show <run_id>`: a run's timeline from its verified records.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::exit_code;
use crate::cli::output::{BOLD, DIM, RED, YELLOW, fail, paint, record_status, run_status};
use crate::runtime::RuntimeEnv;
use crate::store::{full_state, load_run, validate_run_id};

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run to show.
    pub run_id: String,
    /// Print the full seed-shaped state (plan with step statuses, history) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Exit code: 0 when the run was shown, 2 for an unknown or invalid run id
/// or records that fail verification.
pub fn show(args: &ShowArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    if let Err(error) = validate_run_id(&args.run_id) {
        return fail(exit_code::INVALID_INPUT, &error.to_string());
    }
    let run = match load_run(&dirs.workspace, &args.run_id, &env.sealer) {
        Ok(run) => run,
        Err(error) => return fail(exit_code::INVALID_INPUT, &error.to_string()),
    };
    if args.json {
        anstream::println!("{}", serde_json::to_string_pretty(&full_state(&run)).unwrap_or_default());
        return exit_code::code(exit_code::DONE);
    }
    let state = &run.state;
    anstream::println!(
        "run {} · plan {} ({}) · policy {}",
        paint(BOLD, &state.run_id),
        state.plan.id,
        state.plan.path,
        state.plan.policy
    );
    if let Some(goal) = &state.goal {
        anstream::println!("goal: {goal:?}");
    }
    anstream::println!(
        "status: {} ({}) · {} steps · {} tool calls · started {} · finished {}",
        run_status(state.status),
        state.stop_reason.as_deref().unwrap_or("-"),
        state.counters.steps,
        state.counters.tool_calls,
        state.started_at,
        state.finished_at.as_deref().unwrap_or("-")
    );
    anstream::println!();
    for record in &run.history {
        anstream::println!(
            "  {} {:<12} {:<13} {} attempt {}  {} ms",
            paint(DIM, &record.started_at),
            record.step_id,
            record.kind,
            record_status(record.status),
            record.attempt,
            record.duration_ms
        );
        if let Some(action) = record.action.as_ref().and_then(summarize_action) {
            anstream::println!("      {}", paint(DIM, action));
        }
        if let Some(rule) = record.details.get("rule").and_then(|rule| rule.as_str()) {
            anstream::println!("      {}", paint(DIM, format!("rule {rule}")));
        }
        if let Some(receipt) = record.details.get("receipt").and_then(|receipt| receipt.as_str()) {
            anstream::println!("      {}", paint(DIM, format!("receipt: {receipt}")));
        }
        if let Some(reason) = record.details.get("reason").and_then(|reason| reason.as_str())
            && record.status == crate::store::StepRecordStatus::Skipped
        {
            anstream::println!("      {}", paint(YELLOW, format!("skipped: {reason}")));
        }
        if let (Some(class), Some(error)) = (record.failure_class, &record.error) {
            anstream::println!("      {}", paint(RED, format!("{class}: {error}")));
        }
    }
    for event in &run.audit {
        match event.event_type.as_str() {
            "approval_requested" | "approval_granted" | "approval_rejected" | "approval_verified" => {
                anstream::println!(
                    "  {} {:<12} {}",
                    paint(DIM, &event.ts),
                    event.step_id.as_deref().unwrap_or("-"),
                    paint(YELLOW, event.event_type.replace('_', " "))
                );
            }
            _ => {}
        }
    }
    if let Some(pending) = &state.pending_action {
        anstream::println!();
        anstream::println!(
            "{} step {} ({} {})",
            paint(YELLOW, "waiting for approval:"),
            pending.step_id,
            pending.kind,
            pending.scope
        );
        anstream::println!("  fingerprint {}", pending.fingerprint);
        anstream::println!("  action {}", pending.action);
        if let Some(approval) = &state.approval {
            anstream::println!("  approved at {} · expires {}", approval.approved_at, approval.expires_at);
        }
    }
    if !state.evidence.is_empty() {
        anstream::println!();
        anstream::println!("evidence:");
        for evidence in &state.evidence {
            let mark = if evidence.passed { "ok" } else { "FAILED" };
            anstream::println!("  {mark:<6} {} {}", evidence.kind, evidence.detail);
        }
    }
    if let Some(error) = &state.error {
        anstream::println!();
        anstream::println!("{}", paint(RED, error));
    }
    exit_code::code(exit_code::DONE)
}

fn summarize_action(action: &serde_json::Value) -> Option<String> {
    let kind = action.get("kind")?.as_str()?;
    Some(match kind {
        "shell" => {
            let argv: Vec<String> =
                action.get("argv")?.as_array()?.iter().filter_map(|token| token.as_str()).map(quote).collect();
            format!("$ {}", argv.join(" "))
        }
        "write_file" | "read_file" => format!("{kind} {}", action.get("path")?.as_str()?),
        "ticket_lookup" | "ticket_close" => format!("{kind} {}", action.get("ticket_id")?.as_str()?),
        _ => return None,
    })
}

fn quote(token: &str) -> String {
    if !token.is_empty()
        && token.chars().all(|character| character.is_ascii_alphanumeric() || "-_./=:,".contains(character))
    {
        token.to_string()
    } else {
        format!("{token:?}")
    }
}
