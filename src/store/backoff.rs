//! [`Backoff`]: jittered exponential delays between attempts to reach a
//! store that went away (a database restarting, a session ended), so that
//! a fleet of workers restarted together does not reconnect in lock-step
//! (SCALE-OUT.md §7, "connection storms").

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// The first delay after a failed attempt.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(200);
/// No delay is longer than this, however often an attempt failed.
pub const RECONNECT_MAX: Duration = Duration::from_secs(10);

/// Delays that double from `first` up to `max`, each a random point of the
/// upper half of its step ("equal jitter": never shorter than half of it,
/// never in step with another process).
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    step: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new(RECONNECT_FIRST, RECONNECT_MAX)
    }
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Backoff {
        Backoff { first, max: max.max(first), step: first }
    }

    /// The delay before the next attempt; the one after is up to twice as
    /// long.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.step;
        self.step = (step * 2).min(self.max);
        let half = step / 2;
        let spread = u64::try_from(half.as_micros()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_micros(random() % (spread + 1))
    }

    /// After a success: the next failure starts again from `first`.
    pub fn reset(&mut self) {
        self.step = self.first;
    }
}

/// A random number for the jitter: the standard library's per-process
/// random hash keys (no clock, no id: nothing a record depends on).
fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u8(0);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_each_in_the_upper_half_of_its_step() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let steps = [100, 200, 400, 800, 800, 800];
        let delays: Vec<Duration> = steps.iter().map(|_| backoff.next_delay()).collect();
        for (delay, step) in delays.iter().zip(steps) {
            let step = Duration::from_millis(step);
            assert!(*delay >= step / 2 && *delay <= step, "{delay:?} within [{:?}, {step:?}]", step / 2);
        }
        backoff.reset();
        assert!(backoff.next_delay() <= Duration::from_millis(100), "a success starts again from the first");
        // Jittered: a hundred first delays are not all the same.
        let firsts: std::collections::HashSet<Duration> =
            (0..100).map(|_| Backoff::new(Duration::from_millis(100), Duration::from_secs(1)).next_delay()).collect();
        assert!(firsts.len() > 10, "{firsts:?}");
    }
}
