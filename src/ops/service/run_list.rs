//! `GET /runs?limit=N&after=ID`: the bridge runs, newest first, a page at a
//! time. The cursor is the id of the last run of the previous page
//! (`next_after`), so a page stays put when newer runs are created meanwhile.
//!
//! Each run is its record as stored (`GET /runs/{id}` additionally reads a
//! waiting run through to its agent run). A record that fails verification
//! is listed as `{run_id, status: "unreadable", error}`, never hidden.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::ops::service::Service;
use crate::store::{RecordKind, RunId, StoreError};

/// Runs per page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 20;
/// The largest `limit`.
pub const MAX_LIMIT: usize = 100;

/// The paging parameters, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paging {
    pub limit: usize,
    pub after: Option<RunId>,
}

/// One page of bridge runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPage {
    pub runs: Vec<Value>,
    /// Pass as `after` for the next page; `null` on the last page.
    pub next_after: Option<String>,
}

/// Why a page could not be listed.
#[derive(Debug)]
pub enum PageError {
    /// Bad paging parameters (400 `invalid_paging`).
    Invalid(String),
    /// `after` is a valid id that names no bridge run (404 `run_not_found`).
    UnknownAfter(String),
    Records(StoreError),
}

impl Paging {
    /// Reads `limit` and `after` from the query; any other parameter, a
    /// `limit` outside 1..=[`MAX_LIMIT`] or an invalid id is refused.
    pub fn parse(query: &HashMap<String, String>) -> Result<Paging, PageError> {
        if let Some(unknown) = query.keys().find(|key| !matches!(key.as_str(), "limit" | "after")) {
            return Err(PageError::Invalid(format!("unknown parameter `{unknown}`; known: `limit`, `after`")));
        }
        let limit = match query.get("limit") {
            None => DEFAULT_LIMIT,
            Some(text) => {
                text.parse::<usize>().ok().filter(|limit| (1..=MAX_LIMIT).contains(limit)).ok_or_else(|| {
                    PageError::Invalid(format!("`limit` must be a whole number from 1 to {MAX_LIMIT}, not `{text}`"))
                })?
            }
        };
        let after = query.get("after").map(|after| RunId::parse(after)).transpose();
        let after = after.map_err(|error| PageError::Invalid(format!("`after`: {error}")))?;
        Ok(Paging { limit, after })
    }
}

/// The page of bridge runs after `paging.after` (from the newest when
/// absent); an `after` that names no bridge run is 404.
pub fn page(service: &Service, paging: &Paging) -> Result<RunPage, PageError> {
    let listed = service.store.list_records(RecordKind::Bridge).map_err(PageError::Records)?;
    let start = match &paging.after {
        None => 0,
        Some(after) => {
            let position = listed.iter().position(|listing| listing.run_id == after.as_str());
            1 + position.ok_or_else(|| PageError::UnknownAfter(after.to_string()))?
        }
    };
    let ids: Vec<&str> = listed.iter().skip(start).take(paging.limit).map(|listing| listing.run_id.as_str()).collect();
    let more = listed.len() > start + ids.len();
    let runs = ids
        .iter()
        .map(|id| match service.store.read_record(RecordKind::Bridge, id) {
            Ok(record) => record.state,
            Err(error) => json!({"run_id": id, "status": "unreadable", "error": error.to_string()}),
        })
        .collect();
    let next_after = more.then(|| ids.last().map(|id| id.to_string())).flatten();
    Ok(RunPage { runs, next_after })
}
