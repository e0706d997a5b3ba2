//! Search on PostgreSQL streaming replicas (`DOCKET_SEARCH_DATABASE_URL`), so that search load
//! stays off the primary, where writes, the queue and the workers live.
//!
//! **Which server answers.** A searcher with replicas asks one of them per search, in turn,
//! among those that are *usable*: the last probe reached it, found it in recovery (a promoted or
//! misconfigured server is never read: it may have diverged), and measured its lag within
//! `DOCKET_SEARCH_MAX_LAG_MS`. With none usable, or when the replica's answer fails (a
//! connection error, a timeout, a query cancelled by recovery), the primary answers instead and
//! the reason is counted (`docket_search_primary_fallbacks_total`). A replica that failed a
//! search is skipped until its next successful probe.
//!
//! **Lag, in time.** A background task probes every `DOCKET_SEARCH_PROBE_MS`: it reads the
//! primary's `pg_current_wal_lsn()` and keeps the samples of the last minute, then each
//! replica's `pg_last_wal_replay_lsn()`. A replica's lag is the age of the oldest primary sample
//! it has not replayed yet: "it still lacks what the primary had written that long ago". Unlike
//! `now() - pg_last_xact_replay_timestamp()`, this is zero on an idle primary, and unlike a byte
//! count it is in the unit people set a bound in. The byte gap is reported beside it.
//!
//! **A hit never names a document the primary has deleted.** Within the lag bound a replica may
//! still hold a document the primary deleted a moment ago. So after a replica answers, one
//! indexed query on the primary (`select id from documents where id = any($1)`) checks that
//! every document the hits name still exists; if one does not, the replica is behind on a
//! deletion and the primary answers the whole search (reason `stale`). Asking the primary
//! again, rather than dropping the hit, keeps the page full (k hits) and needs no merging; it
//! happens only for searches that race a deletion. The check means search needs the primary
//! even when a replica answers: replicas take the search load off it, not its availability.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use super::{SearchError, SearchRequest, SearchResults, Searcher};

/// The longest a replica may take to answer one search before the primary is asked instead.
pub const REPLICA_SEARCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a probe or a first connection to a replica may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long primary WAL positions are remembered: lag beyond this reads as this much (and more).
const HISTORY: Duration = Duration::from_secs(60);

/// Why the primary answered a search although replicas are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fallback {
    /// No replica was usable: unreachable, not in recovery, or not probed yet.
    Down,
    /// The replicas that answer are further behind than the bound.
    Lagging,
    /// The replica asked failed or timed out.
    Error,
    /// The replica named a document the primary has deleted.
    Stale,
}

impl Fallback {
    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::Down => "down",
            Fallback::Lagging => "lagging",
            Fallback::Error => "error",
            Fallback::Stale => "stale",
        }
    }
}

/// What the last probe learnt about one replica.
#[derive(Debug, Clone, Copy, Default)]
struct Health {
    probed_at: Option<Instant>,
    /// Reached and in recovery.
    reachable: bool,
    lag: Option<Duration>,
    lag_bytes: Option<i64>,
    /// A search failed on it since that probe.
    failed: bool,
}

/// One read replica.
#[derive(Debug)]
struct Replica {
    /// `host:port/database`: the `replica` label; never holds a password.
    name: String,
    pool: PgPool,
    health: Mutex<Health>,
    searches: AtomicU64,
}

/// One replica's state, for `/metrics` and tests: the shape `/metrics` reads.
pub use crate::metrics::ReplicaSample as ReplicaStatus;

/// The replicas of one process, their health, and the fallbacks to the primary.
#[derive(Debug)]
pub struct Replicas {
    primary: PgPool,
    replicas: Vec<Replica>,
    max_lag: Duration,
    probe_every: Duration,
    /// Round-robin position.
    next: AtomicUsize,
    /// (when, primary WAL position in bytes), oldest first.
    history: Mutex<VecDeque<(Instant, i64)>>,
    fallbacks: Mutex<BTreeMap<Fallback, u64>>,
}

impl Replicas {
    /// Replicas at `urls` (connected lazily, so a replica that is down does not stop start-up),
    /// each with a pool of `pool_size`; the primary is `primary`. Call [`Replicas::spawn_probe`]
    /// to start measuring them: until the first probe, the primary answers.
    pub fn new(
        primary: PgPool,
        urls: &[String],
        pool_size: u32,
        max_lag: Duration,
        probe_every: Duration,
    ) -> Result<Arc<Self>, sqlx::Error> {
        let options = urls
            .iter()
            .map(|url| url.parse())
            .collect::<Result<Vec<PgConnectOptions>, _>>()?;
        Ok(Self::with_options(
            primary,
            options,
            pool_size,
            max_lag,
            probe_every,
        ))
    }

    /// [`Replicas::new`] with parsed connection options.
    pub fn with_options(
        primary: PgPool,
        replica_options: Vec<PgConnectOptions>,
        pool_size: u32,
        max_lag: Duration,
        probe_every: Duration,
    ) -> Arc<Self> {
        let mut replicas = Vec::with_capacity(replica_options.len());
        for options in replica_options {
            let name = format!(
                "{}:{}/{}",
                options.get_host(),
                options.get_port(),
                options.get_database().unwrap_or("")
            );
            let pool = PgPoolOptions::new()
                .max_connections(pool_size.max(1))
                .acquire_timeout(PROBE_TIMEOUT)
                .connect_lazy_with(options);
            replicas.push(Replica {
                name,
                pool,
                health: Mutex::default(),
                searches: AtomicU64::new(0),
            });
        }
        Arc::new(Self {
            primary,
            replicas,
            max_lag,
            probe_every: probe_every.max(Duration::from_millis(10)),
            next: AtomicUsize::new(0),
            history: Mutex::default(),
            fallbacks: Mutex::default(),
        })
    }

    /// Probes every `DOCKET_SEARCH_PROBE_MS` until the replicas are dropped.
    pub fn spawn_probe(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Self> = Arc::downgrade(self);
        let every = self.probe_every;
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(replicas) = weak.upgrade() else {
                    return;
                };
                replicas.probe().await;
            }
        })
    }

    /// Measures every replica once (see the module docs).
    pub async fn probe(&self) {
        let primary = tokio::time::timeout(PROBE_TIMEOUT, wal_position(&self.primary)).await;
        let Ok(Ok(position)) = primary else {
            // Without the primary's position no lag can be known; the primary is down anyway.
            tracing::warn!("search replicas: the primary's WAL position cannot be read");
            return;
        };
        let now = Instant::now();
        let Some(history) = self.remember(now, position) else {
            return;
        };
        for replica in &self.replicas {
            let replayed =
                tokio::time::timeout(PROBE_TIMEOUT, replay_position(&replica.pool)).await;
            let health = match replayed {
                Ok(Ok(Some(replayed))) => Health {
                    probed_at: Some(now),
                    reachable: true,
                    lag: Some(lag(&history, replayed, Instant::now())),
                    lag_bytes: Some((position - replayed).max(0)),
                    failed: false,
                },
                Ok(Ok(None)) => {
                    tracing::warn!(replica = %replica.name, "search replica is not in recovery: not read");
                    Health {
                        probed_at: Some(now),
                        ..Health::default()
                    }
                }
                Ok(Err(err)) => {
                    tracing::debug!(replica = %replica.name, error = %err, "search replica probe failed");
                    Health {
                        probed_at: Some(now),
                        ..Health::default()
                    }
                }
                Err(_) => Health {
                    probed_at: Some(now),
                    ..Health::default()
                },
            };
            if let Ok(mut slot) = replica.health.lock() {
                *slot = health;
            }
        }
    }

    /// Adds the primary's `position` at `now` to the history, forgets what is older than
    /// [`HISTORY`], and returns a copy (the lock is never held across an await).
    fn remember(&self, now: Instant, position: i64) -> Option<VecDeque<(Instant, i64)>> {
        let mut history = self.history.lock().ok()?;
        history.push_back((now, position));
        while history.front().is_some_and(|(at, _)| now - *at > HISTORY) {
            history.pop_front();
        }
        Some(history.clone())
    }

    /// The replica the next search goes to, or why there is none.
    fn pick(&self) -> Result<&Replica, Fallback> {
        let count = self.replicas.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut reason = Fallback::Down;
        for offset in 0..count {
            let replica = &self.replicas[(start + offset) % count];
            match self.usable(replica) {
                Ok(()) => return Ok(replica),
                Err(why) => reason = reason.max(why),
            }
        }
        Err(reason)
    }

    fn usable(&self, replica: &Replica) -> Result<(), Fallback> {
        let health = replica.health.lock().map_or(Health::default(), |h| *h);
        let fresh = health
            .probed_at
            .is_some_and(|at| at.elapsed() <= self.probe_every * 3 + PROBE_TIMEOUT * 2);
        match health.lag {
            _ if !fresh || !health.reachable => Err(Fallback::Down),
            _ if health.failed => Err(Fallback::Error),
            Some(lag) if lag <= self.max_lag => Ok(()),
            _ => Err(Fallback::Lagging),
        }
    }

    fn fell_back(&self, reason: Fallback) {
        if let Ok(mut fallbacks) = self.fallbacks.lock() {
            *fallbacks.entry(reason).or_default() += 1;
        }
    }

    /// Searches the primary answered for `reason`.
    pub fn fallbacks(&self, reason: Fallback) -> u64 {
        self.fallbacks
            .lock()
            .map_or(0, |f| f.get(&reason).copied().unwrap_or(0))
    }

    /// Every reason with its count.
    pub fn all_fallbacks(&self) -> Vec<(Fallback, u64)> {
        self.fallbacks.lock().map_or_else(
            |_| Vec::new(),
            |f| f.iter().map(|(r, n)| (*r, *n)).collect(),
        )
    }

    /// Each replica's state.
    pub fn status(&self) -> Vec<ReplicaStatus> {
        self.replicas
            .iter()
            .map(|replica| {
                let health = replica.health.lock().map_or(Health::default(), |h| *h);
                ReplicaStatus {
                    name: replica.name.clone(),
                    usable: self.usable(replica).is_ok(),
                    lag_seconds: health.lag.map(|l| l.as_secs_f64()),
                    lag_bytes: health.lag_bytes,
                    searches: replica.searches.load(Ordering::Relaxed),
                }
            })
            .collect()
    }

    /// Runs `request` on a usable replica, else (or when that fails) on the primary.
    pub(super) async fn search(
        &self,
        searcher: &Searcher,
        request: &SearchRequest,
    ) -> Result<SearchResults, SearchError> {
        let replica = match self.pick() {
            Ok(replica) => replica,
            Err(reason) => {
                self.fell_back(reason);
                return searcher.search_here(request).await;
            }
        };
        let on_replica = searcher.reading_from(replica.pool.clone());
        let answer =
            tokio::time::timeout(REPLICA_SEARCH_TIMEOUT, on_replica.search_here(request)).await;
        let reason = match answer {
            Ok(Ok(results)) => {
                if self.all_exist(&results).await? {
                    replica.searches.fetch_add(1, Ordering::Relaxed);
                    return Ok(results);
                }
                Fallback::Stale
            }
            // The request's own faults, and the embedder's, are the same on any server.
            Ok(Err(err)) if !depends_on_the_server(&err) => return Err(err),
            Ok(Err(err)) => {
                if matches!(err, SearchError::Database(_)) {
                    tracing::warn!(replica = %replica.name, error = %err, "search replica failed; asking the primary");
                    replica.mark_failed();
                }
                Fallback::Error
            }
            Err(_) => {
                tracing::warn!(replica = %replica.name, "search replica timed out; asking the primary");
                replica.mark_failed();
                Fallback::Error
            }
        };
        self.fell_back(reason);
        searcher.search_here(request).await
    }

    /// Whether every document the results name still exists on the primary.
    async fn all_exist(&self, results: &SearchResults) -> Result<bool, sqlx::Error> {
        let named: HashSet<i64> = results
            .hits
            .iter()
            .chain(results.groups.iter().flatten().flat_map(|g| &g.hits))
            .map(|hit| hit.document_id)
            .collect();
        if named.is_empty() {
            return Ok(true);
        }
        let ids: Vec<i64> = named.iter().copied().collect();
        let existing = sqlx::query_scalar!(
            r#"select count(*) as "count!"
             from documents
             where id = any($1)"#,
            &ids[..],
        )
        .fetch_one(&self.primary)
        .await?;
        Ok(usize::try_from(existing).is_ok_and(|n| n == ids.len()))
    }
}

/// `/metrics` reads the replicas through this (metrics names no search type).
impl crate::metrics::ReplicaReport for Replicas {
    fn replica_samples(&self) -> Vec<ReplicaStatus> {
        self.status()
    }

    fn fallback_counts(&self) -> Vec<(&'static str, u64)> {
        self.all_fallbacks()
            .into_iter()
            .map(|(reason, n)| (reason.as_str(), n))
            .collect()
    }
}

impl Replica {
    fn mark_failed(&self) {
        if let Ok(mut health) = self.health.lock() {
            health.failed = true;
        }
    }
}

/// Whether the primary could answer `err` differently: a failure of the replica itself, or
/// state the replica may not have replayed yet (a version just registered or activated).
fn depends_on_the_server(err: &SearchError) -> bool {
    matches!(
        err,
        SearchError::Database(_)
            | SearchError::UnknownModel(_)
            | SearchError::NoActiveModel
            | SearchError::ModelNotEmbeddable { .. }
            | SearchError::NoVectors(_)
    )
}

/// The primary's WAL write position, in bytes.
async fn wal_position(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"select (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8 as "position!""#)
        .fetch_one(pool)
        .await
}

/// How far a standby has replayed, in bytes; `None` when the server is not in recovery.
async fn replay_position(pool: &PgPool) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar!(
        "select case when pg_is_in_recovery()
                     then (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::int8
                end as position",
    )
    .fetch_one(pool)
    .await
}

/// The age at `now` of the oldest primary position in `history` (oldest first) beyond
/// `replayed`: zero when the replica has replayed all of them.
fn lag(history: &VecDeque<(Instant, i64)>, replayed: i64, now: Instant) -> Duration {
    history
        .iter()
        .find(|(_, position)| *position > replayed)
        .map_or(Duration::ZERO, |(at, _)| now.saturating_duration_since(*at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_the_age_of_the_oldest_position_not_replayed() {
        let start = Instant::now();
        let history: VecDeque<(Instant, i64)> = [(0, 100), (1, 100), (2, 250), (3, 400)]
            .into_iter()
            .map(|(s, p)| (start + Duration::from_secs(s), p))
            .collect();
        let now = start + Duration::from_secs(4);
        assert_eq!(lag(&history, 400, now), Duration::ZERO);
        assert_eq!(lag(&history, 500, now), Duration::ZERO);
        assert_eq!(lag(&history, 250, now), Duration::from_secs(1));
        assert_eq!(lag(&history, 120, now), Duration::from_secs(2));
        assert_eq!(lag(&history, 99, now), Duration::from_secs(4));
        assert_eq!(lag(&VecDeque::new(), 0, now), Duration::ZERO);
    }

    #[test]
    fn the_worst_reason_is_reported_when_no_replica_is_usable() {
        assert!(Fallback::Lagging > Fallback::Down);
        assert!(Fallback::Error > Fallback::Lagging);
        assert_eq!(Fallback::Stale.as_str(), "stale");
    }
}
