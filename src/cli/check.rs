//! `planrun check [PATHS…]`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::json;

use crate::cli::DirArgs;
use crate::cli::output::colour_diagnostic;
use crate::diag::{Severity, render, to_json};
use crate::load::FileKind;
use crate::ops::{self, CheckInput};

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Plan, policy or service policy files, or folders of them. Without
    /// paths: the `--plans` and `--policies` folders, with the cross-file
    /// checks (routing, policy references), and the service policy
    /// `<policies>/service/service.toml` (or `.yaml`, `.yml`) when it exists.
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Exit code: 2 when any finding is an error, 1 when the worst is a
/// warning, 0 otherwise (notes do not count).
pub fn check(args: &CheckArgs, dirs: &DirArgs) -> ExitCode {
    let outcome = ops::check(CheckInput {
        paths: &args.paths,
        plans: &dirs.plans,
        policies: &dirs.policies,
        workspace: &dirs.workspace,
    });
    let sources = &outcome.sources;
    let (errors, warnings, notes) =
        (outcome.count(Severity::Error), outcome.count(Severity::Warning), outcome.count(Severity::Note));
    let summary =
        format!("checked {}: {errors} error(s), {warnings} warning(s), {notes} note(s)", checked_counts(&outcome));
    match args.format {
        Format::Text => {
            for diagnostic in &outcome.diagnostics {
                anstream::println!("{}", colour_diagnostic(&render(sources, diagnostic), diagnostic.severity));
            }
            anstream::println!("{summary}");
        }
        Format::Json => {
            let value = json!({
                "plans": outcome.files_of(FileKind::Plan).map(|plan| json!({"id": plan.name, "path": plan.path, "loaded": plan.loaded})).collect::<Vec<_>>(),
                "policies": outcome.files_of(FileKind::Policy).map(|policy| json!({"name": policy.name, "path": policy.path, "loaded": policy.loaded})).collect::<Vec<_>>(),
                "files": &outcome.files,
                "diagnostics": outcome.diagnostics.iter().map(|diagnostic| to_json(sources, diagnostic)).collect::<Vec<_>>(),
                "summary": {"errors": errors, "warnings": warnings, "notes": notes},
            });
            anstream::println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        }
    }
    outcome.exit_status().into()
}

/// What was checked, by kind: plans and policy files always, the other
/// kinds when there are any ("1 plan(s), 1 policy file(s) and 1 scenario
/// file(s)").
fn checked_counts(outcome: &ops::CheckOutcome) -> String {
    let parts: Vec<String> =
        [FileKind::Plan, FileKind::Policy, FileKind::ServicePolicy, FileKind::Scenarios, FileKind::Unreadable]
            .into_iter()
            .map(|kind| (kind, outcome.files_of(kind).count()))
            .filter(|&(kind, count)| count > 0 || matches!(kind, FileKind::Plan | FileKind::Policy))
            .map(|(kind, count)| format!("{count} {}", kind.plural()))
            .collect();
    match parts.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}
