//! One decision at a time per bridge run: the bridge runs with an approve
//! or reject in progress, claimed for the length of the decision.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use axum::http::StatusCode;

use crate::server::error::ApiError;

/// The bridge runs with a decision in progress.
#[derive(Debug, Default)]
pub struct Decisions(Mutex<HashSet<String>>);

/// Held while a decision on one bridge run is in progress.
pub struct DecisionGuard<'a> {
    decisions: &'a Decisions,
    run_id: String,
}

impl Decisions {
    /// Claims bridge run `run_id`; `run_locked` when it is already claimed.
    pub fn claim(&self, run_id: &str) -> Result<DecisionGuard<'_>, ApiError> {
        let mut claimed = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !claimed.insert(run_id.to_string()) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "run_locked",
                format!("another approve or reject of bridge run `{run_id}` is in progress"),
            ));
        }
        Ok(DecisionGuard { decisions: self, run_id: run_id.to_string() })
    }
}

impl Drop for DecisionGuard<'_> {
    fn drop(&mut self) {
        self.decisions.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_decision_at_a_time_per_run() {
        let decisions = Decisions::default();
        let first = decisions.claim("br-0001").expect("claim");
        let second = decisions.claim("br-0001").err().expect("refused");
        assert_eq!((second.status, second.code), (StatusCode::CONFLICT, "run_locked"));
        assert!(decisions.claim("br-0002").is_ok(), "another run is independent");
        drop(first);
        assert!(decisions.claim("br-0001").is_ok(), "released when the decision ends");
    }
}
