//! Operational signals in the Prometheus text format (version 0.0.4), for `/metrics`.
//!
//! Two sources. **Counters** of events that happen in this process (job completions and
//! failures, leases reaped, embedding calls and their latency, 429s — every one the provider
//! sent, and the calls that ended rate limited —, schedule firings) live in
//! [`Metrics`], one per process ([`global`]), incremented where the event happens
//! (`counters.rs`). **Gauges** of state (jobs by status and kind, the oldest due job, dead jobs,
//! failed extractions, model switch progress) are read from the database by
//! [`collect_state`], at most once every [`GAUGE_TTL`] per process ([`GaugeCache`]), so every
//! process reports the same truth and nothing drifts, and scrapes cannot load the shared pool
//! (`gauges.rs`). [`render`] writes both as text (`encoding.rs`).
//!
//! **Metrics is a sink: it names none of the modules it reports on.** Modules either push their
//! events into the counters, or register a *reporter* that is read at scrape time: the rate
//! limiter's waiting time ([`WaitReport`], implemented in `embed`) and the read replicas'
//! health ([`ReplicaReport`], implemented in `search`). Reporters are held weakly, so a dropped
//! limiter or set of replicas stops reporting. The one module below it is `queue`, which owns
//! the `jobs` table and answers the job gauges ([`crate::queue::stats`]).
//!
//! The encoder is hand-written over mutex-guarded maps instead of the `prometheus` or `metrics`
//! crates: about a dozen families, none on a hot path (a few increments per job or per
//! provider call), and no extra dependency tree to compile on two cores. Counters are
//! per-process, as Prometheus expects; sum them across instances in queries.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

mod counters;
mod encoding;
mod gauges;

pub use counters::LATENCY_BUCKETS;
pub use encoding::render;
pub use gauges::{GAUGE_TTL, GaugeCache, StateSnapshot, collect_state};

use counters::{Histogram, SeriesKey};

/// A source of time spent waiting on a rate limit (`docket_rate_limiter_wait_seconds_total`).
pub trait WaitReport: Send + Sync {
    /// All the time waited so far.
    fn time_waited(&self) -> Duration;
}

/// A set of read replicas whose health and fallbacks are reported at scrape time.
pub trait ReplicaReport: Send + Sync {
    /// Each replica's state, in a fixed order.
    fn replica_samples(&self) -> Vec<ReplicaSample>;
    /// Searches the primary answered instead, by reason label.
    fn fallback_counts(&self) -> Vec<(&'static str, u64)>;
}

/// One replica's state as `/metrics` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaSample {
    /// The `replica` label (`host:port/database`, never a password).
    pub name: String,
    /// Whether the next search may go to it.
    pub usable: bool,
    pub lag_seconds: Option<f64>,
    pub lag_bytes: Option<i64>,
    /// Searches it answered.
    pub searches: u64,
}

/// Counters of this process, and the reporters read at scrape time.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<SeriesKey, u64>>,
    /// model → latency histogram of embedding calls.
    latency: Mutex<BTreeMap<String, Histogram>>,
    /// The rate limiters whose waiting time is reported.
    limiters: Mutex<Vec<Weak<dyn WaitReport>>>,
    /// The search replicas whose lag and fallbacks are reported.
    replicas: Mutex<Vec<Weak<dyn ReplicaReport>>>,
}

static GLOBAL: LazyLock<Metrics> = LazyLock::new(Metrics::default);

/// This process's counters.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

/// Adds `source` to `watched` unless it is there already, dropping the sources that are gone.
fn watch<T: ?Sized>(watched: &Mutex<Vec<Weak<T>>>, source: Weak<T>) {
    if let Ok(mut watched) = watched.lock() {
        watched.retain(|w| w.strong_count() > 0);
        if !watched
            .iter()
            .any(|w| std::ptr::addr_eq(w.as_ptr(), source.as_ptr()))
        {
            watched.push(source);
        }
    }
}

/// The sources in `watched` that still exist.
fn alive<T: ?Sized>(watched: &Mutex<Vec<Weak<T>>>) -> Vec<Arc<T>> {
    watched.lock().map_or_else(
        |_| Vec::new(),
        |watched| watched.iter().filter_map(Weak::upgrade).collect(),
    )
}

impl Metrics {
    /// Reports `limiter`'s waiting time (held weakly: a dropped limiter stops reporting).
    pub fn watch_limiter<L: WaitReport + 'static>(&self, limiter: &Arc<L>) {
        let weak = Arc::downgrade(limiter);
        watch::<dyn WaitReport>(&self.limiters, weak);
    }

    /// Reports `replicas`' lag, searches and fallbacks (held weakly, like limiters).
    pub fn watch_replicas<R: ReplicaReport + 'static>(&self, replicas: &Arc<R>) {
        let weak = Arc::downgrade(replicas);
        watch::<dyn ReplicaReport>(&self.replicas, weak);
    }

    fn watched_replicas(&self) -> Vec<Arc<dyn ReplicaReport>> {
        alive(&self.replicas)
    }

    fn limiter_wait_seconds(&self) -> f64 {
        alive(&self.limiters)
            .iter()
            .map(|l| l.time_waited().as_secs_f64())
            .sum()
    }
}
