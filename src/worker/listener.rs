//! LISTEN for new jobs and wake the producer of their kind.
//!
//! Notifications are an accelerator, never the source of truth: producers also poll. When the
//! listening connection drops, messages sent meanwhile are lost, so every producer is woken
//! once after reconnecting.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::queue::CHANNEL;

/// Runs until `stop`, reconnecting with backoff whenever the connection is lost.
pub(crate) async fn run(
    pool: sqlx::PgPool,
    wakers: BTreeMap<String, Arc<Notify>>,
    stop: CancellationToken,
) {
    let wake_all = || wakers.values().for_each(|w| w.notify_one());
    let mut wait = Duration::from_millis(100);
    loop {
        let mut listener = tokio::select! {
            () = stop.cancelled() => return,
            connected = connect(&pool) => match connected {
                Ok(listener) => listener,
                Err(err) => {
                    tracing::warn!(error = %err, retry_in_ms = wait.as_millis() as u64, "cannot LISTEN; polling only until it works");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(30));
                    continue;
                }
            }
        };
        wait = Duration::from_millis(100);
        wake_all();
        loop {
            let message = tokio::select! {
                () = stop.cancelled() => return,
                message = listener.try_recv() => message,
            };
            match message {
                Ok(Some(notification)) => {
                    if let Some(waker) = wakers.get(notification.payload()) {
                        waker.notify_one();
                    }
                }
                Ok(None) => {
                    tracing::warn!("LISTEN connection lost; reconnecting");
                    wake_all();
                    break;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "LISTEN failed; reconnecting");
                    wake_all();
                    break;
                }
            }
        }
    }
}

async fn connect(pool: &sqlx::PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}
