//! `planrun check [PATHS…]`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde_json::json;

use crate::cli::DirArgs;
use crate::cli::output::colour_diagnostic;
use crate::diag::{Severity, render, to_json};
use crate::load::Loader;
use crate::ops::ExitStatus;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Plan, policy or service policy files, or folders of them. Without
    /// paths: the `--plans` and `--policies` folders, with the cross-file
    /// checks (routing, policy references), and the service policy
    /// `<policies>/service/service.toml` (or `.yaml`) when it exists.
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
    let mut loader = Loader::new();
    let catalog = if args.paths.is_empty() {
        let catalog = loader.load_catalog(&dirs.plans, &dirs.policies);
        if let Some(path) = Loader::service_policy_file(&dirs.policies) {
            loader.load_service_policy(&path);
        }
        catalog
    } else {
        loader.load_paths_with_policies(&args.paths, Some(&dirs.policies))
    };
    let diagnostics = loader.sorted_diagnostics();
    let count = |severity| diagnostics.iter().filter(|diagnostic| diagnostic.severity == severity).count();
    let (errors, warnings, notes) = (count(Severity::Error), count(Severity::Warning), count(Severity::Note));
    let summary = format!(
        "checked {} plan(s) and {} policy file(s): {errors} error(s), {warnings} warning(s), {notes} note(s)",
        catalog.plans.len(),
        catalog.policies.len()
    );
    match args.format {
        Format::Text => {
            for &diagnostic in &diagnostics {
                anstream::println!("{}", colour_diagnostic(&render(loader.sources(), diagnostic), diagnostic.severity));
            }
            anstream::println!("{summary}");
        }
        Format::Json => {
            let value = json!({
                "plans": catalog.plans.iter().map(|plan| json!({"id": plan.id, "path": plan.source.path})).collect::<Vec<_>>(),
                "policies": catalog.policies.values().map(|policy| json!({"name": policy.name, "path": policy.source.path})).collect::<Vec<_>>(),
                "diagnostics": diagnostics.iter().map(|&diagnostic| to_json(loader.sources(), diagnostic)).collect::<Vec<_>>(),
                "summary": {"errors": errors, "warnings": warnings, "notes": notes},
            });
            anstream::println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
        }
    }
    ExitCode::from(if errors > 0 {
        ExitStatus::InvalidInput
    } else if warnings > 0 {
        ExitStatus::Failed
    } else {
        ExitStatus::Done
    })
}
