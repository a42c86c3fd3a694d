//! `planrun test [PATHS…] [--accept] [--review] [--snapshots DIR]
//! [--format text|github]`: parses the arguments, calls [`ops::test`] and
//! prints, per changed scenario, its behaviour summary and then every
//! mismatch with its diff; `--review` then asks about each pending
//! snapshot on stdin; `--format github` adds GitHub Actions annotations
//! (`test_github.rs`).

use std::io::BufRead;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, GREEN, RED, YELLOW, fail, paint, print_diagnostics};
use crate::cli::test_github::annotations;
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
    /// `github`: also print a GitHub Actions annotation (`::error
    /// file=…,line=…::…`) per changed or new snapshot and failed scenario.
    #[arg(long, value_enum, default_value_t = TestFormat::Text)]
    pub format: TestFormat,
}

/// How `planrun test` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    /// Summaries, diffs and counts for a person.
    Text,
    /// The same, plus GitHub Actions workflow commands that a CI log
    /// viewer shows beside the changed file.
    Github,
}

/// What `--review` was answered.
#[derive(Debug, Default)]
struct Tally {
    accepted: usize,
    rejected: usize,
    skipped: usize,
}

/// Exit code: 0 when every snapshot matches, 1 on a mismatch or an unmet
/// expectation (records that do not verify, and a new snapshot under
/// `CI=true`), 2 when a scenario file has errors.
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
        after_commands: None,
    });
    print_diagnostics(&outcome.sources, &outcome.diagnostics, Severity::Note);
    for error in &outcome.errors {
        anstream::eprintln!("{}: {error}", paint(RED, "error"));
    }
    let review_now = args.review && !ci;
    if args.review && ci {
        anstream::eprintln!("{}: `--review` asks nothing under CI=true", paint(YELLOW, "note"));
    }
    if args.format == TestFormat::Github {
        for line in annotations(&outcome) {
            anstream::println!("{line}");
        }
    }
    report(&outcome, !review_now);
    let tally = review_now.then(|| review(&mut outcome));
    summary(&outcome, tally.as_ref());
    outcome.exit_status().into()
}

/// Every problem, and for each scenario with new or changed snapshots its
/// behaviour summary and then each snapshot with its diff (unless
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
    for (index, result) in outcome.snapshots.iter().enumerate() {
        match &result.state {
            SnapshotState::Matched | SnapshotState::Rejected { .. } => {}
            SnapshotState::Accepted => {
                print_behaviour(outcome, index);
                anstream::println!("{} {}", paint(GREEN, "accepted"), display_path(&result.path));
            }
            SnapshotState::Changed { .. } | SnapshotState::New if show_pending => {
                print_behaviour(outcome, index);
                print_pending(result);
            }
            SnapshotState::Changed { .. } | SnapshotState::New => {}
        }
    }
}

/// Before the first snapshot of a scenario that is reported: what changed
/// in its behaviour, in one line.
fn print_behaviour(outcome: &TestOutcome, index: usize) {
    let result = &outcome.snapshots[index];
    let earlier = outcome.snapshots[..index].iter().any(|other| {
        other.scenario == result.scenario
            && other.scenario_file == result.scenario_file
            && other.state != SnapshotState::Matched
    });
    if earlier {
        return;
    }
    if let Some(change) = outcome.change_of(&result.scenario_file, &result.scenario) {
        anstream::println!("{} `{}`: {}", paint(BOLD, "behaviour"), change.scenario, change.sentences.join("; "));
    }
}

/// A changed snapshot with its diff, or a new one with its body.
fn print_pending(result: &SnapshotResult) {
    let (word, style) = match result.state {
        SnapshotState::Changed { .. } => ("changed", RED),
        SnapshotState::New => ("new", YELLOW),
        SnapshotState::Matched | SnapshotState::Accepted | SnapshotState::Rejected { .. } => return,
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

fn summary(outcome: &TestOutcome, tally: Option<&Tally>) {
    let matched = outcome.count(|state| matches!(state, SnapshotState::Matched));
    let changed = outcome.count(|state| matches!(state, SnapshotState::Changed { .. }));
    let new = outcome.count(|state| matches!(state, SnapshotState::New));
    let accepted = outcome.count(|state| matches!(state, SnapshotState::Accepted));
    let rejected = outcome.count(|state| matches!(state, SnapshotState::Rejected { .. }));
    let problems: usize = outcome.problems.iter().map(|scenario| scenario.problems.len()).sum();
    let rejected = if rejected > 0 { format!(", {rejected} rejected") } else { String::new() };
    anstream::println!(
        "{}: {} scenario(s), {} snapshot(s): {matched} matched, {changed} changed, {new} new, {accepted} accepted{rejected}; {problems} failed expectation(s)",
        paint(BOLD, "planrun test"),
        outcome.scenarios,
        outcome.snapshots.len(),
    );
    if let Some(tally) = tally {
        anstream::println!(
            "{}: {} accepted, {} rejected, {} skipped",
            paint(BOLD, "review"),
            tally.accepted,
            tally.rejected,
            tally.skipped
        );
    }
    let pending = changed + new;
    if pending > 0 && outcome.ci {
        anstream::println!("under CI=true nothing was written; run `planrun test --review` or `--accept` locally");
    } else if pending > 0 {
        anstream::println!(
            "{pending} snapshot(s) left pending as `.snap.new`: review with `planrun test --review` (or `cargo insta review`), or accept all with `planrun test --accept`"
        );
    } else if tally.is_some() {
        anstream::println!("nothing left pending");
    }
}

/// Asks about each pending snapshot: `a` accepts it, `r` rejects it (its
/// `.snap.new` is removed), anything else skips it; end of input skips the
/// rest. Every answer is confirmed on a line of its own.
fn review(outcome: &mut TestOutcome) -> Tally {
    let pending: Vec<usize> = (0..outcome.snapshots.len())
        .filter(|&index| matches!(outcome.snapshots[index].state, SnapshotState::New | SnapshotState::Changed { .. }))
        .collect();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut tally = Tally::default();
    for (position, index) in pending.iter().enumerate() {
        print_behaviour(outcome, *index);
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
        let answer = match lines.next() {
            Some(Ok(answer)) => answer,
            _ => {
                tally.skipped += pending.len() - position;
                break;
            }
        };
        let path = display_path(&result.path);
        let new = result.state == SnapshotState::New;
        let done = match answer.trim() {
            "a" | "accept" => ops::accept_snapshot(result).map(|()| Some(SnapshotState::Accepted)),
            "r" | "reject" => ops::reject_snapshot(result).map(|()| Some(SnapshotState::Rejected { new })),
            _ => Ok(None),
        };
        match done {
            Ok(Some(SnapshotState::Accepted)) => {
                tally.accepted += 1;
                anstream::println!("{} {path}", paint(GREEN, "accepted"));
                outcome.snapshots[*index].state = SnapshotState::Accepted;
            }
            Ok(Some(state)) => {
                tally.rejected += 1;
                let kept = if new { "no golden file" } else { "the golden file stays" };
                anstream::println!("{} {path} ({kept}; its `.snap.new` is removed)", paint(RED, "rejected"));
                outcome.snapshots[*index].state = state;
            }
            Ok(None) => {
                tally.skipped += 1;
                anstream::println!("{} {path} (left pending as `.snap.new`)", paint(YELLOW, "skipped"));
            }
            Err(error) => outcome.errors.push(error.to_string()),
        }
    }
    tally
}
