//! One producer per job kind: claims only as many jobs as the kind has free slots, hands each
//! to an executor, and sleeps until a notification, a freed slot or the poll interval.
//!
//! A kind whose concurrency spans several claim batches gets several claim streams sharing
//! its slots, so claim round trips overlap instead of queueing behind one another (each is a
//! committing write). Free capacity still bounds every claim.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Shared;
use super::executor::{Acker, execute};
use super::registry::KindConfig;

pub(crate) struct Producer {
    pub shared: Arc<Shared>,
    pub kind: String,
    pub config: KindConfig,
    pub wake: Arc<Notify>,
    pub acker: Acker,
    pub tasks: TaskTracker,
}

/// The most claim streams one kind gets.
const MAX_STREAMS: usize = 8;

impl Producer {
    /// One claim of up to `wanted` jobs, leaving what this process cannot run to others.
    async fn claim(&self, wanted: usize) -> anyhow::Result<Vec<crate::queue::ClaimedJob>> {
        let filter = self.config.claim_filter().await?;
        Ok(self
            .shared
            .queue
            .claim_filtered(
                &self.kind,
                wanted,
                &self.shared.config.worker_id,
                filter.as_ref(),
            )
            .await?)
    }

    /// Runs until `stop`; jobs already handed out keep running on `tasks`.
    pub async fn run(self, stop: CancellationToken) {
        let slots = Arc::new(Semaphore::new(self.config.concurrency));
        let batch = self.shared.config.claim_batch.max(1);
        let streams = self
            .config
            .concurrency
            .div_ceil(batch)
            .clamp(1, MAX_STREAMS);
        let this = Arc::new(self);
        let mut running = tokio::task::JoinSet::new();
        for _ in 0..streams {
            running.spawn(this.clone().stream(slots.clone(), batch, stop.clone()));
        }
        while running.join_next().await.is_some() {}
    }

    /// One claim stream: wait for a slot, claim up to a batch of free slots, dispatch, repeat.
    async fn stream(self: Arc<Self>, slots: Arc<Semaphore>, batch: usize, stop: CancellationToken) {
        let mut wait = Duration::from_millis(50);
        loop {
            // Wait for one free slot, then take whatever else is free, up to one batch.
            let first = tokio::select! {
                () = stop.cancelled() => return,
                permit = slots.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return,
                },
            };
            let mut permits = vec![first];
            while permits.len() < batch {
                match slots.clone().try_acquire_owned() {
                    Ok(permit) => permits.push(permit),
                    Err(_) => break,
                }
            }
            let wanted = permits.len();
            let claimed = match self.claim(wanted).await {
                Ok(claimed) => {
                    wait = Duration::from_millis(50);
                    claimed
                }
                Err(err) => {
                    // A lost database never kills the worker: back off and try again.
                    tracing::warn!(kind = %self.kind, error = format!("{err:#}"), retry_in_ms = wait.as_millis() as u64, "claim failed");
                    drop(permits);
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                    wait = (wait * 2).min(Duration::from_secs(10));
                    continue;
                }
            };
            let got = claimed.len();
            for (job, permit) in claimed.into_iter().zip(permits.drain(..)) {
                let shared = self.shared.clone();
                let handler = self.config.handler.clone();
                let acker = self.acker.clone();
                self.tasks
                    .spawn(execute(shared, handler, job, acker, Some(permit)));
            }
            drop(permits);
            if got == wanted {
                // A full batch: there is probably more; let a sleeping stream help.
                self.wake.notify_one();
                continue;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.shared.config.poll_interval) => {}
            }
        }
    }
}
