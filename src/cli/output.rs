//! Output helpers: colour, error lines, diagnostics and the per-step
//! progress printer (paths are shown with [`crate::diag::display_path`]).

use std::path::Path;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};

use crate::cli::ColorChoice;
use crate::diag::{Diagnostic, Severity, SourceMap, display_path, render};
use crate::model::{Plan, Policy, RunStatus, Step};
use crate::ops::{ExitStatus, OpsError};
use crate::runtime::Progress;
use crate::store::{RunState, StepRecord, StepRecordStatus};

pub const GREEN: Style = AnsiColor::Green.on_default();
pub const RED: Style = AnsiColor::Red.on_default().bold();
pub const YELLOW: Style = AnsiColor::Yellow.on_default();
pub const CYAN: Style = AnsiColor::Cyan.on_default();
pub const BOLD: Style = Style::new().bold();
pub const DIM: Style = Style::new().dimmed();

/// Applies `--color` (`auto` honours `NO_COLOR`, `CLICOLOR_FORCE` and
/// whether the stream is a terminal).
pub fn set_color(choice: ColorChoice) {
    let choice = match choice {
        ColorChoice::Auto => anstream::ColorChoice::Auto,
        ColorChoice::Always => anstream::ColorChoice::Always,
        ColorChoice::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
}

/// `text` in `style` (stripped later when colour is off).
pub fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}

/// Prints `error: <message>` to stderr and returns `code`.
pub fn fail(code: ExitStatus, message: &str) -> ExitCode {
    anstream::eprintln!("{}: {message}", paint(RED, "error"));
    ExitCode::from(code)
}

/// Renders diagnostics to stderr (used when invalid files stop a command).
pub fn print_diagnostics<'d>(
    sources: &SourceMap,
    diagnostics: impl IntoIterator<Item = &'d Diagnostic>,
    min: Severity,
) {
    for diagnostic in diagnostics.into_iter().filter(|diagnostic| diagnostic.severity >= min) {
        anstream::eprintln!("{}", colour_diagnostic(&render(sources, diagnostic), diagnostic.severity));
    }
}

/// Colours the header word of a rendered diagnostic.
pub fn colour_diagnostic(rendered: &str, severity: Severity) -> String {
    let style = match severity {
        Severity::Error => RED,
        Severity::Warning => YELLOW,
        Severity::Note => CYAN,
    };
    let word = severity.as_str();
    match rendered.strip_prefix(word) {
        Some(rest) => format!("{}{rest}", paint(style, word)),
        None => rendered.to_string(),
    }
}

/// A run status, coloured.
pub fn run_status(status: RunStatus) -> String {
    match status {
        RunStatus::Done => paint(GREEN, status),
        RunStatus::Failed | RunStatus::Rejected | RunStatus::Cancelled => paint(RED, status),
        RunStatus::Running | RunStatus::WaitingApproval => paint(YELLOW, status),
    }
}

/// A step record's status, coloured and padded to one width.
pub fn record_status(status: StepRecordStatus) -> String {
    match status {
        StepRecordStatus::Done => paint(GREEN, "done   "),
        StepRecordStatus::Failed => paint(RED, "failed "),
        StepRecordStatus::Skipped => paint(YELLOW, "skipped"),
    }
}

/// Prints a use case's error (the file findings behind it first) and
/// returns its exit code.
pub fn fail_with(error: &OpsError) -> ExitCode {
    if let Some((sources, diagnostics)) = error.findings() {
        print_diagnostics(sources, diagnostics, Severity::Error);
    }
    fail(error.exit_status(), &error.to_string())
}

/// Prints why the catalog could not be loaded (for commands that read it
/// but run nothing) and returns its exit code.
pub fn invalid_catalog(error: &OpsError) -> ExitCode {
    match error {
        OpsError::InvalidFiles { sources, diagnostics } => {
            print_diagnostics(sources, diagnostics, Severity::Error);
            fail(error.exit_status(), "plan or policy files are invalid; run `planrun check`")
        }
        other => fail_with(other),
    }
}

/// Prints one line per step attempt to stderr as it finishes.
pub struct StderrProgress;

impl Progress for StderrProgress {
    fn run_started(&mut self, run_id: &str, plan: &Plan, policy: &Policy, _run_dir: &Path) {
        anstream::eprintln!(
            "{} run {} · plan {} ({}) · policy {}",
            paint(BOLD, "planrun:"),
            paint(BOLD, run_id),
            plan.id,
            plan.source.path,
            policy.name
        );
    }

    fn step_finished(&mut self, index: usize, total: usize, step: &Step, record: &StepRecord) {
        let status = record_status(record.status);
        let mut line = format!(
            "  [{}/{total}] {:<12} {:<10} {status} attempt {}  {} ms",
            index + 1,
            step.id,
            step.action.kind(),
            record.attempt,
            record.duration_ms
        );
        if let (Some(class), Some(error)) = (record.failure_class, &record.error) {
            line.push_str(&format!("  {}", paint(RED, format!("{class}: {error}"))));
        }
        anstream::eprintln!("{line}");
    }

    fn run_finished(&mut self, state: &RunState, run_dir: &Path) {
        let status = run_status(state.status);
        anstream::eprintln!(
            "{} run {} {status} ({}) · {} steps · {} tool calls · records in {}",
            paint(BOLD, "planrun:"),
            paint(BOLD, &state.run_id),
            state.stop_reason.as_deref().unwrap_or("-"),
            state.counters.steps,
            state.counters.tool_calls,
            display_path(run_dir)
        );
        if let Some(error) = &state.error {
            anstream::eprintln!("  {}", paint(RED, error));
        }
    }

    fn run_paused(&mut self, state: &RunState, run_dir: &Path) {
        let Some(pending) = &state.pending_action else { return };
        anstream::eprintln!(
            "{} run {} {} at step {} ({} {}, required by {}) · records in {}",
            paint(BOLD, "planrun:"),
            paint(BOLD, &state.run_id),
            run_status(state.status),
            pending.step_id,
            pending.kind,
            pending.scope,
            pending.required_by,
            display_path(run_dir)
        );
        anstream::eprintln!("  fingerprint {}", pending.fingerprint);
        anstream::eprintln!(
            "  review with `planrun approve {} --fingerprint {}` (or `planrun reject {}`), then `planrun resume {}`",
            state.run_id,
            pending.fingerprint,
            state.run_id,
            state.run_id
        );
    }
}
