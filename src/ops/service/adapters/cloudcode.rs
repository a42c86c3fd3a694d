//! The `cloudcode` adapter: its transport does not exist in this version,
//! so `/health` reports it `unavailable` and every run with it fails.

use crate::ops::service::adapters::{AdapterMode, AdapterResult};

pub fn execute() -> AdapterResult {
    AdapterResult::failed("the `cloudcode` transport is unavailable".to_string(), None, AdapterMode::Unavailable)
}
