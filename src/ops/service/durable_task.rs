//! Running a request's work as the service runs every run: in its own
//! task, holding a slot of the service's semaphore (so shutdown waits for
//! it), on a blocking thread (the store writes with blocking I/O and, under
//! group commit, waits there for the barrier it shares with concurrent
//! runs).
//!
//! What a request answers is durable before it is answered. Every write
//! that ends a request is durable when the store call returns: an agent
//! run's checkpoint that pauses or ends it waits for a barrier, and so does
//! a record's last checkpoint, before its rename (a crash that loses only
//! the rename leaves the synced temp file, which is read as the newer
//! state: see `store/file/record_dir.rs`), and the work is answered as it ends
//! ([`Then::Answer`]). The one write that is not durable on return is a new
//! record's first checkpoint (it names no log line and waits for nothing):
//! work that answers right after it (a run accepted with `"wait": false`)
//! asks for a barrier first ([`Then::MakeDurable`]).

use std::future::Future;
use std::sync::Arc;

use crate::ops::service::Service;
use crate::store::StoreError;

/// What [`run_in_slot`] does once the work is done, before its result is
/// answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Nothing: what the work answers is durable when it returns.
    Answer,
    /// One shared barrier that makes every record written so far durable
    /// ([`crate::store::RunStore::make_durable`]).
    MakeDurable,
}

/// Why a task's work did not run to its end, or how it failed.
#[derive(Debug, thiserror::Error)]
pub enum TaskError<E> {
    /// The service is stopping: it gives no more slots (HTTP 503
    /// `shutting_down`).
    #[error("the service is stopping")]
    ShuttingDown,
    /// The thread running the work panicked (HTTP 500 `run_crashed`).
    #[error("the run task failed: {0}")]
    Crashed(tokio::task::JoinError),
    /// The work's own failure.
    #[error(transparent)]
    Work(E),
}

/// Runs `work` to its end holding a slot, on a blocking thread, then does
/// `then`; a client that disconnects does not stop the work.
pub async fn run_in_slot<T, E, F>(
    service: &Arc<Service>,
    then: Then,
    work: impl FnOnce(Arc<Service>) -> F + Send + 'static,
) -> Result<T, TaskError<E>>
where
    F: Future<Output = Result<T, E>>,
    T: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    let permit = Arc::clone(&service.slots).acquire_owned().await.map_err(|_| TaskError::ShuttingDown)?;
    let service = Arc::clone(service);
    let runtime = tokio::runtime::Handle::current();
    let task = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let value = runtime.block_on(work(Arc::clone(&service)))?;
        if then == Then::MakeDurable {
            service.store.make_durable()?;
        }
        Ok::<T, E>(value)
    });
    task.await.map_err(TaskError::Crashed)?.map_err(TaskError::Work)
}
