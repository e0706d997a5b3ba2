//! One producer per job kind: claims only as many jobs as the kind has free slots, hands each
//! to an executor, and sleeps until a notification, a freed slot or the poll interval.
//!
//! A kind whose concurrency spans several claim batches gets several claim streams sharing
//! its slots, so claim round trips overlap instead of queueing behind one another (each is a
//! committing write). Free capacity still bounds every claim.
//!
//! The streams take turns at the slots: one stream at a time waits for a free slot and then
//! takes every other free one up to its batch. Waiting side by side, each stream would be
//! handed one of the slots an acknowledgement frees at once (the semaphore serves waiters
//! first come, first served), and a batch's worth of freed slots would become several claims
//! of one job each.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, Notify, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Shared;
use super::executor::{Acker, Slot, execute};
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
        // A slot is a claimed job not yet settled; handlers are gated apart only when the kind
        // prefetches (otherwise every slot is a handler).
        let held = self.config.concurrency + self.config.prefetch;
        let slots = Arc::new(Semaphore::new(held));
        let gate =
            (self.config.prefetch > 0).then(|| Arc::new(Semaphore::new(self.config.concurrency)));
        let batch = self.shared.config.claim_batch.max(1);
        let streams = held.div_ceil(batch).clamp(1, MAX_STREAMS);
        let this = Arc::new(self);
        let turn = Arc::new(Mutex::new(()));
        let mut running = tokio::task::JoinSet::new();
        for _ in 0..streams {
            let slots = Slots {
                free: slots.clone(),
                turn: turn.clone(),
                batch,
                gate: gate.clone(),
            };
            running.spawn(this.clone().stream(slots, stop.clone()));
        }
        while running.join_next().await.is_some() {}
    }

    /// One claim stream: wait for a slot, claim up to a batch of free slots, dispatch, repeat.
    async fn stream(self: Arc<Self>, slots: Slots, stop: CancellationToken) {
        let mut wait = Duration::from_millis(50);
        loop {
            let Some(mut permits) = slots.take(&stop).await else {
                return;
            };
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
                let slot = Slot {
                    held: Some(permit),
                    gate: slots.gate.clone(),
                };
                self.tasks.spawn(execute(shared, handler, job, acker, slot));
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

/// A kind's slots as one claim stream sees them.
struct Slots {
    free: Arc<Semaphore>,
    /// Held by the stream whose turn it is to wait for a free slot.
    turn: Arc<Mutex<()>>,
    batch: usize,
    /// The kind's handlers, when it prefetches.
    gate: Option<Arc<Semaphore>>,
}

impl Slots {
    /// Waits for this stream's turn and one free slot, then takes whatever else is free, up to
    /// one batch. `None` once `stop` is cancelled.
    async fn take(&self, stop: &CancellationToken) -> Option<Vec<OwnedSemaphorePermit>> {
        tokio::select! {
            () = stop.cancelled() => None,
            permits = self.take_in_turn() => permits,
        }
    }

    async fn take_in_turn(&self) -> Option<Vec<OwnedSemaphorePermit>> {
        // The turn is held until the batch is taken, so no other stream takes a slot between.
        let _turn = self.turn.lock().await;
        let first = self.free.clone().acquire_owned().await.ok()?;
        let mut permits = vec![first];
        while permits.len() < self.batch {
            match self.free.clone().try_acquire_owned() {
                Ok(permit) => permits.push(permit),
                Err(_) => break,
            }
        }
        Some(permits)
    }
}
