//! Output helpers: colour, error lines, diagnostics and the per-step
//! progress printer (paths are shown with [`crate::diag::display_path`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};

use crate::cli::ColorChoice;
use crate::diag::{Diagnostic, Severity, SourceMap, display_path, render};
use crate::model::{Plan, Policy, RunStatus, Step, StopReason};
use crate::ops::OpsError;
use crate::runtime::Progress;
use crate::store::{RunRecords, RunState, StepRecord, StepRecordStatus};

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

pub use crate::exit::fail;

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
        RunStatus::Running | RunStatus::WaitingApproval | RunStatus::WaitingInput => paint(YELLOW, status),
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

/// Prints why the files could not be loaded (for commands that read them
/// but run nothing) and returns its exit code. A broken catalog's error
/// already names the files and the fix.
pub fn invalid_catalog(error: &OpsError) -> ExitCode {
    match error {
        OpsError::InvalidFiles { sources, diagnostics } => {
            print_diagnostics(sources, diagnostics, Severity::Error);
            fail(error.exit_status(), "plan or policy files are invalid; run `planrun check`")
        }
        other => fail_with(other),
    }
}

/// Prints one line per step attempt to stderr as it finishes; at the end,
/// the finish message and a last line naming the run's record files and
/// the files the run wrote.
///
/// What the run wrote is collected from the step records as they pass by
/// (the `path` of every `write_file` attempt that is done), so the printer
/// reads nothing and each step costs it the same. A resumed run names the
/// files written since it was resumed.
pub struct StderrProgress {
    workspace: PathBuf,
    written: Vec<String>,
    finish_message: Option<String>,
}

/// The files of a run's record folder, as the last line names them.
const RECORD_FILES: &str = "state.json, history.jsonl, audit.jsonl, plan.json";

impl StderrProgress {
    /// A printer for runs in `workspace` (written paths are shown inside it).
    pub fn new(workspace: &Path) -> Self {
        StderrProgress { workspace: workspace.to_path_buf(), written: Vec::new(), finish_message: None }
    }

    /// Remembers what a done step leaves for the last lines: a written path
    /// (each once, in the order first written) or the finish message.
    fn collect(&mut self, record: &StepRecord) {
        if record.status != StepRecordStatus::Done {
            return;
        }
        match record.kind.as_str() {
            "write_file" => {
                if let Some(path) = record.details.path() {
                    self.wrote(path);
                }
            }
            "finish" => self.finish_message = Some(record.output_text.trim_end().to_string()),
            _ => {}
        }
    }

    /// Remembers a written path, each once, in the order first written.
    fn wrote(&mut self, path: &str) {
        if !self.written.iter().any(|known| known == path) {
            self.written.push(path.to_string());
        }
    }

    /// `planrun: records in DIR (state.json, …) · wrote WORKSPACE/report.txt`.
    fn files_line(&self, records: &RunRecords) -> String {
        let wrote = if self.written.is_empty() {
            "wrote no files".to_string()
        } else {
            let paths: Vec<String> = self.written.iter().map(|path| display_path(&self.workspace.join(path))).collect();
            format!("wrote {}", paths.join(", "))
        };
        // A database store's records are rows, not these files.
        let files = match records {
            RunRecords::Folder(folder) if folder.is_dir() => format!(" ({RECORD_FILES})"),
            _ => String::new(),
        };
        format!("{} records in {}{files} · {wrote}", paint(BOLD, "planrun:"), shown(records))
    }
}

/// Where a run's records are, as messages show them: a folder relative to
/// the working folder where it is below it.
fn shown(records: &RunRecords) -> String {
    match records {
        RunRecords::Folder(folder) => display_path(folder),
        RunRecords::Database(place) => place.clone(),
    }
}

impl Progress for StderrProgress {
    fn restarting(&mut self, run_id: &str, plan_path: &str) {
        anstream::eprintln!(
            "{} run {run_id} was interrupted before its first checkpoint; nothing had run; starting it again from {plan_path}",
            paint(BOLD, "planrun:")
        );
    }

    fn run_started(&mut self, run_id: &str, plan: &Plan, policy: &Policy, _records: &RunRecords) {
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
        self.collect(record);
    }

    fn retry_waiting(&mut self, step: &Step, next_attempt: u32, max_attempts: u32, wait: std::time::Duration) {
        anstream::eprintln!(
            "        {} waits {} ms before attempt {next_attempt} of {max_attempts} (retry_backoff)",
            step.id,
            wait.as_millis()
        );
    }

    fn file_written(&mut self, path: &str) {
        self.wrote(path);
    }

    fn run_finished(&mut self, state: &RunState, records: &RunRecords) {
        let status = run_status(state.status);
        anstream::eprintln!(
            "{} run {} {status} ({}) · {} steps · {} tool calls",
            paint(BOLD, "planrun:"),
            paint(BOLD, &state.run_id),
            state.stop_reason.as_ref().map_or("-", StopReason::as_str),
            state.counters.steps,
            state.counters.tool_calls,
        );
        if !state.failed_steps.is_empty() {
            anstream::eprintln!(
                "  {}",
                paint(YELLOW, format!("ended with failed steps: {}", state.failed_steps.join(", ")))
            );
        }
        if let Some(message) = self.finish_message.as_deref().filter(|message| !message.is_empty()) {
            for line in message.lines() {
                anstream::eprintln!("  {line}");
            }
        }
        if let Some(error) = &state.error {
            anstream::eprintln!("  {}", paint(RED, error));
        }
        anstream::eprintln!("{}", self.files_line(records));
    }

    fn run_paused(&mut self, state: &RunState, records: &RunRecords) {
        if let Some(question) = state.agent.as_ref().and_then(|agent| agent.question.as_ref()) {
            anstream::eprintln!(
                "{} run {} {} at step {} · records in {}",
                paint(BOLD, "planrun:"),
                paint(BOLD, &state.run_id),
                run_status(state.status),
                state.current_step_id.as_deref().unwrap_or("-"),
                shown(records)
            );
            anstream::eprintln!("  question (from the model, untrusted): {question:?}");
            anstream::eprintln!("  answer with `planrun answer {} \"TEXT\"`", state.run_id);
            return;
        }
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
            shown(records)
        );
        anstream::eprintln!("  fingerprint {}", pending.fingerprint);
        // What the run was given, beside the action it asks to run.
        for (name, value) in &state.inputs {
            anstream::eprintln!("  input {name} = {value}");
        }
        for source in &pending.provenance {
            anstream::eprintln!("  {} = {:?} from {}", source.argument, source.value, source.source);
        }
        anstream::eprintln!(
            "  review with `planrun approve {} --fingerprint {}` (or `planrun reject {}`), then `planrun resume {}`",
            state.run_id,
            pending.fingerprint,
            state.run_id,
            state.run_id
        );
    }
}
