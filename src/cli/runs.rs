//! `planrun runs [--status S] [--json]`: the runs of the workspace, newest
//! first, one line each (id, plan, status, stop reason, steps, started,
//! duration; times with milliseconds). A run whose records fail verification is listed as
//! `unreadable` with the reason, and the command exits 2; a queued run
//! (database store, not started by a worker yet) as `queued`. A run recorded
//! as `running` that no process drives (its lock or lease is free: the
//! process died) is listed as `interrupted`; notes under the table say who
//! drives each running run, and how to continue or end an interrupted one.

use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, RED, fail_with, paint, run_status};
use crate::diag::display_path;
use crate::model::RunStatus;
use crate::ops::{self, ListedRun, RunSummary, RunsInput, StatusFilter};
use crate::runtime::RuntimeEnv;
use crate::store::{Holder, RunsPlace};

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs with this status, as shown: `interrupted`, or a recorded status (`running` leaves out interrupted runs; runs whose records fail verification are always listed).
    #[arg(long, value_name = "STATUS", value_parser = parse_status)]
    pub status: Option<StatusFilter>,
    /// Print the list as a JSON array.
    #[arg(long)]
    pub json: bool,
}

/// A `--status` value: a status as `state.json` spells it, or `interrupted`.
fn parse_status(name: &str) -> Result<StatusFilter, String> {
    StatusFilter::parse(name).ok_or_else(|| {
        let mut known: Vec<&str> = RunStatus::ALL.iter().map(|status| status.as_str()).collect();
        known.push("interrupted");
        format!("not a run status; one of: {}", known.join(", "))
    })
}

/// Exit code: 0 when every listed run verified (an empty list included), 2
/// when one failed verification or the runs folder cannot be read.
pub fn runs(args: &RunsArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let input = RunsInput { workspace: &dirs.workspace, status: args.status };
    let outcome = match ops::runs(input, env) {
        Ok(outcome) => outcome,
        Err(error) => return fail_with(&error),
    };
    if args.json {
        let list: Vec<Value> = outcome.runs.iter().map(listed_json).collect();
        anstream::println!("{}", serde_json::to_string_pretty(&list).unwrap_or_default());
    } else if outcome.runs.is_empty() {
        let filter = args.status.map(|status| format!(" with status {}", status.as_str())).unwrap_or_default();
        let place = match &outcome.place {
            RunsPlace::Folder(folder) => display_path(folder),
            RunsPlace::Database { store, workspace_id } => {
                format!("{store} for workspace {} (id {workspace_id})", display_path(&dirs.workspace))
            }
        };
        anstream::println!("no runs{filter} in {place}");
    } else {
        print_table(&outcome.runs);
    }
    outcome.exit_status().into()
}

fn print_table(runs: &[ListedRun]) {
    let id_width = runs.iter().map(|run| listed_id(run).chars().count()).max().unwrap_or(0).max(2);
    let summaries =
        || runs.iter().filter_map(|run| if let ListedRun::Readable(summary) = run { Some(summary) } else { None });
    let plan_width = runs.iter().filter_map(listed_plan).map(|plan| plan.chars().count()).max().unwrap_or(0).max(4);
    let stop_width = summaries().map(|summary| stop_shown(summary).len()).max().unwrap_or(0).max("STOP REASON".len());
    let header = format!(
        "{:<id_width$}  {:<plan_width$}  {:<16}  {:<stop_width$}  {:>5}  {:<24}  DURATION",
        "ID", "PLAN", "STATUS", "STOP REASON", "STEPS", "STARTED"
    );
    anstream::println!("{}", paint(BOLD, header.trim_end()));
    for run in runs {
        match run {
            ListedRun::Readable(summary) => {
                let status = if summary.interrupted() { paint(RED, INTERRUPTED) } else { run_status(summary.status) };
                // Padded before colouring: escape codes have no width.
                let shown = if summary.interrupted() { INTERRUPTED } else { summary.status.as_str() };
                let padding = " ".repeat(16usize.saturating_sub(shown.len()));
                anstream::println!(
                    "{:<id_width$}  {:<plan_width$}  {status}{padding}  {:<stop_width$}  {:>5}  {:<24}  {}",
                    summary.run_id,
                    summary.plan,
                    stop_shown(summary),
                    summary.steps,
                    column_time(&summary.started_at),
                    summary.duration_ms.map_or_else(|| "-".to_string(), duration)
                );
            }
            ListedRun::Unreadable { run_id, error } => {
                anstream::println!("{run_id:<id_width$}  {}", paint(RED, format!("unreadable: {error}")));
            }
            ListedRun::Queued(queued) => {
                let plan = listed_plan(run).unwrap_or_default();
                let state = if queued.starting { "queued (a worker is starting it)" } else { "queued" };
                anstream::println!("{:<id_width$}  {plan:<plan_width$}  {state}", queued.run_id);
            }
        }
    }
    // Who drives each running run; what to do with an interrupted one.
    let mut notes = summaries().filter_map(|summary| Some((summary, summary.holder.as_ref()?))).peekable();
    if notes.peek().is_some() {
        anstream::println!();
    }
    for (summary, holder) in notes {
        anstream::println!("{}", holder_note(&summary.run_id, holder));
    }
}

/// What the STATUS column says of a run recorded as `running` that no
/// process drives.
const INTERRUPTED: &str = "interrupted";

/// One line on who drives run `run_id` (recorded as `running`), or, when
/// nobody does, that it was interrupted and the commands that continue or
/// end it (`runs` and `show` alike).
pub fn holder_note(run_id: &str, holder: &Holder) -> String {
    match holder {
        Holder::Nobody => format!(
            "{run_id}: {}: no process is driving it (its process has stopped or died); `planrun resume \
             {run_id}` continues it, `planrun cancel {run_id}` ends it",
            paint(RED, INTERRUPTED)
        ),
        holder => format!("{run_id}: running, driven by {holder}"),
    }
}

/// What the PLAN column shows for `run` (an unreadable run has none).
fn listed_plan(run: &ListedRun) -> Option<&str> {
    match run {
        ListedRun::Readable(summary) => Some(&summary.plan),
        ListedRun::Unreadable { .. } => None,
        ListedRun::Queued(queued) => Some(queued.plan_path.as_deref().unwrap_or("-")),
    }
}

fn listed_id(run: &ListedRun) -> &str {
    match run {
        ListedRun::Readable(summary) => &summary.run_id,
        ListedRun::Unreadable { run_id, .. } => run_id,
        ListedRun::Queued(queued) => &queued.run_id,
    }
}

/// A recorded time as the STARTED column shows it: RFC 3339 in UTC with
/// exactly 3 digits of milliseconds (`2026-01-01T00:00:35.800Z`), so the
/// column lines up whatever precision the record has (kept as written in
/// `--json`); a time that cannot be read is shown as written.
fn column_time(recorded: &str) -> String {
    match recorded.parse::<jiff::Timestamp>() {
        Ok(time) => format!("{time:.3}"),
        Err(_) => recorded.to_string(),
    }
}

/// `850 ms`, `23.0 s`, `12 min 5 s`.
fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// The stop reason as the table shows it, marked when the run ended with
/// failed steps (`end_of_plan, 1 failed`).
fn stop_shown(summary: &RunSummary) -> String {
    let reason = summary.stop_reason.as_deref().unwrap_or("-");
    match summary.failed_steps.len() {
        0 => reason.to_string(),
        failed => format!("{reason}, {failed} failed"),
    }
}

fn listed_json(run: &ListedRun) -> Value {
    match run {
        ListedRun::Readable(RunSummary {
            run_id,
            plan,
            status,
            stop_reason,
            failed_steps,
            steps,
            started_at,
            finished_at,
            duration_ms,
            holder,
        }) => {
            let mut value = json!({
                "run_id": run_id, "plan": plan, "status": status, "stop_reason": stop_reason, "steps": steps,
                "started_at": started_at, "finished_at": finished_at, "duration_ms": duration_ms,
                "interrupted": holder.as_ref() == Some(&Holder::Nobody),
                "driven_by": holder.as_ref().filter(|holder| **holder != Holder::Nobody).map(Holder::to_string),
            });
            if !failed_steps.is_empty() {
                value["failed_steps"] = json!(failed_steps);
            }
            value
        }
        ListedRun::Unreadable { run_id, error } => json!({"run_id": run_id, "status": "unreadable", "error": error}),
        ListedRun::Queued(queued) => json!({
            "run_id": queued.run_id, "status": "queued", "plan_path": queued.plan_path, "goal": queued.goal,
            "starting": queued.starting,
        }),
    }
}
