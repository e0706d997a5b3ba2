//! LISTEN for new jobs and wake the producer of their kind.
//!
//! Notifications are an accelerator, never the source of truth: producers also poll. When the
//! listening connection drops, messages sent meanwhile are lost, so every producer is woken
//! once on losing it and again after reconnecting.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::listen::{Listened, listen};
use crate::queue::CHANNEL;

/// Runs until `stop`, reconnecting with backoff whenever the connection is lost.
pub(crate) async fn run(
    pool: sqlx::PgPool,
    wakers: BTreeMap<String, Arc<Notify>>,
    stop: CancellationToken,
) {
    listen(pool, CHANNEL, stop, |event| match event {
        Listened::Notified(kind) => {
            if let Some(waker) = wakers.get(kind) {
                waker.notify_one();
            }
        }
        Listened::Connected | Listened::Lost => wakers.values().for_each(|w| w.notify_one()),
    })
    .await;
}
