//! Batches completions: every lease that finished while earlier statements ran is marked done
//! by the next one, still fenced by each lease's token. Under load this turns one commit per job
//! into one commit per batch; when idle a completion goes out at once.
//!
//! A few statements may be in flight at once, so that one commit's wait for the WAL flush does
//! not hold back the acknowledgements behind it (PostgreSQL's group commit then flushes them
//! together). Each job's slot is freed only after its own statement committed.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinSet;

use super::Shared;
use super::executor::Ack;
use crate::queue::Lease;

/// The most leases one statement acknowledges.
const MAX_BATCH: usize = 1000;

/// The most acknowledging statements in flight at once.
const MAX_IN_FLIGHT: usize = 4;

/// Runs until every sender is gone, the channel is drained and every statement has finished.
pub(crate) async fn run(shared: Arc<Shared>, mut acks: UnboundedReceiver<Ack>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut flushes = JoinSet::new();
    while let Some(first) = acks.recv().await {
        // Wait for a free statement first: acknowledgements keep piling up meanwhile, so the
        // batch taken below is as large as the load makes it.
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        // Let the executors that are ready to run finish first: the jobs of one claim end
        // together, and the first one's acknowledgement wakes this task before the others
        // have sent theirs. One turn of the scheduler makes their batch one statement.
        tokio::task::yield_now().await;
        let mut acked = vec![first];
        while acked.len() < MAX_BATCH {
            match acks.try_recv() {
                Ok(ack) => acked.push(ack),
                Err(_) => break,
            }
        }
        let shared = shared.clone();
        flushes.spawn(async move {
            flush(&shared, acked).await;
            drop(permit);
        });
        // Reap finished flushes so the set does not grow.
        while flushes.try_join_next().is_some() {}
    }
    while flushes.join_next().await.is_some() {}
}

/// Writes one batch of completions, retrying while the database is away; then frees the slots.
async fn flush(shared: &Shared, acked: Vec<Ack>) {
    let (leases, slots): (Vec<Lease>, Vec<_>) =
        acked.into_iter().map(|ack| (ack.lease, ack.slot)).unzip();
    let mut wait = Duration::from_millis(50);
    loop {
        match shared.queue.complete_many(&leases).await {
            Ok(lost) => {
                for lease in lost {
                    tracing::warn!(job = %lease.job_id, "lease lost before completion; result discarded");
                }
                break;
            }
            Err(err) => {
                // Keep the batch: the leases may still hold when the database is back. If they
                // expire first, the rescuer hands the jobs out again.
                tracing::error!(error = %err, jobs = leases.len(), "could not record completions; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
    // The jobs are settled: their slots may take new work.
    drop(slots);
}
