//! `planrun store migrate`: creates or updates the schema of the database
//! store named by `--store` / `PLANRUN_STORE` (see [`crate::ops::migrate`]).

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, fail_with, paint};
use crate::ops;

#[derive(Debug, Args)]
pub struct StoreArgs {
    #[command(subcommand)]
    pub command: StoreCommand,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Create or update the schema of the `--store` database (idempotent).
    Migrate,
}

/// Exit code: 0 the schema is at this planrun's version, 2 a bad or
/// unreachable store, or a migration that failed (nothing applied).
pub fn store(args: &StoreArgs, dirs: &DirArgs) -> ExitCode {
    match args.command {
        StoreCommand::Migrate => match ops::migrate(&dirs.store) {
            Ok(migrated) => {
                let done = if migrated.applied.is_empty() {
                    "already up to date".to_string()
                } else {
                    let versions: Vec<String> = migrated.applied.iter().map(i64::to_string).collect();
                    format!("applied migration(s) {}", versions.join(", "))
                };
                anstream::println!(
                    "{} schema `{}` at version {}: {done}",
                    paint(BOLD, "migrated:"),
                    migrated.schema,
                    migrated.version
                );
                ExitCode::SUCCESS
            }
            Err(error) => fail_with(&error),
        },
    }
}
