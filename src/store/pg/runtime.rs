//! The PostgreSQL store's own tokio runtime, on its own threads.
//!
//! [`crate::store::RunStore`] is synchronous and is called both from plain
//! commands and from inside the HTTP service's tokio runtime. Calling
//! `block_on` inside a runtime panics, and so does dropping one there; so
//! the store's runtime is built, driven and dropped on a thread of its own,
//! and a call hands its future over ([`StoreRuntime::run`]) and waits on a
//! plain channel for the answer. Waiting blocks the calling thread, as the
//! file store's `fsync` does, and never panics.

use std::future::Future;
use std::sync::mpsc;

use crate::store::StoreError;

/// A handle on the store's runtime; the runtime stops when the last clone
/// of the handle's owner ([`super::session::Session`]) is dropped.
pub struct StoreRuntime {
    handle: tokio::runtime::Handle,
    /// Dropping it ends the runtime's thread, which then drops the runtime.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl StoreRuntime {
    /// Starts the runtime thread (two worker threads: a heartbeat keeps
    /// running while a statement waits).
    pub fn start() -> std::io::Result<StoreRuntime> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new().name("planrun-pg".to_string()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("planrun-pg-worker")
                .enable_all()
                .build();
            match runtime {
                Ok(runtime) => {
                    let _ = ready_tx.send(Ok(runtime.handle().clone()));
                    // Runs until the owner is gone; the runtime is dropped
                    // here, on its own thread.
                    runtime.block_on(async {
                        let _ = stop_rx.await;
                    });
                }
                Err(error) => {
                    let _ = ready_tx.send(Err(error));
                }
            }
        })?;
        let handle = ready_rx.recv().map_err(std::io::Error::other)??;
        Ok(StoreRuntime { handle, _stop: stop_tx })
    }

    /// Runs `future` on the store's runtime and waits for its output.
    pub fn run<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.begin(future).wait()
    }

    /// Starts `future` on the store's runtime; its output is waited for
    /// (or looked at) later, through the [`Pending`] answer.
    pub fn begin<T: Send + 'static>(
        &self,
        future: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Pending<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(future.await);
        });
        Pending { rx }
    }

    /// Starts `future` on the store's runtime without waiting for it.
    pub fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) -> tokio::task::JoinHandle<()> {
        self.handle.spawn(future)
    }
}

/// The output of a future [`StoreRuntime::begin`] started.
pub struct Pending<T> {
    rx: mpsc::Receiver<Result<T, StoreError>>,
}

impl<T> Pending<T> {
    /// Waits for the output.
    pub fn wait(self) -> Result<T, StoreError> {
        self.rx.recv().unwrap_or_else(|_| Err(stopped()))
    }

    /// The output if it is there, without waiting.
    pub fn ready(&mut self) -> Option<Result<T, StoreError>> {
        match self.rx.try_recv() {
            Ok(output) => Some(output),
            Err(mpsc::TryRecvError::Empty) => None,
            Err(mpsc::TryRecvError::Disconnected) => Some(Err(stopped())),
        }
    }
}

fn stopped() -> StoreError {
    StoreError::Database { action: "finish a call", message: "the store's runtime stopped".to_string() }
}
