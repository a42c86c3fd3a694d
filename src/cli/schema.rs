//! `planrun schema [plan|policy|service]`: the JSON Schema of plan, policy
//! and service policy files.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::cli::output::fail;
use crate::diag::display_path;
use crate::load::{SchemaKind, schema, schema_text};
use crate::ops::ExitStatus;

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which schema; without it, all, as `{"plan": …, "policy": …,
    /// "service": …}`.
    #[arg(value_enum)]
    pub which: Option<Which>,
    /// Write `plan.schema.json`, `policy.schema.json` and
    /// `service.schema.json` into this folder instead of printing (how
    /// `schemas/` is regenerated).
    #[arg(long, value_name = "DIR", conflicts_with = "which")]
    pub out_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    Plan,
    Policy,
    /// The service policy of `planrun serve`.
    Service,
}

impl Which {
    fn kind(self) -> SchemaKind {
        match self {
            Which::Plan => SchemaKind::Plan,
            Which::Policy => SchemaKind::Policy,
            Which::Service => SchemaKind::Service,
        }
    }
}

/// Exit code: 0, or 2 when `--out-dir` cannot be written.
pub fn schema_command(args: &SchemaArgs) -> ExitCode {
    if let Some(dir) = &args.out_dir {
        for kind in SchemaKind::ALL {
            let path = dir.join(kind.file_name());
            if let Err(error) = std::fs::write(&path, schema_text(kind)) {
                return fail(ExitStatus::InvalidInput, &format!("cannot write `{}`: {error}", display_path(&path)));
            }
        }
        return ExitStatus::Done.into();
    }
    match args.which {
        Some(which) => anstream::print!("{}", schema_text(which.kind())),
        None => {
            let all: serde_json::Map<String, serde_json::Value> =
                SchemaKind::ALL.into_iter().map(|kind| (kind.name().to_string(), schema(kind))).collect();
            anstream::println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
        }
    }
    ExitStatus::Done.into()
}
