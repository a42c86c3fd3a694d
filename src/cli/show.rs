//! `planrun show <run_id>`: a run's timeline from its records.

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::exit_code;
use crate::cli::output::{BOLD, DIM, GREEN, RED, fail, paint};
use crate::model::RunStatus;
use crate::store::{StepRecordStatus, full_state, read_run, validate_run_id};

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run to show.
    pub run_id: String,
    /// Print the full seed-shaped state (plan with step statuses, history) as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Exit code: 0 when the run was shown, 2 for an unknown or invalid run id
/// or unreadable records.
pub fn show(args: &ShowArgs, dirs: &DirArgs) -> ExitCode {
    if let Err(error) = validate_run_id(&args.run_id) {
        return fail(exit_code::INVALID_INPUT, &error.to_string());
    }
    let records = match read_run(&dirs.workspace, &args.run_id) {
        Ok(records) => records,
        Err(error) => return fail(exit_code::INVALID_INPUT, &error.to_string()),
    };
    if args.json {
        anstream::println!("{}", serde_json::to_string_pretty(&full_state(&records)).unwrap_or_default());
        return exit_code::code(exit_code::DONE);
    }
    let state = &records.state;
    let status = match state.status {
        RunStatus::Done => paint(GREEN, state.status),
        RunStatus::Failed => paint(RED, state.status),
        RunStatus::Running => paint(BOLD, state.status),
    };
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
        "status: {status} ({}) · {} steps · {} tool calls · started {} · finished {}",
        state.stop_reason.as_deref().unwrap_or("-"),
        state.counters.steps,
        state.counters.tool_calls,
        state.started_at,
        state.finished_at.as_deref().unwrap_or("-")
    );
    anstream::println!();
    for record in &records.history {
        let status = match record.status {
            StepRecordStatus::Done => paint(GREEN, "done  "),
            StepRecordStatus::Failed => paint(RED, "failed"),
        };
        anstream::println!(
            "  {} {:<12} {:<10} {status} attempt {}  {} ms",
            paint(DIM, &record.started_at),
            record.step_id,
            record.kind,
            record.attempt,
            record.duration_ms
        );
        if let Some(action) = record.action.as_ref().and_then(summarize_action) {
            anstream::println!("      {}", paint(DIM, action));
        }
        if let Some(rule) = record.details.get("rule").and_then(|rule| rule.as_str()) {
            anstream::println!("      {}", paint(DIM, format!("rule {rule}")));
        }
        if let (Some(class), Some(error)) = (record.failure_class, &record.error) {
            anstream::println!("      {}", paint(RED, format!("{class}: {error}")));
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
