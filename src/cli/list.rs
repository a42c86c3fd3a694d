//! `planrun list`: every plan with its description, keywords and policy.

use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, DIM, invalid_catalog, paint};
use crate::ops::{self, ExitStatus};

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the plans as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Exit code: 0 when the plans were listed, 2 when plan or policy files are
/// invalid.
pub fn list(args: &ListArgs, dirs: &DirArgs) -> ExitCode {
    let catalog = match ops::load_catalog(&dirs.plans, &dirs.policies, None) {
        Ok(catalog) => catalog,
        Err(error) => return invalid_catalog(&error),
    };
    if args.json {
        let plans: Vec<_> = catalog
            .plans
            .iter()
            .map(|plan| {
                json!({
                    "id": plan.id,
                    "description": plan.description,
                    "keywords": plan.keywords,
                    "policy": plan.policy,
                    "default": plan.default,
                    "expected_status": plan.expected_status,
                    "steps": plan.steps.len(),
                    "path": plan.source.path,
                })
            })
            .collect();
        anstream::println!("{}", serde_json::to_string_pretty(&plans).unwrap_or_default());
        return ExitStatus::Done.into();
    }
    for plan in &catalog.plans {
        let mut flags = Vec::new();
        if plan.default {
            flags.push("default".to_string());
        }
        if plan.expected_status != crate::model::RunStatus::Done {
            flags.push(format!("expected {}", plan.expected_status));
        }
        let flags = if flags.is_empty() { String::new() } else { format!(" [{}]", flags.join(", ")) };
        anstream::println!("{}{flags}  {}", paint(BOLD, &plan.id), paint(DIM, &plan.source.path));
        if !plan.description.is_empty() {
            anstream::println!("    {}", plan.description);
        }
        let keywords = if plan.keywords.is_empty() {
            "(none)".to_string()
        } else {
            plan.keywords.iter().map(|keyword| format!("{keyword:?}")).collect::<Vec<_>>().join(", ")
        };
        anstream::println!("    keywords: {keywords} · policy {} · {} step(s)", plan.policy, plan.steps.len());
    }
    anstream::println!("{} plan(s)", catalog.plans.len());
    ExitStatus::Done.into()
}
