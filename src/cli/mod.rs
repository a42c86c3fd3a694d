//! The command line: argument parsing and dispatch. Each subcommand lives in
//! its own file; output helpers in `output.rs`; exit codes are
//! [`crate::ops::ExitStatus`]. No logic of the runtime lives here.

mod answer;
mod approve;
mod cancel;
mod check;
mod completions;
mod demo;
mod export;
mod list;
mod man;
mod mcp;
mod output;
mod plan;
mod policy;
mod reconcile;
mod reject;
mod replay;
mod resume;
mod route;
mod run;
mod runs;
mod schema;
mod show;
mod store;
mod test;
mod test_github;
mod verify;
mod worker;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::ops::ExitStatus;
use crate::runtime::RuntimeEnv;
use crate::store::RunId;

/// What this build can do, said where it matters: `--version` lists the
/// features built in and those left out, and in a build without the
/// PostgreSQL store the help of everything that needs it says so.
#[cfg(all(feature = "server", feature = "postgres"))]
macro_rules! built_features {
    () => {
        "features: server, postgres"
    };
}
#[cfg(all(feature = "server", not(feature = "postgres")))]
macro_rules! built_features {
    () => {
        "features: server; not built in: postgres"
    };
}
#[cfg(all(not(feature = "server"), feature = "postgres"))]
macro_rules! built_features {
    () => {
        "features: postgres; not built in: server"
    };
}
#[cfg(not(any(feature = "server", feature = "postgres")))]
macro_rules! built_features {
    () => {
        "no optional features; not built in: server, postgres"
    };
}

/// The help text of something that needs the PostgreSQL store (or of
/// which `$part` does): as written in a build with it, with a note in a
/// build without it.
#[cfg(feature = "postgres")]
macro_rules! needs_postgres {
    ($help:literal $(, $part:literal)?) => {
        $help
    };
}
#[cfg(not(feature = "postgres"))]
macro_rules! needs_postgres {
    ($help:literal) => {
        concat!($help, " [not in this build: built without PostgreSQL support (`--features postgres`)]")
    };
    ($help:literal, $part:literal) => {
        concat!($help, " [", $part, " is not in this build: built without PostgreSQL support (`--features postgres`)]")
    };
}

/// `planrun --version`: the version and the features built in.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", built_features!(), ")");

/// Runs bounded agents from declarative plan files.
#[derive(Debug, Parser)]
#[command(name = "planrun", version = VERSION)]
#[command(about = "Runs bounded agents from declarative plan files", long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub dirs: DirArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// A `--goal` (or `route`) value: it must hold a character that is not
/// white space, as the service requires of a request's `goal`; an empty goal
/// would route to the default plan and run it.
pub(crate) fn parse_goal(text: &str) -> Result<String, String> {
    if crate::router::goal_is_blank(text) {
        return Err("a goal must hold a word, not be empty or only white space".to_string());
    }
    Ok(text.to_string())
}

/// A `--by` value (`approve`, `reconcile`): at most 200 characters, no
/// control characters, as the service's `approved_by`.
pub(crate) fn parse_name(text: &str) -> Result<String, String> {
    crate::model::check_decision_text("--by", text, crate::model::MAX_NAME_CHARS).map(|()| text.to_string())
}

/// A run id argument, checked once here: a bad one fails as every command
/// fails on it (`error: invalid run id …`, exit 2).
pub(crate) fn run_id_arg(text: &str) -> Result<RunId, ExitCode> {
    RunId::parse(text).map_err(|error| crate::cli::output::fail_with(&crate::ops::OpsError::InvalidRunId(error)))
}

/// A `--reason` value (`reject`, `cancel`): at most 2000 characters, no
/// control characters, as the service's `reason`.
pub(crate) fn parse_reason(text: &str) -> Result<String, String> {
    crate::model::check_decision_text("--reason", text, crate::model::MAX_REASON_CHARS).map(|()| text.to_string())
}

/// Options of a run (`planrun --plan FILE` or `planrun --goal TEXT`).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Run this plan file.
    #[arg(long, value_name = "FILE", conflicts_with = "goal")]
    pub plan: Option<PathBuf>,
    /// Route this goal to a plan by keywords, then run it.
    #[arg(long, value_name = "TEXT", value_parser = parse_goal)]
    pub goal: Option<String>,
    /// Name the run (`[A-Za-z0-9._-]{1,64}`); an existing run is never overwritten.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Give the plan's input NAME this value (repeatable; checked against its `[inputs.NAME]` before anything runs).
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = crate::model::parse_input_flag)]
    pub inputs: Vec<crate::model::GivenInput>,
    /// Read the plan's inputs from a JSON, YAML or TOML file (an object of names and values); `--input` wins.
    #[arg(long = "inputs", value_name = "FILE")]
    pub inputs_file: Option<PathBuf>,
    /// Print the final state as JSON to stdout.
    #[arg(long)]
    pub json: bool,
    /// Print no progress to stderr (errors are still printed).
    #[arg(long, short)]
    pub quiet: bool,
    // Record the run as queued and return at once: a worker or `serve` of
    // the workspace starts it (database store only).
    #[arg(
        long,
        help = needs_postgres!(
            "Record the run as queued and return at once (its id on stdout): a `planrun worker` or `planrun serve` of the workspace starts it (database store only)"
        )
    )]
    pub queue: bool,
}

impl RunArgs {
    /// Whether any option of a run was given.
    fn is_given(&self) -> bool {
        self.plan.is_some()
            || self.goal.is_some()
            || self.run_id.is_some()
            || !self.inputs.is_empty()
            || self.inputs_file.is_some()
            || self.json
            || self.quiet
            || self.queue
    }
}

/// Where files live; valid before or after a subcommand.
#[derive(Debug, Args)]
pub struct DirArgs {
    /// The workspace folder: tools act inside it; runs are recorded in its `runs/`.
    #[arg(long, global = true, value_name = "DIR", default_value = "workspace", env = "PLANRUN_WORKSPACE")]
    pub workspace: PathBuf,
    /// The folder of plan files.
    #[arg(long, global = true, value_name = "DIR", default_value = "plans", env = "PLANRUN_PLANS")]
    pub plans: PathBuf,
    /// The folder of policy files.
    #[arg(long, global = true, value_name = "DIR", default_value = "policies", env = "PLANRUN_POLICIES")]
    pub policies: PathBuf,
    // Where runs are kept: `file` or a PostgreSQL URL.
    #[arg(
        long,
        global = true,
        value_name = "URL",
        default_value = "file",
        env = "PLANRUN_STORE",
        help = needs_postgres!(
            "Where runs are kept: `file` (the folders under `--workspace`) or `postgres://user@host:port/database` (see docs/scale-out.md)",
            "`postgres://`"
        )
    )]
    pub store: String,
    /// When to colour output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate plan and policy files and report every finding.
    Check(check::CheckArgs),
    /// Preview what a run would do, executing nothing.
    Plan(plan::PlanArgs),
    /// List the plans: id, description, keywords, policy.
    List(list::ListArgs),
    /// Explain which plan a goal routes to, and why.
    Route(route::RouteArgs),
    /// Ask a policy about a command line.
    Policy(policy::PolicyArgs),
    /// Review and pin the tools of an MCP server a policy declares.
    Mcp(mcp::McpArgs),
    /// Print the JSON Schema of plan, policy, service policy or scenario files (editor support).
    Schema(schema::SchemaArgs),
    /// List the runs of the workspace, newest first.
    Runs(runs::RunsArgs),
    /// Show a run's timeline from its records (`latest`: the newest run).
    Show(show::ShowArgs),
    /// Check a run's records end to end (seal, hash chains, plan copy).
    Verify(verify::VerifyArgs),
    /// Decide a recorded run again under today's plans and policies, executing nothing: what would differ.
    Replay(replay::ReplayArgs),
    /// Approve the action a run is waiting on (bound to its fingerprint).
    Approve(approve::ApproveArgs),
    /// Reject the action a run is waiting on; the run ends `rejected`.
    Reject(reject::RejectArgs),
    /// Continue a run that waits for approval or was interrupted.
    Resume(resume::ResumeArgs),
    /// Answer the question a run's agent step asked, and continue the run.
    Answer(answer::AnswerArgs),
    /// Abandon a run that waits for approval or was interrupted; it ends `cancelled`.
    Cancel(cancel::CancelArgs),
    /// Run the declared scenarios and compare them with the golden snapshots.
    Test(test::TestArgs),
    /// Settle a run that ended `tool_result_uncertain`: was the write applied?
    Reconcile(reconcile::ReconcileArgs),
    // Each of these needs a database store.
    #[command(about = needs_postgres!("Write a run of a database store as files (`DIR/runs/<run_id>/`), verified"))]
    Export(export::ExportArgs),
    #[command(about = needs_postgres!("Manage a database store: `store migrate` creates or updates its schema"))]
    Store(store::StoreArgs),
    #[command(about = needs_postgres!(
        "Take up the runs of a database store nobody holds (interrupted, approved, or queued) and drive them"
    ))]
    Worker(worker::WorkerArgs),
    /// Run the ticket demo end to end (pause, approve, crash, recover) and print its summary.
    Demo(demo::DemoArgs),
    /// Run the HTTP service (bridge runs, controller loop).
    #[cfg(feature = "server")]
    Serve(crate::server::ServeArgs),
    /// Print a shell completion script (bash, zsh or fish).
    Completions(completions::CompletionsArgs),
    /// Print the manual page (roff), or write one page per command with `--out-dir`.
    Man(man::ManArgs),
}

/// Entry point called by `main.rs`.
pub fn main() -> ExitCode {
    // The tool guard a process holding runs of a database store starts (the
    // same executable; see `tools/guard.rs`): not a command a person types.
    if std::env::args_os().nth(1).is_some_and(|arg| arg == crate::tools::guard::GUARD_ARG) {
        crate::tools::guard::serve(std::io::stdin());
        return ExitCode::SUCCESS;
    }
    // The documented test switch: behave as on a kernel without Landlock.
    let simulate = crate::runtime::process_var(crate::tools::sandbox::SIMULATE_VAR);
    if simulate.as_deref() == Some(crate::tools::sandbox::SIMULATE_NO_LANDLOCK) {
        crate::tools::sandbox::simulate_no_landlock();
    }
    if simulate.as_deref() == Some(crate::tools::sandbox::SIMULATE_NO_NAMESPACE) {
        crate::tools::sandbox::simulate_no_namespace();
    }
    let code = main_with_args(std::env::args_os());
    crate::tools::sandbox::remove_spare_temp_folders();
    code
}

/// Parses `args` and runs the command, returning the documented exit code.
pub fn main_with_args(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() { ExitStatus::InvalidInput } else { ExitStatus::Done }.into();
        }
    };
    if cli.command.is_some() && cli.run.is_given() {
        // The folder options (`--workspace`, `--plans`, `--policies`,
        // `--color`) are global: they may stand before or after a command.
        // The run's own options may not.
        return output::fail(
            ExitStatus::InvalidInput,
            "`--plan`, `--goal`, `--run-id`, `--json`, `--quiet` and `--queue` before a command belong to a run; \
             give a command's own options after its name (see `planrun <command> --help`)",
        );
    }
    output::set_color(cli.dirs.color);
    let mut env = match RuntimeEnv::from_process() {
        Ok(env) => env,
        Err(message) => return output::fail(ExitStatus::InvalidInput, &message),
    };
    if touches_runs(&cli) {
        let node_id = worker::node_id(&cli.command);
        // A worker or the service waits for a database that is not up yet;
        // every other command fails fast (exit 2).
        let selected = if runs_until_stopped(&cli) {
            env.select_store_waiting(&cli.dirs.store, node_id, &|message, delay| {
                eprintln!("planrun: waiting for the store ({message}); trying again in {} ms", delay.as_millis());
            })
        } else {
            env.select_store(&cli.dirs.store, node_id)
        };
        if let Err(message) = selected {
            return output::fail(ExitStatus::InvalidInput, &message);
        }
    }
    match &cli.command {
        Some(Command::Check(args)) => check::check(args, &cli.dirs),
        Some(Command::Plan(args)) => plan::plan(args, &cli.dirs),
        Some(Command::List(args)) => list::list(args, &cli.dirs),
        Some(Command::Route(args)) => route::route(args, &cli.dirs),
        Some(Command::Policy(args)) => policy::policy(args, &cli.dirs),
        Some(Command::Mcp(args)) => mcp::mcp(args, &cli.dirs),
        Some(Command::Schema(args)) => schema::schema_command(args),
        Some(Command::Runs(args)) => runs::runs(args, &cli.dirs, &env),
        Some(Command::Show(args)) => show::show(args, &cli.dirs, &env),
        Some(Command::Verify(args)) => verify::verify(args, &cli.dirs, &env),
        Some(Command::Replay(args)) => replay::replay(args, &cli.dirs, &env),
        Some(Command::Approve(args)) => approve::approve(args, &cli.dirs, &env),
        Some(Command::Reject(args)) => reject::reject(args, &cli.dirs, &env),
        Some(Command::Resume(args)) => resume::resume(args, &cli.dirs, &env),
        Some(Command::Answer(args)) => answer::answer(args, &cli.dirs, &env),
        Some(Command::Cancel(args)) => cancel::cancel(args, &cli.dirs, &env),
        Some(Command::Reconcile(args)) => reconcile::reconcile(args, &cli.dirs, &env),
        Some(Command::Demo(args)) => demo::demo(args, &cli.dirs, &env),
        Some(Command::Export(args)) => export::export(args, &cli.dirs, &env),
        Some(Command::Store(args)) => store::store(args, &cli.dirs),
        Some(Command::Worker(args)) => worker::worker(args, &cli.dirs, &env),
        Some(Command::Test(args)) => test::test(args, &cli.dirs),
        #[cfg(feature = "server")]
        Some(Command::Serve(args)) => {
            crate::server::serve(args, &cli.dirs.workspace, &cli.dirs.plans, &cli.dirs.policies, env)
        }
        Some(Command::Completions(args)) => completions::completions(args),
        Some(Command::Man(args)) => man::man(args),
        None => run::run(&cli.run, &cli.dirs, &env),
    }
}

/// Whether the command runs until it is stopped (`worker` without
/// `--once`, `serve`): it waits for its database rather than failing.
fn runs_until_stopped(cli: &Cli) -> bool {
    match &cli.command {
        Some(Command::Worker(args)) => !args.once,
        #[cfg(feature = "server")]
        Some(Command::Serve(_)) => true,
        _ => false,
    }
}

/// Whether the command reads or writes runs, and so uses `--store`: a store
/// is connected (and a database's schema checked) only for those, so that
/// `check`, `plan` or `completions` never need a database.
fn touches_runs(cli: &Cli) -> bool {
    match &cli.command {
        None => cli.run.plan.is_some() || cli.run.goal.is_some(),
        Some(
            Command::Runs(_)
            | Command::Show(_)
            | Command::Verify(_)
            | Command::Replay(_)
            | Command::Approve(_)
            | Command::Reject(_)
            | Command::Resume(_)
            | Command::Answer(_)
            | Command::Cancel(_)
            | Command::Reconcile(_)
            | Command::Export(_)
            | Command::Worker(_),
        ) => true,
        #[cfg(feature = "server")]
        Some(Command::Serve(_)) => true,
        _ => false,
    }
}
