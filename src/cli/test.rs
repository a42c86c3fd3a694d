//! `planrun test [PATHS…] [--accept] [--review] [--snapshots DIR]`: parses
//! the arguments, calls [`ops::test`] and prints every mismatch; `--review`
//! then asks about each pending snapshot on stdin.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, GREEN, RED, YELLOW, fail, paint, print_diagnostics};
use crate::diag::Severity;
use crate::diag::display_path;
use crate::ops::{self, ExitStatus, SnapshotResult, SnapshotState, TestInput, TestOutcome};
use crate::runtime::process_var;

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Scenario files, plan files (their `<plan>.scenarios.toml` beside
    /// them) or folders; without paths, every scenario file in `--plans`.
    pub paths: Vec<PathBuf>,
    /// Write new and changed snapshots as the golden `.snap` files.
    #[arg(long, conflicts_with = "review")]
    pub accept: bool,
    /// Walk the new and changed snapshots one by one: accept, reject or skip
    /// each (answers read from stdin).
    #[arg(long)]
    pub review: bool,
    /// The snapshots folder (default `snapshots/` beside the plans folder).
    #[arg(long, value_name = "DIR")]
    pub snapshots: Option<PathBuf>,
}

/// Exit code: 0 when every snapshot matches, 1 on a mismatch or an unmet
/// expectation (and on a new snapshot under `CI=true`), 2 when a scenario
/// file has errors.
pub fn test(args: &TestArgs, dirs: &DirArgs) -> ExitCode {
    let program = match std::env::current_exe() {
        Ok(program) => program,
        Err(error) => return fail(ExitStatus::InvalidInput, &format!("cannot find the planrun binary: {error}")),
    };
    let ci = process_var("CI").is_some_and(|value| !matches!(value.as_str(), "" | "0" | "false"));
    let mut outcome = ops::test(TestInput {
        paths: &args.paths,
        plans: &dirs.plans,
        policies: &dirs.policies,
        snapshots: args.snapshots.as_deref(),
        program: &program,
        accept: args.accept,
        ci,
    });
    print_diagnostics(&outcome.sources, &outcome.diagnostics, Severity::Note);
    for error in &outcome.errors {
        anstream::eprintln!("{}: {error}", paint(RED, "error"));
    }
    let review_now = args.review && !ci;
    if args.review && ci {
        anstream::eprintln!("{}: `--review` asks nothing under CI=true", paint(YELLOW, "note"));
    }
    report(&outcome, !review_now);
    if review_now {
        review(&mut outcome);
    }
    summary(&outcome);
    outcome.exit_status().into()
}

/// Every problem, and every changed or new snapshot with its diff (unless
/// `--review` shows each diff with its question).
fn report(outcome: &TestOutcome, show_pending: bool) {
    for scenario in &outcome.problems {
        for problem in &scenario.problems {
            anstream::println!(
                "{} scenario `{}` ({}): {problem}",
                paint(RED, "failed"),
                scenario.scenario,
                scenario.scenario_file
            );
        }
    }
    for result in &outcome.snapshots {
        match &result.state {
            SnapshotState::Matched => {}
            SnapshotState::Accepted => {
                anstream::println!("{} {}", paint(GREEN, "accepted"), display_path(&result.path));
            }
            SnapshotState::Changed { .. } | SnapshotState::New if show_pending => print_pending(result),
            SnapshotState::Changed { .. } | SnapshotState::New => {}
        }
    }
}

/// A changed snapshot with its diff, or a new one with its body.
fn print_pending(result: &SnapshotResult) {
    let (word, style) = match result.state {
        SnapshotState::Changed { .. } => ("changed", RED),
        SnapshotState::New => ("new", YELLOW),
        SnapshotState::Matched | SnapshotState::Accepted => return,
    };
    anstream::println!("{} {} (scenario `{}`)", paint(style, word), display_path(&result.path), result.scenario);
    match &result.state {
        SnapshotState::Changed { diff } => anstream::print!("{diff}"),
        _ => anstream::print!("{}", new_body(result)),
    }
}

/// A new snapshot's body, each line marked `+` like the added side of a diff.
fn new_body(result: &SnapshotResult) -> String {
    result.body.lines().map(|line| format!("+{line}\n")).collect()
}

fn summary(outcome: &TestOutcome) {
    let matched = outcome.count(|state| matches!(state, SnapshotState::Matched));
    let changed = outcome.count(|state| matches!(state, SnapshotState::Changed { .. }));
    let new = outcome.count(|state| matches!(state, SnapshotState::New));
    let accepted = outcome.count(|state| matches!(state, SnapshotState::Accepted));
    let problems: usize = outcome.problems.iter().map(|scenario| scenario.problems.len()).sum();
    anstream::println!(
        "{}: {} scenario(s), {} snapshot(s): {matched} matched, {changed} changed, {new} new, {accepted} accepted; {problems} failed expectation(s)",
        paint(BOLD, "planrun test"),
        outcome.scenarios,
        outcome.snapshots.len(),
    );
    if changed + new > 0 {
        let pending = if outcome.ci {
            "under CI=true nothing was written; run `planrun test --review` or `--accept` locally"
        } else {
            "pending as `.snap.new`: review with `planrun test --review` (or `cargo insta review`), or accept all with `planrun test --accept`"
        };
        anstream::println!("{pending}");
    }
}

/// Asks about each pending snapshot: `a` accepts it, `r` rejects it (its
/// `.snap.new` is removed), anything else skips it; end of input skips the rest.
fn review(outcome: &mut TestOutcome) {
    let pending: Vec<usize> = (0..outcome.snapshots.len())
        .filter(|&index| matches!(outcome.snapshots[index].state, SnapshotState::New | SnapshotState::Changed { .. }))
        .collect();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    for (position, index) in pending.iter().enumerate() {
        let result = &outcome.snapshots[*index];
        print_pending(result);
        anstream::println!(
            "{} [{}/{}] {} (scenario `{}`): [a]ccept, [r]eject, [s]kip?",
            paint(BOLD, "review"),
            position + 1,
            pending.len(),
            display_path(&result.path),
            result.scenario
        );
        let Some(Ok(answer)) = lines.next() else { break };
        let done = match answer.trim() {
            "a" | "accept" => ops::accept_snapshot(result).map(|()| Some(SnapshotState::Accepted)),
            "r" | "reject" => ops::reject_snapshot(result).map(|()| None),
            _ => Ok(None),
        };
        match done {
            Ok(Some(state)) => {
                anstream::println!("{} {}", paint(GREEN, "accepted"), display_path(&result.path));
                outcome.snapshots[*index].state = state;
            }
            Ok(None) => {}
            Err(error) => outcome.errors.push(error.to_string()),
        }
    }
}
