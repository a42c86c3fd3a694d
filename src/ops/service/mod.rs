//! The service's use cases (feature `server`), below the HTTP front end
//! `server/`: bridge runs, the controller loop and its recovery, the
//! adapters and decision backends they call, their typed audit events and
//! record statuses, and the settings they are built from. Nothing here
//! knows HTTP (no axum): `server/` turns requests into calls here and
//! outcomes into responses.
//!
//! | file | holds |
//! |---|---|
//! | `context.rs` | the [`Service`]: everything a request needs, built once at start-up |
//! | `accepted.rs` | bridge runs accepted with `"wait": false`, driven in the background; the scan that takes up queued and interrupted runs |
//! | `durable_task.rs` | a request's work run in a slot of the service, on a blocking thread, durable before it is answered |
//! | `run_list.rs` | the bridge runs, newest first, a page at a time |
//! | `bridge.rs` | the bridge run manager: instruction, guard, adapter, records (through the store) |
//! | `bridge_event.rs` | a bridge run's typed audit events |
//! | `controller.rs` | the controller loop: decisions, recovery, limits |
//! | `controller_event.rs` | a controller run's typed audit events |
//! | `controller_recovery.rs` | the recovery rules a controller run applies to a failed step |
//! | `record_status.rs` | the bridge and controller record statuses |
//! | `adapters/` | `stub`, `local_echo`, `agent`, `openai`, `ollama`, `cloudcode` |
//! | `decision/` | decision backends (`stub`, `ollama`, `openai`): closed choices, structured output, answer validation, evidence |
//! | `guard.rs` | the prompt guard |
//! | `config.rs` | environment settings |
//! | `http_client.rs` | the one HTTP client builder (decision backends, adapters) |
//! | `ids.rs` | the derived ids `bri-ctrl-…-i<n>` and `agent-<bridge id>` |
//! | `error.rs` | [`ServiceError`], a failure of the service itself |

pub mod accepted;
pub mod adapters;
pub mod bridge;
pub mod bridge_event;
pub mod config;
mod context;
pub mod controller;
pub mod controller_event;
pub mod controller_recovery;
pub mod decision;
pub mod durable_task;
mod error;
pub mod guard;
pub mod http_client;
pub mod ids;
pub mod record_status;
pub mod run_list;

pub use context::{MAX_CONCURRENT_RUNS, Service};
pub use error::ServiceError;
