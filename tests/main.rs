//! Integration tests: one binary, one module per area.
//!
//! | module | what it covers |
//! |---|---|
//! | `bounded` | approvals, checkpoint integrity, receipts and crash recovery, budgets, `when`/`expect`/`verify`, the ticket demo |
//! | `scenarios` | every documented goal: exit code and golden snapshots of all run files |
//! | `security` | every security boundary: denied, and nothing executed or created |
//! | `records` | run ids, never overwriting, atomic checkpoints, `show` |
//! | `routing` | `route` explanations, ambiguity, Unicode |
//! | `cli` | usage errors and exit codes |
//! | `diagnostics` | `check` output for broken files in `tests/fixtures/` |
//! | `preview` | `plan` previews; a preview executes and creates nothing |
//! | `authoring` | `list`, `policy check`, `schema` |
//! | `server` | `planrun serve` over loopback HTTP: adapters, guard, controller, auth, errors, shutdown |
//! | `server_approvals` | `POST /runs/{id}/approve|reject`: approval-gated bridge runs, refusals, auth |
//! | `decision_backends` | Ollama/OpenAI decision backends against local fake servers: schema sent, answers validated, evidence |
//! | `controller_decisions` | the controller loop with misbehaving models: closed choices, no re-runs, start-up errors |
//! | `server_contract` | the OpenAPI document matches the service: auth, JSON errors, integers, refusals |
//! | `serve_harness` | the service test harness (server process, fake model servers) |

mod common;
mod serve_harness;

mod authoring;
mod bounded;
mod cli;
mod controller_decisions;
mod decision_backends;
mod diagnostics;
mod preview;
mod records;
mod routing;
mod scenarios;
mod security;
mod server;
mod server_approvals;
mod server_contract;
