//! planrun: a declarative plan interpreter for a bounded, local-first agent
//! runtime.
//!
//! # Architecture: three layers
//!
//! ```text
//!  front ends   cli (one file per command)          server (axum routes, bodies, OpenAPI, HTTP errors)
//!                    │                                   │
//!  use cases    ops: run · resume · approve · reject · cancel · show · preview · check · route
//!                    │   ops::service: bridge and controller runs, adapters, decisions (no HTTP)
//!                    │     (typed inputs and outcomes, one ExitStatus)
//!  engine       load ──▶ model ◀── router, preview
//!                │                       │
//!                └──▶ policy ──▶ confine ◀── tools ◀── runtime ──▶ store (RunStore)
//!                                       diag, template, digest, fence, strict_json below all
//!                                       (and exit, the front ends' error line and stop signals)
//! ```
//!
//! Imports only run down: a front end may use `ops` (and `server` the
//! service's use cases, `ops::service`) and the engine; `ops` uses the
//! engine; the engine knows no front end and no use case; no two
//! modules import each other. `tests/layering.rs` checks it on every test
//! run (each top-level module's layer is a row of its table; a new module
//! needs one), and also that no folder's modules import each other in a
//! cycle and that only `store` writes run folders. Inside the engine:
//!
//! - [`diag`]: spans, diagnostics and their rendering (`file:line:column`),
//!   and the one path-display helper.
//! - [`template`]: `{{ … }}` references, parsed at load, rendered per step.
//! - [`digest`]: SHA-256 as hex.
//! - [`strict_json`]: the one reader of JSON this process did not just
//!   write (request bodies, records, receipts, `tickets.json`, model
//!   answers): duplicate keys, NaN/Infinity and trailing data refused.
//! - [`fence`]: the local lease deadline: whether this process may still
//!   act on a run it holds (renewed by the store, asked by the runtime
//!   before each write and effect, polled by the shell tool, which kills
//!   its child past it).
//! - [`model`]: validated plans, policies and the service policy; invariants
//!   hold by construction; failure classes and run statuses; the typed
//!   facts of a run's records (a tool's facts, a step record's details,
//!   stop reasons, completion evidence, a receipt's result), which the
//!   tools and the runtime write, the store keeps and the runtime and
//!   front ends read.
//! - [`confine`]: the workspace confinement (path rules, the cap-std
//!   handle) and the program resolver, below everything that checks a path
//!   or a program.
//! - [`policy`]: decides whether a resolved action may run, naming the rule;
//!   the one argument matcher (used by the runtime and by the loader's check
//!   of rule examples).
//! - [`load`]: reads plan, policy and service policy files (TOML or YAML)
//!   into a spanned tree and validates it into the [`model`], collecting
//!   every finding; the key tables behind the validators and `planrun schema`.
//! - [`router`]: picks the plan for a goal by keywords, explaining why.
//! - [`preview`]: what a run would do, computed from the plan and policy
//!   alone, executing and creating nothing.
//! - [`tools`]: the step kinds (`shell`, `write_file`, `read_file`,
//!   `finish`, `flaky`, `ticket_lookup`, `ticket_close`), the Landlock
//!   sandbox around a shell step's program (`tools::sandbox`), and what stops a
//!   shell child its holder can no longer stop: the note a later claim on
//!   the machine reads (`tools::children`) and, on a database store, the
//!   tool guard that kills it when its holder dies (`tools::guard`).
//! - [`store`]: the [`store::RunStore`] seam and the one chooser of a
//!   backend, [`store::open`] (`--store`); the record format every backend
//!   writes and checks over its bytes (`store/records/`: sealed
//!   checkpoints, hash-chained audit logs and head lines, history,
//!   receipts, strict verification); the file store (`store/file/`:
//!   folders, locks, atomic writes, group commit); and (cargo feature
//!   `postgres`, `--store postgres://…`) the PostgreSQL store with the same
//!   records in tables, leases and `export` (`store/pg/`). A new backend is
//!   one folder, its conformance run and one match arm in `store::open`.
//! - [`snapshot`]: golden snapshot files in insta's `.snap` format and the
//!   unified diff of a mismatch (`planrun test`).
//! - [`runtime`]: the interpreter loop (recorder, budgets, one attempt,
//!   idempotency, completion), approvals, a run's files found again and its
//!   story checked, typed audit events, and the injected clock, ids, store and process environment
//!   (`runtime::env`, the one module that reads them).
//!
//! [`exit`] is how a front-end process ends (the `error:` line and exit
//! code, the stop signals), shared by `cli` and `server`, which may not
//! import each other.
//!
//! [`ops`] holds the use cases (the commands on existing runs in
//! `ops/control/`); [`cli`] the command line (`main.rs` only calls
//! [`cli::main`]); `src/bin/planrun-sandbox.rs` is the second binary, the
//! trampoline that confines an MCP server or, where a user namespace is
//! needed, a shell step's program (it only calls
//! [`tools::sandbox::trampoline`]). With the feature `server` (on by default),
//! `ops::service` holds the service's use cases: bridge runs, accepted runs and durable
//! tasks, adapters (the agent adapter runs goals through [`ops::run`], as
//! the CLI does), prompt guard, controller loop with its recovery and
//! decision backends, their events and statuses, run listing; it knows no
//! HTTP. `server` is `planrun serve`'s HTTP front end over it: routes,
//! extractors, JSON bodies, OpenAPI, settings glue and HTTP errors.
//!
//! # Files
//!
//! | module | reads | writes |
//! |---|---|---|
//! | `load` | `plans/*.toml`, `plans/*.yaml`, `policies/*.toml`, `policies/service/service.{toml,yaml}` | — |
//! | `tools` | workspace files (confined) | workspace files (confined) |
//! | `store` | `<workspace>/runs/<id>/*`, `<workspace>/bridge/runs/<id>/*`, `<workspace>/.planrun/receipts/*` | `<workspace>/runs/<id>/{plan.json,state.json,history.jsonl,audit.jsonl}`, `<workspace>/bridge/runs/<id>/{state.json,audit.jsonl,controller_state.json,controller_audit.jsonl}`, `<workspace>/.planrun/receipts/<sha256>.json` |
//! | `tools::tickets` | `<workspace>/tickets.json` | `<workspace>/tickets.json` |
//! | `ops::service`, `server` | — (files through `load`, records through `store`) | — |
//! | `load` (scenarios), `ops::test` | `plans/*.scenarios.{toml,yaml,yml}`, their fixtures, `snapshots/**/*.snap` | a sandbox `/tmp/planrun??????/` per scenario (removed after), `snapshots/<folder>/<name>.snap` (`--accept`, `--review`) or `.snap.new` (pending) |
//! | `cli::demo` | `plans/ticket_close.toml`, `plans/ticket_close.tickets.json` | a new demo folder |

pub mod cli;
pub mod confine;
pub mod diag;
pub mod digest;
pub mod exit;
pub mod fence;
pub mod load;
pub mod model;
pub mod ops;
pub mod policy;
pub mod preview;
pub mod redact;
pub mod router;
pub mod runtime;
#[cfg(feature = "server")]
pub mod server;
pub mod snapshot;
pub mod store;
pub mod strict_json;
pub mod template;
pub mod tools;
