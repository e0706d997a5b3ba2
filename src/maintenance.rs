//! The maintenance loops every `serve` and `worker` process runs: the rescuer (expired leases
//! back to `ready`), retention (old `done` jobs deleted), the keyword indexer (chunks written
//! without postings, or by an older text analysis, indexed; see `search::index`) and the
//! embedding cache's bound (least recently used entries beyond it evicted; see `embed::cache`).
//! Running them in many processes at once is safe: all lock rows with `skip locked` and work in
//! short batches.

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
    pub index_every: Duration,
    pub index_batch: usize,
    pub cache_every: Duration,
    /// Most entries the embedding cache keeps (`DOCKET_EMBEDDING_CACHE_ENTRIES`).
    pub cache_entries: u64,
    pub cache_batch: u64,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        Self {
            rescue_every: Duration::from_secs(5),
            rescue_batch: 100,
            prune_every: Duration::from_secs(60),
            prune_batch: 1000,
            retention: Duration::from_secs(7 * 24 * 3600),
            index_every: Duration::from_secs(10),
            index_batch: 200,
            cache_every: Duration::from_secs(60),
            cache_entries: crate::embed::cache::DEFAULT_MAX_ENTRIES,
            cache_batch: 5000,
        }
    }
}

/// Runs the loops until `stop`.
pub async fn run(queue: Queue, config: MaintenanceConfig, stop: CancellationToken) {
    let mut rescue = tokio::time::interval(config.rescue_every);
    let mut prune = tokio::time::interval(config.prune_every);
    let mut index = tokio::time::interval(config.index_every);
    let mut cache = tokio::time::interval(config.cache_every);
    for tick in [&mut rescue, &mut prune, &mut index, &mut cache] {
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    }
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = rescue.tick() => rescue_all(&queue, config.rescue_batch).await,
            _ = prune.tick() => prune_all(&queue, config.retention, config.prune_batch).await,
            _ = index.tick() => index_all(&queue, config.index_batch).await,
            _ = cache.tick() => bound_cache(&queue, config.cache_entries, config.cache_batch).await,
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

/// Indexes every chunk still without current keyword postings, one short batch at a time.
pub async fn index_all(queue: &Queue, batch: usize) {
    let mut total = 0;
    loop {
        match crate::search::index::index_pending(queue.pool(), batch as i64).await {
            Ok(n) => {
                total += n;
                if n < batch {
                    break;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "keyword indexing failed; will try again");
                break;
            }
        }
    }
    if total > 0 {
        tracing::info!(chunks = total, "indexed chunks for keyword search");
    }
}

/// Evicts the embedding cache's least recently used entries beyond `entries`.
pub async fn bound_cache(queue: &Queue, entries: u64, batch: u64) {
    match crate::embed::cache::evict(queue.pool(), entries, batch).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(evicted = n, "embedding cache bounded"),
        Err(err) => tracing::warn!("bounding the embedding cache: {err}"),
    }
}
