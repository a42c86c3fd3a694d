//! `planrun worker`: takes up the runs of a database store that nobody
//! holds — interrupted, approved and waiting, or queued — and drives them (see
//! [`crate::ops::work`]); one line per run.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;

use crate::cli::DirArgs;
use crate::cli::output::{BOLD, fail_with, paint, run_status};
use crate::ops::{self, WorkerInput};
use crate::runtime::RuntimeEnv;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// One pass over the runnable runs, then exit.
    #[arg(long)]
    pub once: bool,
    /// Milliseconds between passes.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub poll_ms: u64,
    /// Names this machine in the owner id of the leases it takes (`[A-Za-z0-9._-]{1,64}`).
    #[arg(long, value_name = "NAME", env = "PLANRUN_NODE_ID", value_parser = parse_node_id)]
    pub node_id: Option<String>,
    /// How many runs to drive at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,
}

/// A `--node-id`: the alphabet of run ids, so that it reads plainly in
/// `runs.owner_id`.
fn parse_node_id(text: &str) -> Result<String, String> {
    crate::store::RunId::parse(text)
        .map(crate::store::RunId::into_string)
        .map_err(|_| "a node id has 1 to 64 ASCII letters, digits, `.`, `_` or `-`".to_string())
}

/// The `--node-id` of a `worker` command line, for the store's owner ids.
pub fn node_id(command: &Option<crate::cli::Command>) -> Option<&str> {
    match command {
        Some(crate::cli::Command::Worker(args)) => args.node_id.as_deref(),
        _ => None,
    }
}

/// A flag set by the first SIGTERM or SIGINT: each loop then ends after the
/// run it is driving and gives its lease back, so that `systemctl stop` or
/// Ctrl-C never leaves a run to wait out its lease. A second signal exits at
/// once (as a kill would: the runs are taken over after their leases).
/// `None` when no signal handler can be installed (the worker then stops
/// as a killed process does).
#[cfg(feature = "postgres")]
fn stop_on_signal() -> Option<Arc<AtomicBool>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build().ok()?;
    let mut signals = runtime.block_on(async { crate::exit::StopSignals::install() }).ok()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("planrun-signals".into())
        .spawn(move || {
            runtime.block_on(async {
                let first = signals.next().await;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                eprintln!("planrun worker: stopping; finishing the runs in progress (a second signal exits at once)");
                signals.next().await;
                eprintln!("planrun worker: stopped at once; the runs in progress are taken over after their leases");
                std::process::exit(first);
            })
        })
        .ok()?;
    Some(stop)
}

#[cfg(not(feature = "postgres"))]
fn stop_on_signal() -> Option<Arc<AtomicBool>> {
    None
}

/// Exit code: 0 after `--once` (whatever the runs it took up ended with:
/// each has its line), 2 a store that has no runnable runs to offer (the
/// file store) or cannot be read. Without `--once` it runs until stopped.
pub fn worker(args: &WorkerArgs, dirs: &DirArgs, env: &RuntimeEnv) -> ExitCode {
    let input = WorkerInput {
        workspace: dirs.workspace.clone(),
        once: args.once,
        poll: Duration::from_millis(args.poll_ms),
        concurrency: usize::from(args.concurrency),
        stop: stop_on_signal(),
    };
    let worked = ops::work(&input, env, &|worked| match &worked.outcome {
        Ok(outcome) => anstream::println!(
            "{} run {} · {} (exit {})",
            paint(BOLD, "worked:"),
            worked.run_id,
            run_status(outcome.state.status),
            crate::ops::ExitStatus::for_run(outcome.state.status).code()
        ),
        Err(error) => anstream::println!(
            "{} run {} · not continued (exit {}): {error}",
            paint(BOLD, "worked:"),
            worked.run_id,
            error.exit_status().code()
        ),
    });
    match worked {
        Ok(count) => {
            anstream::println!("{} {count} run(s) taken up", paint(BOLD, "worker:"));
            ExitCode::SUCCESS
        }
        Err(error) => fail_with(&error),
    }
}
