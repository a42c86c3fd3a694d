//! `planrun show <run_id>`: a run's timeline from its verified records
//! (`latest`: the newest run).
//!
//! A header (plan, goal, status, who drives a run recorded as `running` or
//! that it was interrupted, the finish message), then one line per attempt (time, step, kind, status, attempt, duration), then
//! what ran (argv, path or ticket), the rule that decided, receipts, the
//! failure class and error, and the first line of the output (with
//! `--full` all of it and the kept end of stderr, failed or not), with the
//! interruptions and resumes between them (a resume, a left-over child it
//! stopped); then approval
//! events, a pending action, completion evidence, and a footer that sums up
//! steps, attempts and failures by class. Colour on a terminal, plain
//! otherwise (`NO_COLOR`, `--color never`, or output to a file or pipe).

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, DIM, GREEN, RED, YELLOW, fail_with, paint, record_status, run_status};
use crate::cli::runs::holder_note;
use crate::model::{FailureClass, RunStatus, StopReason};
use crate::ops::{self, ExitStatus};
use crate::policy::display_argv;
use crate::runtime::RuntimeEnv;
use crate::runtime::event::{ChildStopped, RunResumed};
use crate::store::{AuditEvent, Holder, StepRecord, StepRecordStatus, StoreError, full_state};
use crate::tools::ResolvedAction;

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run to show; `latest` is the newest run (unless a run has that id).
    pub run_id: String,
    /// Print every attempt's whole output and the kept end of its stderr, not the output's first line.
    #[arg(long)]
    pub full: bool,
    /// Print the full state as JSON: the plan with each step's status and attempts, and the whole history.
    #[arg(long)]
    pub json: bool,
}

/// Exit code: 0 when the run was shown (a queued one included), 2 for an
/// unknown or invalid run id or records that fail verification.
pub fn show(args: &ShowArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    let run = match ops::show(&dirs.workspace, &run_id, env) {
        Ok(run) => run,
        Err(ops::OpsError::Records(StoreError::Queued { id })) => return show_queued(&id, args.json, dirs, env),
        Err(error) => return fail_with(&error),
    };
    if args.json {
        anstream::println!("{}", serde_json::to_string_pretty(&full_state(&run)).unwrap_or_default());
        return ExitStatus::Done.into();
    }
    // Who drives a run recorded as `running` (nobody: interrupted).
    let (run, holder) = match ops::driven_run(&dirs.workspace, run, env) {
        Ok(driven) => driven,
        Err(error) => return fail_with(&error),
    };
    let state = &run.state;
    anstream::println!(
        "run {} · plan {} ({}) · policy {}",
        paint(BOLD, &state.run_id),
        state.plan.id,
        state.plan.path,
        state.plan.policy
    );
    for (name, value) in &state.inputs {
        anstream::println!("input: {name} = {value}");
    }
    if let Some(goal) = &state.goal {
        anstream::println!("goal: {goal:?}");
    }
    let status = match holder {
        Some(Holder::Nobody) => paint(RED, "interrupted"),
        _ => run_status(state.status),
    };
    anstream::println!(
        "status: {status} ({}) · {} steps · {} tool calls · started {} · finished {}",
        state.stop_reason.as_ref().map_or("-", StopReason::as_str),
        state.counters.steps,
        state.counters.tool_calls,
        state.started_at,
        state.finished_at.as_deref().unwrap_or("-")
    );
    if !state.failed_steps.is_empty() {
        anstream::println!("failed steps (on_failure = \"continue\"): {}", state.failed_steps.join(", "));
    }
    if let Some(holder) = &holder {
        anstream::println!("{}", holder_note(&state.run_id, holder));
    }
    if let Some(message) = finish_message(&run.history) {
        anstream::println!("message: {message}");
    }
    anstream::println!();
    // Interruptions and resumes, each before the first record written
    // after it (times are no guide: each process has its own clock).
    let mut interruptions = interruptions(&run.audit).into_iter().peekable();
    for (index, record) in run.history.iter().enumerate() {
        while let Some((_, event)) = interruptions.next_if(|(before, _)| *before <= index) {
            print_interruption(event);
        }
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
        if let Some(rule) = record.details.rule() {
            anstream::println!("      {}", paint(DIM, format!("rule {rule}")));
        }
        if let Some(receipt) = record.details.receipt() {
            anstream::println!("      {}", paint(DIM, format!("receipt: {receipt}")));
        }
        if let Some(reason) = record.details.reason()
            && record.status == StepRecordStatus::Skipped
        {
            anstream::println!("      {}", paint(YELLOW, format!("skipped: {reason}")));
        }
        if let (Some(class), Some(error)) = (record.failure_class, &record.error) {
            anstream::println!("      {}", paint(RED, format!("{class}: {error}")));
        }
        if args.full {
            print_full_text("output:", &record.output_text);
            print_full_text("stderr:", record.stderr_text.as_deref().unwrap_or_default());
        } else if let Some(line) = first_line(&record.output_text) {
            anstream::println!("      {}", paint(DIM, format!("output: {line}")));
        }
    }
    interruptions.for_each(|(_, event)| print_interruption(event));
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
    anstream::println!();
    anstream::println!("{}", summary(&run.history));
    if let Some(error) = &state.error {
        anstream::println!("{}", paint(RED, error));
    }
    ExitStatus::Done.into()
}

/// What the timeline says of a `run_resumed` or `child_stopped` event
/// (`None` for any other event).
fn interruption(event: &AuditEvent) -> Option<String> {
    fn details<T: serde::de::DeserializeOwned>(event: &AuditEvent) -> Option<T> {
        serde_json::from_value(serde_json::Value::Object(event.details.clone())).ok()
    }
    match event.event_type.as_str() {
        "run_resumed" => {
            let Some(resumed) = details::<RunResumed>(event) else {
                return Some("resumed (its details are not in a shape this version reads)".to_string());
            };
            let (from, version) = (resumed.from_status, resumed.from_state_version);
            Some(if from == RunStatus::Running {
                let (lines, records) = (resumed.events_after_checkpoint, resumed.discarded_history_records);
                let set_aside = if lines > 0 || records > 0 {
                    format!(" ({lines} log line(s) and {records} history record(s) after it set aside)")
                } else {
                    String::new()
                };
                format!("interrupted; resumed from its checkpoint at state version {version}{set_aside}")
            } else {
                format!("resumed from `{from}` at state version {version}")
            })
        }
        "child_stopped" => Some(match details::<ChildStopped>(event) {
            Some(stopped) => format!("stopped the child (pid {}) the interrupted process left running", stopped.pid),
            None => "stopped the child the interrupted process left running".to_string(),
        }),
        _ => None,
    }
}

fn print_interruption(event: &AuditEvent) {
    if let Some(text) = interruption(event) {
        anstream::println!(
            "  {} {:<12} {}",
            paint(DIM, &event.ts),
            event.step_id.as_deref().unwrap_or("-"),
            paint(YELLOW, text)
        );
    }
}

/// The `run_resumed` and `child_stopped` events of `audit`, each with how
/// many history records were written before it (one per
/// `step_finished`, `retry_attempt_finished`, `step_skipped` and
/// `reconciliation_settled` event).
fn interruptions(audit: &[AuditEvent]) -> Vec<(usize, &AuditEvent)> {
    let mut records = 0;
    let mut found = Vec::new();
    for event in audit {
        match event.event_type.as_str() {
            "step_finished" | "retry_attempt_finished" | "step_skipped" | "reconciliation_settled" => records += 1,
            _ if interruption(event).is_some() => found.push((records, event)),
            _ => {}
        }
    }
    found
}

/// `2 step(s) done, 0 failed · 3 attempt(s), 6000 ms in steps · failures: execution_error ×1`.
fn summary(history: &[StepRecord]) -> String {
    let mut last_status: Vec<(&str, StepRecordStatus)> = Vec::new();
    let mut failures: BTreeMap<FailureClass, usize> = BTreeMap::new();
    for record in history {
        match last_status.iter_mut().find(|(step, _)| *step == record.step_id) {
            Some(entry) => entry.1 = record.status,
            None => last_status.push((&record.step_id, record.status)),
        }
        if let Some(class) = record.failure_class {
            *failures.entry(class).or_default() += 1;
        }
    }
    let count = |wanted: StepRecordStatus| last_status.iter().filter(|(_, status)| *status == wanted).count();
    let (done, failed, skipped) =
        (count(StepRecordStatus::Done), count(StepRecordStatus::Failed), count(StepRecordStatus::Skipped));
    let total_ms: u64 = history.iter().map(|record| record.duration_ms).sum();
    let failures = if failures.is_empty() {
        "no failures".to_string()
    } else {
        let list = failures.iter().map(|(class, count)| format!("{class} ×{count}")).collect::<Vec<_>>().join(", ");
        format!("failures: {}", paint(RED, list))
    };
    let skipped = if skipped > 0 { format!(", {skipped} skipped") } else { String::new() };
    format!(
        "{} step(s) done, {} failed{skipped} · {} attempt(s), {total_ms} ms in steps · {failures}",
        paint(GREEN, done),
        if failed > 0 { paint(RED, failed) } else { failed.to_string() },
        history.len()
    )
}

/// The message of the run's `finish` step that is done, if it has one
/// (one line; a multi-line message goes on with an indent).
fn finish_message(history: &[StepRecord]) -> Option<String> {
    let record =
        history.iter().rev().find(|record| record.kind == "finish" && record.status == StepRecordStatus::Done)?;
    let message = record.output_text.trim_end();
    (!message.is_empty()).then(|| message.lines().collect::<Vec<_>>().join("\n         "))
}

/// `label` (`output:`, `stderr:`) then every line of what a step printed
/// to that stream, indented under it; nothing for an empty one.
fn print_full_text(label: &str, text: &str) {
    let text = text.trim_end();
    if text.is_empty() {
        return;
    }
    anstream::println!("      {}", paint(DIM, label));
    for line in text.lines() {
        anstream::println!("        {line}");
    }
}

/// The first non-empty line of a step's output, shortened to 80 characters.
fn first_line(output: &str) -> Option<String> {
    let line = output.lines().map(str::trim_end).find(|line| !line.is_empty())?;
    let mut shown: String = line.chars().take(80).collect();
    if line.chars().count() > 80 || output.trim_end().lines().nth(1).is_some() {
        shown.push('…');
    }
    Some(shown)
}

/// A step's resolved action in a few words (`None` for an action that
/// says nothing worth showing, or one this version does not read).
fn summarize_action(action: &serde_json::Value) -> Option<String> {
    let action: ResolvedAction = serde_json::from_value(action.clone()).ok()?;
    Some(match action {
        ResolvedAction::Shell { argv, .. } => format!("$ {}", display_argv(&argv)),
        ResolvedAction::WriteFile { path, .. } => format!("write_file {path}"),
        ResolvedAction::ReadFile { path } => format!("read_file {path}"),
        ResolvedAction::TicketLookup { ticket_id } => format!("ticket_lookup {ticket_id}"),
        ResolvedAction::TicketClose { ticket_id } => format!("ticket_close {ticket_id}"),
        ResolvedAction::Mcp { server, tool, .. } => format!("mcp {server} {tool}"),
        ResolvedAction::Http { method, url, .. } => format!("{method} {url}"),
        ResolvedAction::Finish { .. } | ResolvedAction::Flaky { .. } => return None,
    })
}

/// A queued run: what it was submitted with, and that no worker started
/// it yet (exit 0: it was shown).
fn show_queued(run_id: &str, json: bool, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let queued = match crate::cli::run_id_arg(run_id)
        .and_then(|id| ops::queued_run(&dirs.workspace, &id, env).map_err(|error| fail_with(&error)))
    {
        Ok(Some(queued)) => queued,
        // Started between the two reads: shown as it is now.
        Ok(None) => return show(&ShowArgs { run_id: run_id.to_string(), full: false, json }, dirs, env),
        Err(code) => return code,
    };
    if json {
        let value = serde_json::json!({
            "run_id": queued.run_id, "status": "queued", "plan_path": queued.plan_path, "goal": queued.goal,
            "starting": queued.starting,
        });
        anstream::println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        return ExitStatus::Done.into();
    }
    anstream::println!("run {} · plan {}", paint(BOLD, &queued.run_id), queued.plan_path.as_deref().unwrap_or("-"));
    if let Some(goal) = &queued.goal {
        anstream::println!("goal: {goal:?}");
    }
    let who = if queued.starting {
        "a worker is starting it"
    } else {
        "waiting for a `planrun worker` or `planrun serve` of this workspace"
    };
    anstream::println!("status: {} · {who}; no records yet", paint(YELLOW, "queued"));
    ExitStatus::Done.into()
}
