//! planrun: a declarative plan interpreter for a bounded, local-first agent
//! runtime.
//!
//! # Architecture
//!
//! Data flows one way:
//!
//! ```text
//! plans/*.toml|yaml ─┐
//!                    ├─ spec (load + validate) ─▶ model ─▶ router ─▶ runtime ─▶ policy ─▶ tools
//! policies/*.toml  ──┘                                                 │
//!                                                                      └──────▶ store (runs/<id>/…)
//! ```
//!
//! - [`diag`]: spans, diagnostics and their rendering (`file:line:column`).
//! - [`spec`]: reads plan and policy files (TOML or YAML) into a spanned
//!   tree and validates it into the [`model`], collecting every finding.
//! - [`model`]: validated plans and policies; invariants hold by construction.
//! - [`template`]: `{{ … }}` references, parsed at load, rendered per step.
//! - [`preview`]: what a run would do (`planrun plan`), computed from the
//!   plan and policy alone, executing and creating nothing.
//! - [`router`]: picks the plan for a goal by keywords, explaining why.
//! - [`runtime`]: the interpreter loop, retry, budgets, approval gates,
//!   idempotency receipts and crash recovery, `when`/`expect`/`[[verify]]`,
//!   the control commands (`approve`, `reject`, `resume`), the injected
//!   clock and id generator, audit events and progress output.
//! - [`policy`]: decides whether a resolved action may run, naming the rule.
//! - [`tools`]: the step kinds (`shell`, `write_file`, `read_file`,
//!   `finish`, `flaky`, `ticket_lookup`, `ticket_close`) and the confined
//!   [`tools::Workspace`].
//! - [`store`]: the run records: the sealed checkpoint, the hash-chained
//!   audit log, the history, receipts; strict verification on load.
//! - [`digest`]: SHA-256 as hex, shared by the loader, the store and the
//!   runtime.
//! - [`cli`]: the command line; `main.rs` only calls [`cli::main`].
//! - `server` (feature `server`, on by default): `planrun serve`, the HTTP
//!   bridge, adapters, prompt guard and controller loop with its decision
//!   backends; records in `<workspace>/bridge/runs/<id>/`.
//!
//! # Files
//!
//! | module | reads | writes |
//! |---|---|---|
//! | `spec` | `plans/*.toml`, `plans/*.yaml`, `policies/*.toml` | — |
//! | `tools` | workspace files (confined) | workspace files (confined) |
//! | `store` | `<workspace>/runs/<id>/*`, `<workspace>/bridge/runs/<id>/*`, `<workspace>/.planrun/receipts/*` | `<workspace>/runs/<id>/{plan.json,state.json,history.jsonl,audit.jsonl,.lock}`, `<workspace>/bridge/runs/<id>/{state.json,audit.jsonl,controller_state.json,controller_audit.jsonl,.lock}`, `<workspace>/.planrun/receipts/<sha256>.json` |
//! | `tools::tickets` | `<workspace>/tickets.json` | `<workspace>/tickets.json` |
//! | `server` | plans, policies, `policies/service/service.toml` | — (bridge, controller and agent runs through `store`) |
//! | `cli::demo` | `plans/ticket_close.toml`, `plans/ticket_close.tickets.json` | a new demo folder |

pub mod cli;
pub mod confine;
pub mod diag;
pub mod digest;
pub mod load;
pub mod model;
pub mod ops;
pub mod policy;
pub mod preview;
pub mod router;
pub mod runtime;
#[cfg(feature = "server")]
pub mod server;
pub mod store;
pub mod template;
pub mod tools;
