//! The always-available stub adapter: echoes the instruction, in process.

use crate::ops::service::adapters::{AdapterMode, AdapterResult};

pub fn execute(instruction: &str) -> AdapterResult {
    AdapterResult::ok(format!("[stub] {instruction}"), AdapterMode::Stub)
}
