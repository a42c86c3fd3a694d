//! The record format, whatever keeps the records: the checkpoint envelope,
//! canonical JSON, the audit log's lines and chain, the head line, step
//! records, receipts and the run state.

pub(crate) mod agent;
pub(crate) mod audit;
pub mod canonical;
pub(crate) mod envelope;
pub(crate) mod head;
pub(crate) mod head_state;
pub(crate) mod history;
pub(crate) mod receipts;
pub(crate) mod record_checkpoint;
pub(crate) mod run_log;
pub(crate) mod state;
pub(crate) mod version;
