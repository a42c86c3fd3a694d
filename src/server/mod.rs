//! The HTTP service (`planrun serve`, SPEC §12; the seed's bridge and
//! controller), behind the cargo feature `server` (on by default).
//!
//! | file | holds |
//! |---|---|
//! | `app.rs` | routes and thin handlers, bearer auth, body limit |
//! | `bridge.rs` | the bridge run manager: instruction, guard, adapter, records |
//! | `approvals.rs` | approve / reject a bridge run whose agent run waits for approval |
//! | `controller.rs` | the controller loop: decisions, recovery, limits |
//! | `adapters/` | `stub`, `local_echo`, `agent`, `openai`, `ollama`, `cloudcode` |
//! | `decision/` | decision backends (`stub`, `ollama`, `openai`): closed choices, structured output, answer validation, evidence |
//! | `guard.rs` | the prompt guard |
//! | `service_policy.rs` | `policies/service/service.toml`: guard, controller limits, recovery rules |
//! | `config.rs` | environment settings |
//! | `records.rs` | `<workspace>/bridge/runs/<id>/` state and audit files |
//! | `ids.rs` | `br-…`, `ctrl-…`, `bri-ctrl-…-i<n>`, `agent-<bridge id>` |
//! | `error.rs` | typed errors and their JSON bodies |
//! | `openapi.rs` | the OpenAPI document |
//!
//! Start-up loads and validates the plans, the run policies and the service
//! policy once (any error: diagnostics on stderr, exit 2, nothing served),
//! picks the decision backend, binds, prints `listening on http://<addr>` on
//! stdout and serves until SIGINT or SIGTERM; then it stops accepting
//! connections and waits for every in-flight run to finish before exiting 0.

pub mod adapters;
pub mod app;
pub mod approvals;
pub mod bridge;
pub mod config;
pub mod controller;
pub mod decision;
pub mod error;
pub mod guard;
pub mod ids;
pub mod openapi;
pub mod records;
pub mod service;
pub mod service_policy;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use tokio::sync::Semaphore;

use crate::diag::{SourceMap, render_all};
use crate::load::Loader;
use crate::runtime::RuntimeEnv;
use crate::server::adapters::{AdapterKind, Adapters, AgentRunner};
use crate::server::approvals::Decisions;
use crate::server::config::ServiceConfig;
use crate::server::decision::DecisionBackend;
use crate::server::ids::ServiceIds;
use crate::server::service::{MAX_CONCURRENT_RUNS, Service};
use crate::server::service_policy::ServicePolicy;

/// Exit code: stopped cleanly after a signal.
const EXIT_OK: u8 = 0;
/// Exit code: the address could not be bound or the runtime failed.
const EXIT_FAILED: u8 = 1;
/// Exit code: invalid plans, policies, service policy or settings; nothing served.
const EXIT_INVALID: u8 = 2;

/// `planrun serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (`127.0.0.1:0` picks a free port; the bound
    /// address is printed on stdout).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8000", env = "PLANRUN_ADDR")]
    pub addr: String,
    /// The service policy (prompt guard, controller limits, recovery rules);
    /// default `<policies>/service/service.toml`, or built-in defaults when
    /// that file does not exist.
    #[arg(long, value_name = "FILE")]
    pub service_policy: Option<PathBuf>,
}

/// Runs the service until a signal; returns the exit code.
pub fn serve(args: &ServeArgs, workspace: &Path, plans: &Path, policies: &Path, env: RuntimeEnv) -> ExitCode {
    let config = match ServiceConfig::from_env() {
        Ok(config) => config,
        Err(message) => return fail(EXIT_INVALID, &message),
    };
    let mut loader = Loader::new();
    let catalog = loader.load_catalog(plans, policies);
    if loader.has_errors() {
        let errors: Vec<_> = loader.sorted_diagnostics().into_iter().cloned().collect();
        eprint!("{}", render_all(loader.sources(), &errors));
        return fail(EXIT_INVALID, "invalid plan or policy files; nothing served");
    }
    let policy = match load_service_policy(args, policies) {
        Ok(policy) => policy,
        Err(code) => return code,
    };
    if let Err(error) = std::fs::create_dir_all(workspace) {
        return fail(EXIT_INVALID, &format!("cannot create workspace `{}`: {error}", workspace.display()));
    }
    let workspace = match workspace.canonicalize() {
        Ok(path) => path,
        Err(error) => return fail(EXIT_INVALID, &format!("cannot open workspace `{}`: {error}", workspace.display())),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => return fail(EXIT_FAILED, &format!("cannot start the async runtime: {error}")),
    };
    let ids =
        if std::env::var_os("PLANRUN_TEST_CLOCK").is_some() { ServiceIds::sequential() } else { ServiceIds::System };
    let env = Arc::new(env);
    let agent = Arc::new(AgentRunner { catalog, workspace: workspace.clone(), env: Arc::clone(&env) });
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&args.addr).await {
            Ok(listener) => listener,
            Err(error) => return fail(EXIT_FAILED, &format!("cannot listen on `{}`: {error}", args.addr)),
        };
        let client = match reqwest::Client::builder().build() {
            Ok(client) => client,
            Err(error) => return fail(EXIT_FAILED, &format!("cannot build the HTTP client: {error}")),
        };
        let selection = match DecisionBackend::select(&config, &policy.decision, &client).await {
            Ok(selection) => selection,
            Err(message) => return fail(EXIT_INVALID, &format!("{message}; nothing served")),
        };
        let ollama_up = selection.ollama_up;
        let adapters = Adapters {
            agent,
            echo_program: adapters::local_echo::find_echo(),
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
            ids,
            api_token: config.api_token.clone(),
            slots: Arc::clone(&slots),
            decisions: Decisions::default(),
        });
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(error) => return fail(EXIT_FAILED, &format!("cannot read the bound address: {error}")),
        };
        announce(&service, &address.to_string());
        let app = app::router(Arc::clone(&service));
        if let Err(error) = axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await {
            return fail(EXIT_FAILED, &format!("server error: {error}"));
        }
        // Every run holds a slot until it has finished and written its records.
        let _all = slots.acquire_many(MAX_CONCURRENT_RUNS).await;
        eprintln!("planrun serve: stopped; every in-flight run finished");
        ExitCode::from(EXIT_OK)
    })
}

fn load_service_policy(args: &ServeArgs, policies: &Path) -> Result<ServicePolicy, ExitCode> {
    let default_path = policies.join("service").join("service.toml");
    let path = match &args.service_policy {
        Some(path) => path.clone(),
        None if default_path.is_file() => default_path,
        None => return Ok(ServicePolicy::default()),
    };
    let mut sources = SourceMap::new();
    let mut diagnostics = Vec::new();
    match service_policy::load(&path, &mut sources, &mut diagnostics) {
        Some(policy) => Ok(policy),
        None => {
            eprint!("{}", render_all(&sources, &diagnostics));
            Err(fail(EXIT_INVALID, "invalid service policy; nothing served"))
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

async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    eprintln!("planrun serve: shutting down; finishing in-flight runs");
}

fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}
