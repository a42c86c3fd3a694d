//! Running a request's work as the service runs every run: in its own
//! task, holding a slot of the service's semaphore (so shutdown waits for
//! it), on a blocking thread (the store writes with blocking I/O and, under
//! group commit, waits there for the barrier it shares with concurrent
//! runs), and made durable before its result is answered
//! ([`crate::store::RunStore::make_durable`]).

use std::future::Future;
use std::sync::Arc;

use axum::http::StatusCode;
use tokio::sync::OwnedSemaphorePermit;

use crate::server::error::ApiError;
use crate::server::service::Service;
use crate::store::StoreError;

/// Runs `work` to its end holding a slot, on a blocking thread, then makes every record written so far durable; the
/// result is answered only after that. A client that disconnects does not
/// stop the work.
pub async fn run_durably<T, E, F>(
    service: &Arc<Service>,
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
        service.store.make_durable()?;
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
