//! One producer per job kind: claims only as many jobs as the kind has free slots, hands each
//! to an executor, and sleeps until a notification or the poll interval.
//!
//! One claim at a time, of every free slot up to the claim batch. A claim commits
//! asynchronously (see [`crate::queue::CLAIM_SQL`]) and completions are written by the
//! completer on other connections, so one claim loop keeps a kind's slots full; several claim
//! loops per kind were measured to add nothing a deployment uses (BENCHMARKS.md, issue 20).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Shared;
use super::executor::{Acker, execute};
use super::registry::KindConfig;
use super::slot::{Slot, Slots};

pub(crate) struct Producer {
    pub shared: Arc<Shared>,
    pub kind: String,
    pub config: KindConfig,
    pub wake: Arc<Notify>,
    pub acker: Acker,
    pub tasks: TaskTracker,
}

/// The first wait after a failed claim; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Producer {
    /// Runs until `stop`; jobs already handed out keep running on `tasks`.
    pub async fn run(self, stop: CancellationToken) {
        let slots = Slots::new(self.shared.concurrency(&self.kind));
        let batch = self.shared.config.claim_batch.max(1);
        let mut backoff = FIRST_BACKOFF;
        loop {
            let taken = tokio::select! {
                () = stop.cancelled() => return,
                taken = slots.take(batch) => taken,
            };
            let wanted = taken.len();
            if wanted == 0 {
                return;
            }
            let got = match self.claim(taken).await {
                Ok(got) => {
                    backoff = FIRST_BACKOFF;
                    got
                }
                Err(err) => {
                    // A lost database never ends the worker: back off and try again.
                    tracing::warn!(kind = %self.kind, error = format!("{err:#}"), retry_in_ms = backoff.as_millis() as u64, "claim failed");
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            if got == wanted {
                // A full claim: there is probably more, as soon as a slot is free.
                continue;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(self.shared.config.poll_interval) => {}
            }
        }
    }

    /// Claims one job per slot in `taken`, leaving what this process cannot run to others,
    /// and starts an executor for each job with its slot; the slots left over are freed.
    /// Returns how many jobs it claimed.
    async fn claim(&self, taken: Vec<Slot>) -> anyhow::Result<usize> {
        let filter = self.config.claim_filter().await?;
        let claimed = self
            .shared
            .queue
            .claim_filtered(
                &self.kind,
                taken.len(),
                &self.shared.config.worker_id,
                filter.as_ref(),
            )
            .await?;
        let got = claimed.len();
        for (job, slot) in claimed.into_iter().zip(taken) {
            let handler = self.config.handler.clone();
            let run = execute(self.shared.clone(), handler, job, self.acker.clone(), slot);
            self.tasks.spawn(run);
        }
        Ok(got)
    }
}
