//! Runs one claimed job to its outcome and records that outcome under the job's lease.
//!
//! The handler runs in its own task, so a panic is caught (as a retryable failure) and a lost
//! lease can abort it. Whatever the handler returns is written only while the lease holds.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::job::{Job, JobError, Outcome};
use super::registry::HandlerFn;
use crate::queue::{ClaimedJob, JobStatus, Lease, QueueError};

/// A finished job waiting for its completion to be written, with the slot it occupies: the
/// slot frees only once the job is settled in the database, so a kind never has more jobs
/// `running` than its concurrency.
pub(crate) struct Ack {
    pub lease: Lease,
    pub slot: Option<OwnedSemaphorePermit>,
}

/// Where successful completions go: one statement per job, or the batching completer.
#[derive(Clone)]
pub(crate) enum Acker {
    Direct,
    Batched(tokio::sync::mpsc::UnboundedSender<Ack>),
}

/// Runs `claimed` with `handler` and records the outcome; `slot` is released once the outcome
/// is written.
pub(crate) async fn execute(
    shared: Arc<Shared>,
    handler: Arc<HandlerFn>,
    claimed: ClaimedJob,
    acker: Acker,
    slot: Option<OwnedSemaphorePermit>,
) {
    let lease = claimed.lease;
    let job = Job {
        id: lease.job_id,
        kind: claimed.kind,
        payload: claimed.payload,
        attempt: claimed.attempt,
        max_attempts: claimed.max_attempts,
        lease,
    };
    let kind = job.kind.clone();
    let attempt = job.attempt;
    let lost = CancellationToken::new();
    shared.inflight.hold(lease, lost.clone());

    let mut task = tokio::spawn(handler(job));
    let result = tokio::select! {
        joined = &mut task => Some(joined),
        () = lost.cancelled() => {
            task.abort();
            None
        }
    };
    shared.inflight.drop_lease(&lease);

    let outcome = match result {
        None => {
            tracing::warn!(job = %lease.job_id, %kind, "lease lost while running; handler stopped, result discarded");
            return;
        }
        Some(Ok(outcome)) => outcome,
        Some(Err(join_error)) => Err(JobError::Retry {
            error: anyhow::anyhow!("the handler panicked: {}", panic_message(join_error)),
            after: None,
        }),
    };

    let metrics = crate::metrics::global();
    let recorded = match outcome {
        Ok(Outcome::Complete) => match &acker {
            // The completer outlives every executor; should it be gone, complete directly.
            Acker::Batched(completer) => match completer.send(Ack { lease, slot }) {
                Ok(()) => {
                    metrics.job_completed(&kind);
                    return;
                }
                Err(_) => shared.queue.complete(&lease).await,
            },
            Acker::Direct => shared.queue.complete(&lease).await,
        }
        .inspect(|()| metrics.job_completed(&kind)),
        Ok(Outcome::CompletedInTransaction) => {
            metrics.job_completed(&kind);
            Ok(())
        }
        Err(JobError::Retry { error, after }) => {
            let backoff = shared.config.retry_policy.delay(attempt);
            let delay = after.map_or(backoff, |after| after.max(backoff));
            let message = format!("{error:#}");
            shared
                .queue
                .retry(&lease, &message, delay, true)
                .await
                .inspect(|status| {
                    metrics.job_failed(
                        &kind,
                        if *status == JobStatus::Dead {
                            "dead"
                        } else {
                            "retry"
                        },
                    )
                })
                .map(|status| log_retry(&lease, &kind, status, delay, &message))
        }
        Err(JobError::RateLimited { reason, after }) => {
            tracing::info!(job = %lease.job_id, %kind, wait_ms = after.as_millis() as u64, "rate limited; rescheduled without spending an attempt");
            metrics.job_failed(&kind, "rate_limited");
            shared
                .queue
                .retry(&lease, &format!("rate limited: {reason}"), after, false)
                .await
                .map(|_| ())
        }
        Err(JobError::Fatal(error)) => {
            let message = format!("{error:#}");
            tracing::warn!(job = %lease.job_id, %kind, error = %message, "permanent failure; job is dead");
            metrics.job_failed(&kind, "dead");
            shared.queue.fail(&lease, &message).await
        }
    };
    match recorded {
        Ok(()) => {}
        Err(QueueError::LeaseLost(id)) => {
            tracing::warn!(job = %id, %kind, "lease lost before the outcome was written; outcome discarded");
        }
        Err(err) => {
            // The lease will expire and the rescuer hands the job out again: at-least-once.
            tracing::error!(job = %lease.job_id, %kind, error = %err, "could not record the outcome");
        }
    }
}

fn log_retry(lease: &Lease, kind: &str, status: JobStatus, delay: Duration, message: &str) {
    if status == JobStatus::Dead {
        tracing::warn!(job = %lease.job_id, %kind, error = %message, "failed on its last attempt; job is dead");
    } else {
        tracing::info!(job = %lease.job_id, %kind, error = %message, retry_in_ms = delay.as_millis() as u64, "failed; will retry");
    }
}

fn panic_message(err: tokio::task::JoinError) -> String {
    match err.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-text panic".to_owned()),
        Err(err) => err.to_string(),
    }
}
