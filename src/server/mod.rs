//! The HTTP service (`planrun serve`, SPEC §12; the bridge and
//! controller), behind the cargo feature `server` (on by default).
//!
//! The HTTP front end over [`crate::ops::service`], which holds the service's
//! use cases (bridge and controller runs, adapters, decision backends):
//!
//! | file | holds |
//! |---|---|
//! | `app.rs` | routes and thin handlers, bearer auth, body limit |
//! | `approvals.rs` | approve / reject a bridge run whose agent run waits for approval, and the HTTP code of each refusal |
//! | `error.rs` | typed errors and their JSON bodies |
//! | `json_body.rs` | request bodies: one JSON object, never an array of its values |
//! | `openapi.rs` | the OpenAPI document |
//! | `mod.rs` | `planrun serve`: start-up (settings, catalog, service policy, store), serving, shutdown |
//!
//! Start-up loads and validates the plans, the run policies and the service
//! policy (`--service-policy`, else `policies/service/service.toml` or
//! `.yaml`, all through [`crate::load::Loader`]) once (any error: diagnostics on stderr, exit 2, nothing served),
//! picks the decision backend, binds, prints `listening on http://<addr>` on
//! stdout and serves until SIGINT or SIGTERM; then it stops accepting
//! connections and waits for every in-flight run to finish before exiting 0.
//!
//! Durability: the service's store is built for group commit
//! ([`crate::store::StoreFactory::group_commit`]): runs write their records
//! without syncing each file, and a request that wrote records is answered
//! only after one barrier shared with the concurrent requests has made them
//! durable (see `app.rs` and `docs/service.md`).

pub mod app;
pub mod approvals;
pub mod error;
pub mod json_body;
pub mod openapi;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use tokio::sync::Semaphore;

use crate::diag::{display_path, render_all};
use crate::exit::{StopSignals, fail};
use crate::load::Loader;
use crate::model::ServicePolicy;
use crate::ops::ExitStatus;
use crate::ops::service::adapters::{AdapterKind, Adapters, AgentRunner};
use crate::ops::service::config::ServiceConfig;
use crate::ops::service::decision::DecisionBackend;
use crate::ops::service::{MAX_CONCURRENT_RUNS, Service};
use crate::runtime::RuntimeEnv;

// Exit status: `Done` stopped cleanly after a signal; `Failed` the address
// could not be bound or the runtime failed; `InvalidInput` invalid plans,
// policies, service policy or settings, `--addr` included (nothing served).

/// `planrun serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (`127.0.0.1:0` picks a free port; the bound
    /// address is printed on stdout).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8000", env = "PLANRUN_ADDR")]
    pub addr: String,
    /// The service policy (prompt guard, controller limits, recovery rules),
    /// TOML or YAML; default `<policies>/service/service.toml` (or `.yaml`,
    /// `.yml`), or built-in defaults when no such file exists.
    #[arg(long, value_name = "FILE")]
    pub service_policy: Option<PathBuf>,
    /// With a database store (`--store postgres://…`), do not take up the
    /// runs nobody holds (by default the service works them, as `planrun
    /// worker` does).
    #[arg(long)]
    pub no_worker: bool,
}

/// Runs the service until a signal; returns the exit code.
pub fn serve(args: &ServeArgs, workspace: &Path, plans: &Path, policies: &Path, mut env: RuntimeEnv) -> ExitCode {
    let config = match ServiceConfig::from_env() {
        Ok(config) => config,
        Err(message) => return fail(ExitStatus::InvalidInput, &message),
    };
    let catalog = match crate::ops::load_catalog(plans, policies, Some(workspace)) {
        Ok(catalog) => catalog,
        Err(error) => {
            if let Some((sources, diagnostics)) = error.findings() {
                eprint!("{}", render_all(sources, diagnostics));
            }
            return fail(ExitStatus::InvalidInput, &format!("{error}; nothing served"));
        }
    };
    let policy = match load_service_policy(args, policies) {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    if let Err(error) = std::fs::create_dir_all(workspace) {
        return fail(
            ExitStatus::InvalidInput,
            &format!("cannot create workspace `{}`: {error}", display_path(workspace)),
        );
    }
    let workspace = match workspace.canonicalize() {
        Ok(path) => path,
        Err(error) => {
            return fail(
                ExitStatus::InvalidInput,
                &format!("cannot open workspace `{}`: {error}", display_path(workspace)),
            );
        }
    };
    // Concurrent runs share durability barriers (group commit): every
    // record and agent run of the workspace goes through the same committer.
    match env.stores.group_commit(&workspace) {
        Ok(Some(grouped)) => env.stores = grouped,
        Ok(None) => {}
        Err(error) => {
            return fail(
                ExitStatus::InvalidInput,
                &format!("cannot open workspace `{}`: {error}", display_path(&workspace)),
            );
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(ExitStatus::Failed, &format!("cannot start the async runtime: {error}")),
    };
    let env = Arc::new(env);
    let store = env.store(&workspace);
    // Only a shared (database) store has runs for workers.
    let shared = store.shared();
    let works_agent_runs = !args.no_worker && shared;
    let worker = works_agent_runs.then(|| start_worker(&env, &workspace));
    let agent = Arc::new(AgentRunner {
        catalog,
        workspace: workspace.clone(),
        env: Arc::clone(&env),
        store: Arc::clone(&store),
    });
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&args.addr).await {
            Ok(listener) => listener,
            Err(error) => {
                // Not an address at all (`garbage`, port 99999) is a bad
                // setting; a good one that cannot be bound is a failure.
                let status = if error.kind() == std::io::ErrorKind::InvalidInput {
                    ExitStatus::InvalidInput
                } else {
                    ExitStatus::Failed
                };
                return fail(status, &format!("cannot listen on `{}`: {error}", args.addr));
            }
        };
        let client = match crate::ops::service::http_client::client_builder().build() {
            Ok(client) => client,
            Err(error) => return fail(ExitStatus::Failed, &format!("cannot build the HTTP client: {error}")),
        };
        let selection = match DecisionBackend::select(&config, &policy.decision, &client).await {
            Ok(selection) => selection,
            Err(message) => return fail(ExitStatus::InvalidInput, &format!("{message}; nothing served")),
        };
        let ollama_up = selection.ollama_up;
        let adapters = Adapters {
            agent,
            echo_program: crate::ops::service::adapters::local_echo::find_echo(),
            client,
            openai: config.openai.clone(),
            ollama: config.ollama.clone(),
            ollama_up,
            timeout: config.timeouts.adapter,
        };
        let slots = Arc::new(Semaphore::new(MAX_CONCURRENT_RUNS as usize));
        let service = Arc::new(Service {
            workspace,
            policy,
            adapters,
            decision: selection.backend,
            decision_note: selection.note,
            env,
            store,
            api_token: config.api_token.clone(),
            slots: Arc::clone(&slots),
            works_agent_runs,
        });
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(error) => return fail(ExitStatus::Failed, &format!("cannot read the bound address: {error}")),
        };
        announce(&service, &address.to_string());
        let app = app::router(Arc::clone(&service));
        // Queued bridge runs left by a node that died: taken up now, and
        // (a shared store) every few seconds.
        let scanner = tokio::spawn(crate::ops::service::accepted::scan(Arc::clone(&service), shared));
        let served = axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await;
        scanner.abort();
        if let Err(error) = served {
            return fail(ExitStatus::Failed, &format!("server error: {error}"));
        }
        // Every run holds a slot until it has finished and written its records.
        let _all = slots.acquire_many(MAX_CONCURRENT_RUNS).await;
        if let Some((stop, thread)) = worker {
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        eprintln!("planrun serve: stopped; every in-flight run finished");
        ExitCode::from(ExitStatus::Done)
    })
}

/// The service's worker: a thread that takes up the runs of a database
/// store nobody holds ([`crate::ops::work`]), one line per run on stderr,
/// until `stop` is set (at shutdown it finishes the run it is driving).
fn start_worker(
    env: &Arc<RuntimeEnv>,
    workspace: &Path,
) -> (Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let input = crate::ops::WorkerInput {
        workspace: workspace.to_path_buf(),
        once: false,
        poll: std::time::Duration::from_millis(1000),
        concurrency: 1,
        stop: Some(Arc::clone(&stop)),
    };
    let env = Arc::clone(env);
    let thread = std::thread::spawn(move || {
        let report = |worked: &crate::ops::WorkedRun| match &worked.outcome {
            Ok(outcome) => {
                eprintln!("planrun serve: worker: run {} · {}", worked.run_id, outcome.state.status.as_str())
            }
            Err(error) => eprintln!("planrun serve: worker: run {} · not continued: {error}", worked.run_id),
        };
        if let Err(error) = crate::ops::work(&input, &env, &report) {
            eprintln!("planrun serve: worker stopped: {error}");
        }
    });
    (stop, thread)
}

/// The service policy through the loader (`--service-policy`, else
/// `<policies>/service/service.toml` or `.yaml`, else the built-in
/// defaults); on errors their diagnostics on stderr and exit 2.
fn load_service_policy(args: &ServeArgs, policies: &Path) -> Result<ServicePolicy, ExitCode> {
    let Some(path) = args.service_policy.clone().or_else(|| Loader::service_policy_file(policies)) else {
        return Ok(ServicePolicy::default());
    };
    let mut loader = Loader::new();
    match loader.load_service_policy(&path) {
        Some(policy) if !loader.has_errors() => Ok(policy),
        _ => {
            let findings: Vec<_> = loader.sorted_diagnostics().into_iter().cloned().collect();
            eprint!("{}", render_all(loader.sources(), &findings));
            Err(fail(ExitStatus::InvalidInput, "invalid service policy; nothing served"))
        }
    }
}

/// Prints the bound address on stdout (tests and scripts read it) and a
/// summary on stderr.
fn announce(service: &Service, address: &str) {
    let adapters =
        AdapterKind::ALL.map(|kind| format!("{}={}", kind.name(), service.adapters.mode(kind).as_str())).join(" ");
    eprintln!(
        "planrun serve: decision backend {}{}{}; adapters {adapters}; service policy {}; auth {}",
        service.decision.name(),
        service.decision.model().map(|model| format!(" ({model})")).unwrap_or_default(),
        service.decision_note.as_deref().map(|note| format!(" ({note})")).unwrap_or_default(),
        service.policy.source,
        if service.api_token.is_some() { "bearer token" } else { "none" },
    );
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on http://{address}");
    let _ = stdout.flush();
}

/// Waits for SIGTERM or SIGINT ([`StopSignals`]; forever when they cannot
/// be installed), then says that in-flight runs are being finished.
async fn shutdown_signal() {
    match StopSignals::install() {
        Ok(mut signals) => {
            signals.next().await;
        }
        Err(_) => std::future::pending::<()>().await,
    }
    eprintln!("planrun serve: shutting down; finishing in-flight runs");
}
