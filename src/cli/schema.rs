//! `planrun schema [plan|policy|scenarios]`: the JSON Schema of plan, policy
//! and scenario files.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::cli::output::fail;
use crate::load::{SchemaKind, schema, schema_text};
use crate::ops::ExitStatus;

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which schema; without it, all, as `{"plan": …, "policy": …, "scenarios": …}`.
    #[arg(value_enum)]
    pub which: Option<Which>,
    /// Write `plan.schema.json`, `policy.schema.json` and `scenarios.schema.json` into this folder
    /// instead of printing (how `schemas/` is regenerated).
    #[arg(long, value_name = "DIR", conflicts_with = "which")]
    pub out_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    Plan,
    Policy,
    Scenarios,
}

/// Exit code: 0, or 2 when `--out-dir` cannot be written.
pub fn schema_command(args: &SchemaArgs) -> ExitCode {
    if let Some(dir) = &args.out_dir {
        for kind in SchemaKind::ALL {
            let path = dir.join(kind.file_name());
            if let Err(error) = std::fs::write(&path, schema_text(kind)) {
                return fail(ExitStatus::InvalidInput, &format!("cannot write `{}`: {error}", path.display()));
            }
        }
        return ExitStatus::Done.into();
    }
    match args.which {
        Some(Which::Plan) => anstream::print!("{}", schema_text(SchemaKind::Plan)),
        Some(Which::Policy) => anstream::print!("{}", schema_text(SchemaKind::Policy)),
        Some(Which::Scenarios) => anstream::print!("{}", schema_text(SchemaKind::Scenarios)),
        None => {
            let both = serde_json::json!({
                "plan": schema(SchemaKind::Plan),
                "policy": schema(SchemaKind::Policy),
                "scenarios": schema(SchemaKind::Scenarios),
            });
            anstream::println!("{}", serde_json::to_string_pretty(&both).unwrap_or_default());
        }
    }
    ExitStatus::Done.into()
}
