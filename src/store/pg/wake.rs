//! Wake-ups: the one unpooled session that listens on `planrun_runnable`
//! (`LISTEN`), and a worker's wait for a run of its workspace to become
//! runnable ([`RunStore::wait_for_runnable`](crate::store::RunStore::wait_for_runnable)).

use std::time::Duration;

use super::session::Session;
use super::{sql, tls};

/// The listening session's channel, and when to try again after it ended.
#[derive(Default)]
pub(super) struct WakeUps {
    receiver: Option<std::sync::mpsc::Receiver<String>>,
    retry_at: Option<std::time::Instant>,
}

/// How long to wait before listening again after the session ended.
const LISTEN_RETRY: Duration = Duration::from_secs(5);

/// The listening session over `tls`: subscribes, then forwards each
/// notification's payload to `sender` until the session or the receiver
/// ends.
async fn listen_on<T>(config: tokio_postgres::Config, tls: T, sender: std::sync::mpsc::Sender<String>)
where
    T: tokio_postgres::tls::MakeTlsConnect<tokio_postgres::Socket> + Send,
    T::Stream: Send + 'static,
    T::TlsConnect: Send,
    <T::TlsConnect as tokio_postgres::tls::TlsConnect<tokio_postgres::Socket>>::Future: Send,
{
    let Ok((client, mut connection)) = config.connect(tls).await else { return };
    // The connection is polled here (it carries the notifications); the
    // client lives as long as the session listens.
    let forward = async move {
        while let Some(Ok(message)) = std::future::poll_fn(|context| connection.poll_message(context)).await {
            if let tokio_postgres::AsyncMessage::Notification(note) = message
                && sender.send(note.payload().to_string()).is_err()
            {
                return;
            }
        }
    };
    let subscribe = async move {
        if client.batch_execute(sql::LISTEN_RUNNABLE).await.is_ok() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = forward => {},
        () = subscribe => {},
    }
}

impl Session {
    /// Starts the listening session: one unpooled connection that
    /// subscribes to `planrun_runnable` and forwards each payload (a
    /// workspace id). When it ends (the server went away) the channel
    /// closes and the next wait starts another.
    fn listen(&self) -> std::sync::mpsc::Receiver<String> {
        let (sender, receiver) = std::sync::mpsc::channel();
        let (config, connector) = (self.config.clone(), self.connector.clone());
        self.runtime.spawn(async move {
            match connector {
                tls::Connector::Plain => listen_on(config, tokio_postgres::NoTls, sender).await,
                tls::Connector::Rustls(rustls) => listen_on(config, rustls, sender).await,
            }
        });
        receiver
    }

    /// Waits up to `timeout` for a wake-up of workspace `workspace_id`
    /// ([`RunStore::wait_for_runnable`](crate::store::RunStore::wait_for_runnable)), listening first if no session listens.
    pub(super) fn wait_for_runnable(&self, workspace_id: &Result<String, String>, timeout: Duration) -> bool {
        let Ok(mut wake_ups) = self.wake_ups.lock() else {
            std::thread::sleep(timeout);
            return false;
        };
        if wake_ups.receiver.is_none() && wake_ups.retry_at.is_none_or(|at| std::time::Instant::now() >= at) {
            wake_ups.receiver = Some(self.listen());
        }
        let Some(receiver) = &wake_ups.receiver else {
            drop(wake_ups);
            std::thread::sleep(timeout);
            return false;
        };
        match receiver.recv_timeout(timeout) {
            Ok(workspace) => workspace_id.as_ref().is_ok_and(|id| *id == workspace),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                // The session ended (or never began): poll only, and listen
                // again a little later.
                wake_ups.receiver = None;
                wake_ups.retry_at = Some(std::time::Instant::now() + LISTEN_RETRY);
                drop(wake_ups);
                std::thread::sleep(timeout);
                false
            }
        }
    }
}
