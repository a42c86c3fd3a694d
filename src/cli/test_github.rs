//! `planrun test --format github`: GitHub Actions workflow commands, one
//! per changed or new snapshot and per failed scenario, which the Actions
//! log viewer shows as annotations beside the file and line:
//!
//! ```text
//! ::error file=snapshots/runs/flow_pwd@history.jsonl.snap,line=52,title=planrun test: flow_pwd::step `step-4` finish message changed; …
//! ```
//!
//! A changed snapshot points at the first line of its `.snap` that the new
//! result changes, and its message is the scenario's behaviour summary
//! followed by the diff; a new snapshot is an error under `CI=true` (it
//! fails) and a warning otherwise; a failed expectation points at the
//! scenario file.

use crate::diag::display_path;
use crate::ops::{SnapshotResult, SnapshotState, TestOutcome};

/// The workflow command lines for `outcome`, in report order.
pub fn annotations(outcome: &TestOutcome) -> Vec<String> {
    let mut lines = Vec::new();
    for scenario in &outcome.problems {
        for problem in &scenario.problems {
            lines.push(command(
                "error",
                &scenario.scenario_file,
                None,
                &format!("planrun test: {}", scenario.scenario),
                problem,
            ));
        }
    }
    for result in &outcome.snapshots {
        let level = match result.state {
            SnapshotState::Changed { .. } | SnapshotState::Rejected { new: false } => "error",
            SnapshotState::New if outcome.ci => "error",
            SnapshotState::New => "warning",
            SnapshotState::Matched | SnapshotState::Accepted | SnapshotState::Rejected { new: true } => continue,
        };
        lines.push(command(
            level,
            &display_path(&result.path),
            result.changed_line.or(Some(1)),
            &format!("planrun test: {}", result.scenario),
            &message(outcome, result),
        ));
    }
    for error in &outcome.errors {
        lines.push(format!("::error title=planrun test::{}", escape_data(error)));
    }
    lines
}

/// The behaviour summary, then the diff (or the new body).
fn message(outcome: &TestOutcome, result: &SnapshotResult) -> String {
    let summary = outcome
        .change_of(&result.scenario_file, &result.scenario)
        .map(|change| change.sentences.join("; "))
        .unwrap_or_default();
    match &result.state {
        SnapshotState::Changed { diff } => format!("{summary}\n{diff}"),
        _ => format!("new snapshot ({summary})\n{}", result.body),
    }
}

fn command(level: &str, file: &str, line: Option<usize>, title: &str, message: &str) -> String {
    let line = line.map(|line| format!(",line={line}")).unwrap_or_default();
    format!(
        "::{level} file={}{line},title={}::{}",
        escape_property(file),
        escape_property(title),
        escape_data(message.trim_end())
    )
}

/// The escaping GitHub's toolkit applies to a command's message.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// The escaping of a property value (`file=`, `title=`).
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_properties_are_escaped_as_the_toolkit_does() {
        assert_eq!(escape_data("50%\na"), "50%25%0Aa");
        assert_eq!(escape_property("a: b, c"), "a%3A b%2C c");
        assert_eq!(
            command("error", "s/x@cli.snap", Some(4), "planrun test: x", "one\ntwo\n"),
            "::error file=s/x@cli.snap,line=4,title=planrun test%3A x::one%0Atwo"
        );
    }
}
