//! Batches completions: every lease that finished while the previous statement ran is marked
//! done by the next one, still fenced by each lease's token. Under load this turns one commit
//! per job into one commit per batch; when idle a completion goes out at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use super::Shared;
use super::executor::Ack;
use crate::queue::Lease;

/// The most leases one statement acknowledges.
const MAX_BATCH: usize = 1000;

/// Runs until every sender is gone and the channel is drained.
pub(crate) async fn run(shared: Arc<Shared>, mut acks: UnboundedReceiver<Ack>) {
    let mut batch: Vec<Lease> = Vec::with_capacity(MAX_BATCH);
    let mut slots = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = acks.recv().await {
        let mut next = Some(first);
        while let Some(ack) = next.take() {
            batch.push(ack.lease);
            slots.push(ack.slot);
            if batch.len() < MAX_BATCH {
                next = acks.try_recv().ok();
            }
        }
        let mut wait = Duration::from_millis(50);
        loop {
            match shared.queue.complete_many(&batch).await {
                Ok(lost) => {
                    for lease in lost {
                        tracing::warn!(job = %lease.job_id, "lease lost before completion; result discarded");
                    }
                    break;
                }
                Err(err) => {
                    // Keep the batch: the leases may still hold when the database is back. If
                    // they expire first, the rescuer hands the jobs out again.
                    tracing::error!(error = %err, jobs = batch.len(), "could not record completions; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
        batch.clear();
        // The jobs are settled: their slots may take new work.
        slots.clear();
    }
}
