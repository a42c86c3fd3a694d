//! `planrun check [PATHS…]`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::json;

use crate::cli::DirArgs;
use crate::cli::output::colour_diagnostic;
use crate::diag::{Severity, render, to_json};
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
    let outcome = ops::check(CheckInput { paths: &args.paths, plans: &dirs.plans, policies: &dirs.policies });
    let sources = &outcome.sources;
    let (errors, warnings, notes) =
        (outcome.count(Severity::Error), outcome.count(Severity::Warning), outcome.count(Severity::Note));
    let summary = format!(
        "checked {} plan(s) and {} policy file(s): {errors} error(s), {warnings} warning(s), {notes} note(s)",
        outcome.plans.len(),
        outcome.policies.len()
    );
    match args.format {
        Format::Text => {
            for diagnostic in &outcome.diagnostics {
                anstream::println!("{}", colour_diagnostic(&render(sources, diagnostic), diagnostic.severity));
            }
            anstream::println!("{summary}");
        }
        Format::Json => {
            let value = json!({
                "plans": outcome.plans.iter().map(|plan| json!({"id": plan.name, "path": plan.path})).collect::<Vec<_>>(),
                "policies": outcome.policies.iter().map(|policy| json!({"name": policy.name, "path": policy.path})).collect::<Vec<_>>(),
                "diagnostics": outcome.diagnostics.iter().map(|diagnostic| to_json(sources, diagnostic)).collect::<Vec<_>>(),
                "summary": {"errors": errors, "warnings": warnings, "notes": notes},
            });
            anstream::println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        }
    }
    outcome.exit_status().into()
}
