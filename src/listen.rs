//! One LISTEN connection that survives its server: connect, deliver notifications, and on any
//! loss reconnect with backoff. The worker's wake-ups and the page's live events both use it.
//!
//! Callers are told when the connection comes up and when it is lost, because notifications
//! sent in between are gone: both callers treat a (re)connect as "anything may have changed".

use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

/// What happened on the listening connection.
#[derive(Debug)]
pub enum Listened<'a> {
    /// LISTEN is active (first time or after a loss).
    Connected,
    /// A notification's payload.
    Notified(&'a str),
    /// The connection was lost; a reconnect follows.
    Lost,
}

/// LISTENs on `channel` until `stop`, calling `on` for every event.
pub async fn listen(
    pool: sqlx::PgPool,
    channel: &str,
    stop: CancellationToken,
    mut on: impl FnMut(Listened<'_>),
) {
    let mut wait = Duration::from_millis(100);
    loop {
        let connected = tokio::select! {
            () = stop.cancelled() => return,
            connected = connect(&pool, channel) => connected,
        };
        let mut listener = match connected {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(%channel, error = %err, retry_in_ms = wait.as_millis() as u64, "cannot LISTEN; trying again");
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        wait = Duration::from_millis(100);
        on(Listened::Connected);
        loop {
            let message = tokio::select! {
                () = stop.cancelled() => return,
                message = listener.try_recv() => message,
            };
            match message {
                Ok(Some(notification)) => on(Listened::Notified(notification.payload())),
                Ok(None) => {
                    tracing::warn!(%channel, "LISTEN connection lost; reconnecting");
                    on(Listened::Lost);
                    break;
                }
                Err(err) => {
                    tracing::warn!(%channel, error = %err, "LISTEN failed; reconnecting");
                    on(Listened::Lost);
                    break;
                }
            }
        }
    }
}

async fn connect(pool: &sqlx::PgPool, channel: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(channel).await?;
    Ok(listener)
}
