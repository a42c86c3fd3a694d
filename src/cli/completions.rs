//! `planrun completions bash|zsh|fish`: a shell completion script, generated
//! by clap_complete from the one command definition in `cli/mod.rs`, so it
//! never lags behind the commands and options.

use std::process::ExitCode;

use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::Shell as Generator;

use crate::cli::Cli;
use crate::ops::ExitStatus;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    fn generator(self) -> Generator {
        match self {
            Shell::Bash => Generator::Bash,
            Shell::Zsh => Generator::Zsh,
            Shell::Fish => Generator::Fish,
        }
    }
}

/// Prints the script to stdout; exit code 0.
pub fn completions(args: &CompletionsArgs) -> ExitCode {
    let mut command = Cli::command();
    clap_complete::generate(args.shell.generator(), &mut command, "planrun", &mut std::io::stdout());
    ExitStatus::Done.into()
}
