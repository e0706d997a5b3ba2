//! The maintenance loops every `serve` and `worker` process runs: the rescuer (expired leases
//! back to `ready`) and retention (old `done` jobs deleted). Running them in many processes at
//! once is safe: both lock rows with `skip locked` and work in short batches.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::queue::Queue;

/// How often and how much the maintenance loops do.
#[derive(Debug, Clone)]
pub struct MaintenanceConfig {
    pub rescue_every: Duration,
    pub rescue_batch: usize,
    pub prune_every: Duration,
    pub prune_batch: usize,
    /// `done` jobs older than this are deleted.
    pub retention: Duration,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            rescue_every: Duration::from_secs(5),
            rescue_batch: 100,
            prune_every: Duration::from_secs(60),
            prune_batch: 1000,
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Runs both loops until `stop`.
pub async fn run(queue: Queue, config: MaintenanceConfig, stop: CancellationToken) {
    let mut rescue = tokio::time::interval(config.rescue_every);
    let mut prune = tokio::time::interval(config.prune_every);
    for tick in [&mut rescue, &mut prune] {
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = rescue.tick() => rescue_all(&queue, config.rescue_batch).await,
            _ = prune.tick() => prune_all(&queue, config.retention, config.prune_batch).await,
        }
    }
}

/// Rescues every expired lease, one short batch at a time.
pub async fn rescue_all(queue: &Queue, batch: usize) {
    loop {
        match queue.rescue_expired(batch).await {
            Ok(rescued) => {
                crate::metrics::global().leases_reaped(rescued.requeued, rescued.dead);
                let n = rescued.requeued + rescued.dead;
                if n > 0 {
                    tracing::warn!(
                        requeued = rescued.requeued,
                        dead = rescued.dead,
                        "rescued jobs whose lease expired"
                    );
                }
                if n < batch as u64 {
                    return;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "rescue failed; will try again");
                return;
            }
        }
    }
}

async fn prune_all(queue: &Queue, retention: Duration, batch: usize) {
    let mut total = 0;
    loop {
        match queue.prune_done(retention, batch).await {
            Ok(n) => {
                total += n;
                if n < batch as u64 {
                    break;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "pruning failed; will try again");
                break;
            }
        }
    }
    if total > 0 {
        tracing::info!(deleted = total, "pruned finished jobs past retention");
    }
}
