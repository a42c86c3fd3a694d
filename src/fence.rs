//! [`Fence`]: whether this process may still act on a run it holds — the
//! local lease deadline (self-fencing).
//!
//! A database lease expires by the database's clock, and another process
//! may take the run over from then on. The holder cannot ask the database
//! before every move (the question itself may arrive too late), so it keeps
//! a deadline of its own on the monotonic clock: the instant it *sent* its
//! last successful claim or renewal, plus the lease, minus a margin
//! ([`margin`]). The round trip counts against the holder, so its deadline
//! always falls before the database's. Past it the holder writes nothing
//! and starts no effect, and a tool still running is killed: what storage
//! cannot refuse (an effect on the world) is stopped by the holder itself.
//!
//! The store renews the fence ([`Fence::renewed`]) and drops it when the
//! lease is gone ([`Fence::lose`]); the runtime asks [`Fence::holds`]
//! before each write and effect; the shell tool polls it while it waits
//! for its child. None of them knows what kind of store gave it. A fence
//! is lost for good: once past its deadline it never holds again, even if
//! a late renewal comes back, so that a tool killed at the deadline is
//! never followed by a write that pretends it was not. The file store's
//! lock never expires ([`Fence::unbounded`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The share of the lease kept as a safety margin: a sixth (5 s of the
/// default 30 s lease), room for a slow round trip or a late heartbeat.
pub fn margin(lease: Duration) -> Duration {
    lease / 6
}

/// Whether the holder of a run may still act on it. Clones share one
/// deadline: the store's copy renews what the runtime's copy reads.
#[derive(Debug, Clone, Default)]
pub struct Fence {
    /// `None`: a hold that never expires.
    lease: Option<Arc<Lease>>,
}

#[derive(Debug)]
struct Lease {
    /// How long a claim or renewal holds the lease.
    length: Duration,
    /// The instant past which the holder must not act.
    deadline: Mutex<Instant>,
    /// Set at the deadline, or when the store learns the lease is gone.
    lost: AtomicBool,
}

impl Fence {
    /// A hold that lasts as long as its holder (the file store's `flock`).
    pub fn unbounded() -> Fence {
        Fence { lease: None }
    }

    /// A lease of `length` whose claim was sent at `sent`.
    pub fn leased(sent: Instant, length: Duration) -> Fence {
        let deadline = Mutex::new(deadline_of(sent, length));
        Fence { lease: Some(Arc::new(Lease { length, deadline, lost: AtomicBool::new(false) })) }
    }

    /// A renewal sent at `sent` succeeded: the deadline moves on (never
    /// back). Nothing changes once the fence is lost.
    pub fn renewed(&self, sent: Instant) {
        let Some(lease) = &self.lease else { return };
        if !self.holds() {
            return;
        }
        let mut deadline = lease.deadline.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *deadline = (*deadline).max(deadline_of(sent, lease.length));
    }

    /// The lease is gone (taken over): from now on the fence never holds.
    pub fn lose(&self) {
        if let Some(lease) = &self.lease {
            lease.lost.store(true, Ordering::SeqCst);
        }
    }

    /// Whether the holder may still act: its lease is not known to be gone
    /// and its local deadline has not passed. Past the deadline the fence
    /// is lost for good.
    pub fn holds(&self) -> bool {
        let Some(lease) = &self.lease else { return true };
        if lease.lost.load(Ordering::SeqCst) {
            return false;
        }
        let deadline = *lease.deadline.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if Instant::now() >= deadline {
            lease.lost.store(true, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The instant past which the holder must not act (now, once the
    /// fence is lost); `None` for a hold that never expires. It moves on
    /// with every renewal: a tool's guard is told it (`tools/guard.rs`).
    pub fn deadline(&self) -> Option<Instant> {
        let lease = self.lease.as_ref()?;
        if !self.holds() {
            return Some(Instant::now());
        }
        Some(*lease.deadline.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Whether this fence can ever stop holding (a lease, not a lock): a
    /// waiting tool then polls it.
    pub fn is_bounded(&self) -> bool {
        self.lease.is_some()
    }
}

fn deadline_of(sent: Instant, length: Duration) -> Instant {
    sent + length.saturating_sub(margin(length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unbounded_fence_always_holds() {
        let fence = Fence::unbounded();
        assert!(fence.holds() && !fence.is_bounded());
        fence.lose();
        fence.renewed(Instant::now());
        assert!(fence.holds(), "a lock is not a lease");
    }

    #[test]
    fn a_lease_holds_until_its_deadline_minus_the_margin_then_never_again() {
        // Held for 1 000 ms after each renewal (1 200 ms less a sixth).
        let length = Duration::from_millis(1200);
        let fence = Fence::leased(Instant::now(), length);
        let reader = fence.clone();
        assert!(reader.holds() && reader.is_bounded());
        std::thread::sleep(Duration::from_millis(300));
        fence.renewed(Instant::now());
        std::thread::sleep(Duration::from_millis(500));
        assert!(reader.holds(), "the renewal moved the deadline on for every clone");
        // A renewal sent long ago does not move it back.
        fence.renewed(Instant::now() - Duration::from_secs(10));
        assert!(reader.holds());
        std::thread::sleep(Duration::from_millis(600));
        assert!(!reader.holds(), "past the local deadline");
        fence.renewed(Instant::now());
        assert!(!reader.holds(), "a late renewal never revives a lost fence");
        assert!(
            reader.deadline().is_some_and(|deadline| deadline <= Instant::now()),
            "a lost fence's deadline is past"
        );
        assert_eq!(Fence::unbounded().deadline(), None);
    }

    #[test]
    fn the_deadline_moves_on_with_each_renewal() {
        let sent = Instant::now();
        let fence = Fence::leased(sent, Duration::from_secs(60));
        assert_eq!(fence.deadline(), Some(sent + Duration::from_secs(50)), "the lease less a sixth");
        let later = sent + Duration::from_secs(1);
        fence.renewed(later);
        assert_eq!(fence.deadline(), Some(later + Duration::from_secs(50)));
    }

    #[test]
    fn a_lease_known_to_be_gone_stops_holding_at_once() {
        let fence = Fence::leased(Instant::now(), Duration::from_secs(60));
        let reader = fence.clone();
        fence.lose();
        assert!(!reader.holds());
        assert_eq!(margin(Duration::from_secs(30)), Duration::from_secs(5));
    }
}
