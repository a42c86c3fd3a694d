//! [`HeldRun`]: a run a control command has written and still holds (its
//! lock, or its lease in a database store), so that the next command of
//! the same request continues it without another process taking it in
//! between: the service's approve, then its resume (on a shared store a
//! worker woken by the approval would otherwise claim the run first).
//! Dropping it gives the run back.

use crate::store::RunHandle;

/// A run still held by this process after a control command wrote it.
pub struct HeldRun {
    pub(super) handle: Box<dyn RunHandle>,
}

impl HeldRun {
    pub fn run_id(&self) -> &str {
        self.handle.run_id()
    }
}

impl std::fmt::Debug for HeldRun {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "HeldRun({})", self.handle.run_id())
    }
}
