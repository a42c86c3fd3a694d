//! `retry_backoff`: how long a failed step waits before its next attempt.
//!
//! The wait doubles (by `multiplier`) from `initial_ms` up to `max_ms`, and
//! jitter spreads it so that many runs failing together do not retry in
//! step. The jitter is a pure function of the run id, the step id and the
//! attempt: two runs spread apart, while one run's waits are the same every
//! time they are computed (the event that records a wait and the loop that
//! waits agree, and a test clock gives the same numbers run after run).

use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// How the wait of one retry is spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Jitter {
    /// Exactly the exponential step.
    None,
    /// A point of the upper half of the step: never shorter than half.
    Equal,
    /// A point between zero and the step.
    Full,
}

impl Jitter {
    pub const NAMES: [(&'static str, Jitter); 3] =
        [("none", Jitter::None), ("equal", Jitter::Equal), ("full", Jitter::Full)];
}

/// The policy's `[retry_backoff]`, every key filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RetryBackoff {
    pub initial_ms: u64,
    /// No wait is longer, whatever a step asks.
    pub max_ms: u64,
    pub multiplier: u32,
    pub jitter: Jitter,
}

/// Default `retry_backoff.initial_ms`.
pub const DEFAULT_BACKOFF_INITIAL_MS: u64 = 250;
/// Default `retry_backoff.max_ms`.
pub const DEFAULT_BACKOFF_MAX_MS: u64 = 5_000;
/// Default `retry_backoff.multiplier`.
pub const DEFAULT_BACKOFF_MULTIPLIER: u32 = 2;

impl Default for RetryBackoff {
    fn default() -> Self {
        RetryBackoff {
            initial_ms: DEFAULT_BACKOFF_INITIAL_MS,
            max_ms: DEFAULT_BACKOFF_MAX_MS,
            multiplier: DEFAULT_BACKOFF_MULTIPLIER,
            jitter: Jitter::Equal,
        }
    }
}

/// A step's `retry_backoff`: the keys it gives; the others are the policy's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BackoffOverride {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multiplier: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Jitter>,
}

impl RetryBackoff {
    /// The policy's settings with a step's own over them. The policy's
    /// `max_ms` stays the ceiling of every wait.
    pub fn with(&self, step: Option<&BackoffOverride>) -> RetryBackoff {
        let Some(step) = step else { return *self };
        RetryBackoff {
            initial_ms: step.initial_ms.unwrap_or(self.initial_ms),
            max_ms: step.max_ms.map_or(self.max_ms, |max| max.min(self.max_ms)),
            multiplier: step.multiplier.unwrap_or(self.multiplier),
            jitter: step.jitter.unwrap_or(self.jitter),
        }
    }

    /// These settings with every key `given` names replaced (a policy's
    /// `[retry_backoff]` over the defaults; no ceiling).
    pub fn with_all(&self, given: &BackoffOverride) -> RetryBackoff {
        RetryBackoff {
            initial_ms: given.initial_ms.unwrap_or(self.initial_ms),
            max_ms: given.max_ms.unwrap_or(self.max_ms),
            multiplier: given.multiplier.unwrap_or(self.multiplier),
            jitter: given.jitter.unwrap_or(self.jitter),
        }
    }

    /// The exponential step after failed attempt `failed` (1 for the first
    /// failure), before jitter: `initial_ms × multiplierⁿ⁻¹`, at most `max_ms`.
    pub fn step_ms(&self, failed: u32) -> u64 {
        let mut step = self.initial_ms.min(self.max_ms);
        for _ in 1..failed {
            step = step.saturating_mul(u64::from(self.multiplier));
            if step >= self.max_ms {
                return self.max_ms;
            }
        }
        step
    }

    /// The wait after failed attempt `failed` of step `step_id` in run
    /// `run_id`.
    pub fn delay(&self, run_id: &str, step_id: &str, failed: u32) -> Duration {
        let step = self.step_ms(failed);
        let spread = |range: u64| {
            if range == 0 {
                return 0;
            }
            let mut hasher = Sha256::new();
            for part in [run_id.as_bytes(), b"\0", step_id.as_bytes(), b"\0", &failed.to_be_bytes()] {
                hasher.update(part);
            }
            let digest = hasher.finalize();
            let mut first = [0u8; 8];
            first.copy_from_slice(&digest[..8]);
            u64::from_be_bytes(first) % (range + 1)
        };
        let ms = match self.jitter {
            Jitter::None => step,
            Jitter::Equal => step - step / 2 + spread(step / 2),
            Jitter::Full => spread(step),
        };
        Duration::from_millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_grow_by_the_multiplier_up_to_the_cap() {
        let backoff = RetryBackoff { initial_ms: 100, max_ms: 700, multiplier: 3, jitter: Jitter::None };
        let steps: Vec<u64> = (1..=5).map(|failed| backoff.step_ms(failed)).collect();
        assert_eq!(steps, [100, 300, 700, 700, 700]);
        assert_eq!(backoff.delay("run-1", "a", 2), Duration::from_millis(300));
        let huge = RetryBackoff { initial_ms: u64::MAX / 2, max_ms: u64::MAX, multiplier: 1000, jitter: Jitter::None };
        assert_eq!(huge.step_ms(40), u64::MAX, "saturates instead of overflowing");
    }

    #[test]
    fn jitter_stays_in_its_range_is_stable_and_spreads_runs() {
        let equal = RetryBackoff { initial_ms: 1000, max_ms: 1000, multiplier: 2, jitter: Jitter::Equal };
        let full = RetryBackoff { jitter: Jitter::Full, ..equal };
        let mut seen = std::collections::BTreeSet::new();
        for run in 0..200 {
            let run_id = format!("run-{run}");
            let wait = equal.delay(&run_id, "build", 1);
            assert!(wait >= Duration::from_millis(500) && wait <= Duration::from_millis(1000), "{wait:?}");
            assert!(full.delay(&run_id, "build", 1) <= Duration::from_millis(1000));
            assert_eq!(wait, equal.delay(&run_id, "build", 1), "the same inputs, the same wait");
            seen.insert(wait);
        }
        assert!(seen.len() > 100, "runs spread apart: {} distinct waits of 200", seen.len());
    }

    #[test]
    fn a_step_overrides_the_policy_below_its_ceiling() {
        let policy = RetryBackoff::default();
        let step = BackoffOverride { initial_ms: Some(10), max_ms: Some(60_000), ..BackoffOverride::default() };
        let merged = policy.with(Some(&step));
        assert_eq!(merged.initial_ms, 10);
        assert_eq!(merged.max_ms, DEFAULT_BACKOFF_MAX_MS, "the policy's max_ms is the ceiling");
        assert_eq!(merged.multiplier, DEFAULT_BACKOFF_MULTIPLIER);
        assert_eq!(policy.with(None), policy);
    }
}
