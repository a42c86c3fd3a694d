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

use axum::http::StatusCode;
use tokio::sync::OwnedSemaphorePermit;

use crate::server::error::ApiError;
use crate::server::service::Service;
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

/// Runs `work` to its end holding a slot, on a blocking thread, then does
/// `then`; a client that disconnects does not stop the work.
pub async fn run_in_slot<T, E, F>(
    service: &Arc<Service>,
    then: Then,
    work: impl FnOnce(Arc<Service>) -> F + Send + 'static,
) -> Result<T, ApiError>
where
    F: Future<Output = Result<T, E>>,
    T: Send + 'static,
    E: From<StoreError> + Send + 'static,
    ApiError: From<E>,
{
    let permit = slot(service).await?;
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
    Ok(task.await.map_err(task_failed)??)
}

async fn slot(service: &Arc<Service>) -> Result<OwnedSemaphorePermit, ApiError> {
    Arc::clone(&service.slots)
        .acquire_owned()
        .await
        .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the service is stopping"))
}

fn task_failed(error: tokio::task::JoinError) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "run_crashed", format!("the run task failed: {error}"))
}
