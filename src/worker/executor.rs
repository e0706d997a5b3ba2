//! Runs one claimed job to its outcome and records that outcome under the job's lease.
//!
//! The handler runs inside the executor's task, unwinding caught: a panic becomes a retryable
//! failure, and a lost lease stops it by dropping its future, so nothing of it runs once its
//! job is given up on (one task per job, not two). Whatever the handler returns is written only
//! while the lease holds. At shutdown, a handler still running after the grace period is
//! stopped and its job handed back by this executor, which alone knows whether the handler
//! finished.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::job::{Job, JobError, Outcome};
use super::registry::HandlerFn;
use super::slot::Slot;
use crate::queue::{ClaimedJob, JobStatus, Lease, QueueError};

/// How long a job this process cannot run waits before it is due again: long enough that this
/// process (whose claim filter may be a moment old) does not take it straight back.
const HAND_BACK_DELAY: Duration = Duration::from_secs(5);

/// A finished job waiting for its completion to be written, with the slot it occupies: the
/// slot is freed (dropped) only once the job is settled in the database, so a kind never has
/// more jobs `running` than its concurrency.
pub(crate) struct Ack {
    pub lease: Lease,
    pub slot: Slot,
}

/// Where successful completions go: one statement per job, or the batching completer.
#[derive(Clone)]
pub(crate) enum Acker {
    Direct,
    Batched(tokio::sync::mpsc::UnboundedSender<Ack>),
}

/// Runs `claimed` with `handler` and records the outcome; `slot` is freed once the outcome is
/// written (by the completer, for a completion it takes).
pub(crate) async fn execute(
    shared: Arc<Shared>,
    handler: Arc<HandlerFn>,
    claimed: ClaimedJob,
    acker: Acker,
    slot: Slot,
) {
    let lease = claimed.lease;
    let job = job_of(claimed);
    let kind = job.kind.clone();
    let attempt = job.attempt;

    let outcome = match run_handler(&shared, handler, job).await {
        Ended::LeaseLost => {
            tracing::warn!(job = %lease.job_id, %kind, "lease lost while running; handler stopped, result discarded");
            return;
        }
        Ended::HandedBack => {
            hand_back(&shared, &lease, &kind).await;
            return;
        }
        Ended::Finished(Ok(outcome)) => outcome,
        Ended::Finished(Err(panic)) => Err(JobError::Retry {
            error: anyhow::anyhow!("the handler panicked: {}", panic_message(&*panic)),
            after: None,
        }),
    };

    let recorded = match outcome {
        Ok(Outcome::Complete) => {
            return acknowledge(&shared, &acker, Ack { lease, slot }, &kind).await;
        }
        Ok(Outcome::CompletedInTransaction) => {
            crate::metrics::global().job_completed(&kind);
            Ok(())
        }
        Err(error) => record_failure(&shared, &lease, &kind, attempt, error).await,
    };
    report(recorded, &lease, &kind);
    // The outcome is written: the slot may take new work.
    drop(slot);
}

/// The handler's view of a claimed job.
fn job_of(claimed: ClaimedJob) -> Job {
    Job {
        id: claimed.lease.job_id,
        kind: claimed.kind,
        payload: claimed.payload,
        attempt: claimed.attempt,
        max_attempts: claimed.max_attempts,
        lease: claimed.lease,
    }
}

/// Runs the handler on `job` under its lease until it finishes, the lease is lost, or shutdown
/// hands jobs back.
async fn run_handler(shared: &Shared, handler: Arc<HandlerFn>, job: Job) -> Ended {
    let lease = job.lease;
    let lost = CancellationToken::new();
    shared.inflight.hold(lease, lost.clone());

    // Calling the handler is inside the guard too: a handler may panic before its first await.
    let run = AssertUnwindSafe(async move { handler(job).await }).catch_unwind();
    let ended = tokio::select! {
        // Biased, handler first: a handler that has finished always gets its outcome written,
        // even when its lease is stopped or shutdown hands jobs back at the same moment.
        // Leaving the select drops the handler's future when it did not finish.
        biased;
        finished = run => Ended::Finished(finished),
        () = lost.cancelled() => Ended::LeaseLost,
        () = shared.hand_back.cancelled() => Ended::HandedBack,
    };
    shared.inflight.drop_lease(&lease);
    ended
}

/// Writes a successful completion: hands `ack` to the batching completer when there is one
/// (which writes it and then frees its slot), else writes it here and frees the slot after.
async fn acknowledge(shared: &Shared, acker: &Acker, ack: Ack, kind: &str) {
    let ack = match acker {
        Acker::Batched(completer) => match completer.send(ack) {
            Ok(()) => {
                crate::metrics::global().job_completed(kind);
                return;
            }
            // The completer outlives every executor; should it be gone, complete here.
            Err(unsent) => unsent.0,
        },
        Acker::Direct => ack,
    };
    let recorded = shared.queue.complete(&ack.lease).await;
    if recorded.is_ok() {
        crate::metrics::global().job_completed(kind);
    }
    report(recorded, &ack.lease, kind);
    // The outcome is written: the slot may take new work.
    drop(ack);
}

/// Records a failed attempt as its error asks: a retry with the kind's backoff, a wait that
/// spends no attempt, a hand-back to another process, or `dead` (then the queue's end hook
/// settles what the job worked on, in the same transaction).
async fn record_failure(
    shared: &Shared,
    lease: &Lease,
    kind: &str,
    attempt: i32,
    error: JobError,
) -> Result<(), QueueError> {
    let metrics = crate::metrics::global();
    match error {
        JobError::Retry { error, after } => {
            let backoff = shared.kinds.retry_policy(kind).delay(attempt);
            let delay = after.map_or(backoff, |after| after.max(backoff));
            let message = format!("{error:#}");
            shared
                .queue
                .retry(lease, &message, delay, true)
                .await
                .inspect(|status| {
                    metrics.job_failed(
                        kind,
                        if *status == JobStatus::Dead {
                            "dead"
                        } else {
                            "retry"
                        },
                    )
                })
                .map(|status| log_retry(lease, kind, status, delay, &message))
        }
        JobError::RateLimited { reason, after } => {
            tracing::info!(job = %lease.job_id, %kind, wait_ms = after.as_millis() as u64, "rate limited; rescheduled without spending an attempt");
            metrics.job_failed(kind, "rate_limited");
            shared
                .queue
                .retry(lease, &format!("rate limited: {reason}"), after, false)
                .await
                .map(|_| ())
        }
        JobError::Elsewhere { reason } => {
            tracing::info!(job = %lease.job_id, %kind, %reason, "not runnable in this process; handed back for another");
            metrics.job_failed(kind, "elsewhere");
            shared
                .queue
                .retry(lease, &reason, HAND_BACK_DELAY, false)
                .await
                .map(|_| ())
        }
        JobError::Fatal(error) => {
            let message = format!("{error:#}");
            tracing::warn!(job = %lease.job_id, %kind, error = %message, "permanent failure; job is dead");
            metrics.job_failed(kind, "dead");
            shared.queue.fail(lease, &message).await
        }
    }
}

/// Logs what became of writing the outcome.
fn report(recorded: Result<(), QueueError>, lease: &Lease, kind: &str) {
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

/// How an executor stopped waiting for its handler.
enum Ended {
    /// The handler returned, or panicked (the panic's payload).
    Finished(Result<Result<Outcome, JobError>, Box<dyn Any + Send>>),
    /// The heartbeat found the lease gone (rescued or cancelled).
    LeaseLost,
    /// Shutdown's grace period ran out while the handler still ran.
    HandedBack,
}

/// The most a hand-back at shutdown waits for the database; past it the lease expires and the
/// rescuer hands the job out again.
const HAND_BACK_TIMEOUT: Duration = Duration::from_secs(5);

/// Gives a job whose handler was stopped at shutdown back to `ready`, refunding its attempt.
/// Only this executor knows its handler did not finish, so only it hands the job back: a job
/// that finished is acknowledged instead, never handed back.
async fn hand_back(shared: &Shared, lease: &Lease, kind: &str) {
    match tokio::time::timeout(
        HAND_BACK_TIMEOUT,
        shared.queue.release(std::slice::from_ref(lease)),
    )
    .await
    {
        Ok(Ok(lost)) if lost.is_empty() => {
            tracing::info!(job = %lease.job_id, %kind, "unfinished at shutdown; handed back")
        }
        Ok(Ok(_)) => {
            tracing::warn!(job = %lease.job_id, %kind, "unfinished at shutdown; its lease was already lost")
        }
        Ok(Err(err)) => {
            tracing::error!(job = %lease.job_id, %kind, error = %err, "could not hand the job back; the rescuer will")
        }
        Err(_) => {
            tracing::error!(job = %lease.job_id, %kind, "handing the job back timed out; the rescuer will")
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

fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".to_owned())
}
