//! `planrun replay <run_id>`: decides a recorded run again under today's
//! (or the given) plans and policies, executing nothing, and prints what
//! would now differ (see [`crate::ops::replay`]).

use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, GREEN, YELLOW, fail_with, paint};
use crate::ops::{self, ReplayInput, ReplayReport};
use crate::runtime::RuntimeEnv;
use crate::runtime::interpreter::{Decided, Difference, StepReplay};

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The run to replay (`latest`: the newest run, as for `show`).
    pub run_id: String,
    /// Print the report as JSON to stdout (see docs/replay.md).
    #[arg(long)]
    pub json: bool,
}

/// Exit code: 0 nothing would differ, 1 something would, 2 an unknown run,
/// a run whose records fail verification, plans or policies that do not
/// load, or a plan the given plans lack.
pub fn replay(args: &ReplayArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let run_id = match crate::cli::run_id_arg(&args.run_id) {
        Ok(run_id) => run_id,
        Err(code) => return code,
    };
    let input =
        ReplayInput { workspace: &dirs.workspace, run_id: &run_id, plans: &dirs.plans, policies: &dirs.policies };
    let report = match ops::replay(input, env) {
        Ok(report) => report,
        Err(error) => return fail_with(&error),
    };
    if args.json {
        anstream::println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        print_report(&report);
    }
    report.exit_status().into()
}

fn print_report(report: &ReplayReport) {
    anstream::println!(
        "{} run {} · plan {} · policy {} (executing nothing)",
        paint(BOLD, "replay:"),
        paint(BOLD, &report.run_id),
        report.plan,
        report.policy
    );
    if let (Some(goal), Some(route)) = (&report.goal, &report.route) {
        let routed = route.plan.as_deref().map_or("no plan".to_string(), |plan| format!("`{plan}`"));
        if route.elsewhere {
            anstream::println!(
                "{} goal {goal:?} now routes to {routed}, not `{}`: {}",
                paint(YELLOW, "≠"),
                report.plan,
                route.why
            );
        } else {
            anstream::println!("{} goal {goal:?} still routes to {routed}", paint(GREEN, "="));
        }
    }
    for step in &report.steps {
        anstream::println!("{}", step_line(step));
    }
    let verdict = if report.differs() { paint(YELLOW, "differs:") } else { paint(GREEN, "unchanged:") };
    anstream::println!(
        "{verdict} {} of {} steps and turns would differ{}",
        report.changed,
        report.steps.len(),
        if report.route.as_ref().is_some_and(|route| route.elsewhere) { ", and the route" } else { "" }
    );
}

/// One line: the step (and turn), the recorded and today's decision, and
/// what differs.
fn step_line(step: &StepReplay) -> String {
    let turn = step.turn.map(|turn| format!(" turn {turn}")).unwrap_or_default();
    let head = format!("{}{turn} ({}): {} → {}", step.step_id, step.kind, decision(&step.old), decision(&step.new));
    if step.differences.is_empty() {
        return format!("{} {head}", paint(GREEN, "="));
    }
    let what: Vec<String> = step.differences.iter().map(difference).collect();
    format!("{} {head}: {}", paint(YELLOW, "≠"), what.join("; "))
}

fn decision(decided: &Decided) -> String {
    match decided {
        Decided::Allow { .. } => "allow".to_string(),
        Decided::Approval { required_by, .. } => format!("approval ({required_by})"),
        Decided::Deny { rule, .. } => format!("deny (rule `{rule}`)"),
        other => other.name().replace('_', " "),
    }
}

fn difference(difference: &Difference) -> String {
    match difference {
        Difference::Denied { rule, reason } => format!("now denied by rule `{rule}`: {reason}"),
        Difference::NoLongerDenied { was_rule } => format!("no longer denied (was rule `{was_rule}`)"),
        Difference::NewlyNeedsApproval { required_by } => format!("now needs approval (required by {required_by})"),
        Difference::NoLongerNeedsApproval { was_required_by } => {
            format!("no longer needs approval (was required by {was_required_by})")
        }
        Difference::RenderedDifferently { fields } => {
            let fields: Vec<String> = fields
                .iter()
                .map(|change| format!("{} {} → {}", change.field, shown(&change.old), shown(&change.new)))
                .collect();
            format!("rendered differently: {}", fields.join(", "))
        }
        Difference::Unresolved { reason } => format!("no longer resolves: {reason}"),
        Difference::StepRemoved => "no longer in the plan".to_string(),
        Difference::NewStep => "a new step (not in the plan the run recorded)".to_string(),
        Difference::DecisionChanged { old, new } => format!("decided differently: {old} → {new}"),
    }
}

/// The longest value a report line shows, in characters (`--json` has it
/// whole).
const SHOWN_CHARS: usize = 120;

/// A field's value as JSON, cut to [`SHOWN_CHARS`] with `…`.
fn shown(value: &serde_json::Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}
