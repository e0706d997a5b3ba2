//! Operational signals in the Prometheus text format (version 0.0.4), for `/metrics`.
//!
//! Two sources. **Counters** of events that happen in this process (job completions and
//! failures, leases reaped, embedding calls and their latency, 429s — every one the provider
//! sent, and the calls that ended rate limited —, schedule firings) live in
//! [`Metrics`], one per process ([`global`]), incremented where the event happens. **Gauges** of
//! state (jobs by status and kind, the oldest due job, dead jobs, failed extractions, model
//! switch progress) are read from the database by [`collect_state`], at most once every
//! [`GAUGE_TTL`] per process ([`GaugeCache`]), so every process reports the same truth and
//! nothing drifts, and scrapes cannot load the shared pool.
//!
//! The encoder is hand-written over mutex-guarded maps instead of the `prometheus` or `metrics`
//! crates: about a dozen families, none on a hot path (a few increments per job or per
//! provider call), and no extra dependency tree to compile on two cores. Counters are
//! per-process, as Prometheus expects; sum them across instances in queries.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use crate::embed::Limiter;
use crate::search::Replicas;

/// Upper bounds of the embedding latency histogram, in seconds.
pub const LATENCY_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    /// Cumulative counts per bucket of [`LATENCY_BUCKETS`].
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// A counter's identity: its family and its label pairs (in a fixed order per family).
type SeriesKey = (&'static str, Vec<(&'static str, String)>);

/// Counters of this process.
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<SeriesKey, u64>>,
    /// model → latency histogram of embedding calls.
    latency: Mutex<BTreeMap<String, Histogram>>,
    /// The rate limiters whose waiting time is reported.
    limiters: Mutex<Vec<Weak<Limiter>>>,
    /// The search replicas whose lag and fallbacks are reported.
    replicas: Mutex<Vec<Weak<Replicas>>>,
}

static GLOBAL: LazyLock<Metrics> = LazyLock::new(Metrics::default);

/// This process's counters.
pub fn global() -> &'static Metrics {
    &GLOBAL
}

impl Metrics {
    fn add(&self, family: &'static str, labels: Vec<(&'static str, String)>, n: u64) {
        if n == 0 {
            return;
        }
        if let Ok(mut counters) = self.counters.lock() {
            *counters.entry((family, labels)).or_default() += n;
        }
    }

    /// The value of one counter (for tests and the page).
    pub fn counter(&self, family: &str, labels: &[(&str, &str)]) -> u64 {
        let Ok(counters) = self.counters.lock() else {
            return 0;
        };
        counters
            .iter()
            .filter(|((f, l), _)| {
                *f == family
                    && l.len() == labels.len()
                    && l.iter()
                        .zip(labels)
                        .all(|((k, v), (k2, v2))| k == k2 && v == v2)
            })
            .map(|(_, v)| *v)
            .sum()
    }

    /// A job of `kind` completed.
    pub fn job_completed(&self, kind: &str) {
        self.add(
            "docket_job_completions_total",
            vec![("kind", kind.to_owned())],
            1,
        );
    }

    /// A job of `kind` failed; `outcome` is `retry`, `dead`, `rate_limited` or `elsewhere` (handed back for another process).
    pub fn job_failed(&self, kind: &str, outcome: &'static str) {
        self.add(
            "docket_job_failures_total",
            vec![("kind", kind.to_owned()), ("outcome", outcome.to_owned())],
            1,
        );
    }

    /// The rescuer put expired leases back: `requeued` to ready, `dead` past their attempts.
    pub fn leases_reaped(&self, requeued: u64, dead: u64) {
        self.add(
            "docket_leases_reaped_total",
            vec![("to", "ready".into())],
            requeued,
        );
        self.add(
            "docket_leases_reaped_total",
            vec![("to", "dead".into())],
            dead,
        );
    }

    /// One embedding call to `model` ended with `outcome` (`ok` or an error code) after
    /// `elapsed`.
    pub fn embedding_call(&self, model: &str, outcome: &str, elapsed: Duration) {
        self.add(
            "docket_embedding_calls_total",
            vec![("model", model.to_owned()), ("outcome", outcome.to_owned())],
            1,
        );
        if outcome == "rate_limited" {
            self.add(
                "docket_embedding_rate_limited_total",
                vec![("model", model.to_owned())],
                1,
            );
        }
        let seconds = elapsed.as_secs_f64();
        if let Ok(mut latency) = self.latency.lock() {
            let histogram = latency.entry(model.to_owned()).or_default();
            for (bucket, bound) in histogram.buckets.iter_mut().zip(LATENCY_BUCKETS) {
                if seconds <= bound {
                    *bucket += 1;
                }
            }
            histogram.count += 1;
            histogram.sum += seconds;
        }
    }

    /// The embedding provider answered 429 to a request for `model` (`openai:<model>:<dims>`),
    /// whether the call then waited and retried or gave up.
    pub fn provider_rate_limited(&self, model: &str) {
        self.add(
            "docket_embedding_429_responses_total",
            vec![("model", model.to_owned())],
            1,
        );
    }

    /// Texts whose vector was copied from an identical chunk instead of sent to the provider.
    pub fn embeddings_reused(&self, model: &str, n: u64) {
        self.add(
            "docket_embeddings_reused_total",
            vec![("model", model.to_owned())],
            n,
        );
    }

    /// A schedule enqueued `n` firings.
    pub fn schedule_fired(&self, schedule: &str, n: u64) {
        self.add(
            "docket_schedule_firings_total",
            vec![("schedule", schedule.to_owned())],
            n,
        );
    }

    /// Of those, `n` were missed firings caught up after downtime.
    pub fn schedule_backfilled(&self, schedule: &str, n: u64) {
        self.add(
            "docket_schedule_backfills_total",
            vec![("schedule", schedule.to_owned())],
            n,
        );
    }

    /// `n` missed firings were older than the backfill window and skipped.
    pub fn schedule_skipped(&self, schedule: &str, n: u64) {
        self.add(
            "docket_schedule_skipped_total",
            vec![("schedule", schedule.to_owned())],
            n,
        );
    }

    /// This process booked a slice of the fleet's rate budget, in one statement of `elapsed`.
    pub fn rate_budget_granted(&self, elapsed: Duration) {
        self.add("docket_rate_budget_grants_total", vec![], 1);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.add(
            "docket_rate_budget_grant_microseconds_total",
            vec![],
            micros,
        );
    }

    /// Reports `limiter`'s waiting time (held weakly: a dropped limiter stops reporting).
    pub fn watch_limiter(&self, limiter: &Arc<Limiter>) {
        if let Ok(mut limiters) = self.limiters.lock() {
            limiters.retain(|l| l.strong_count() > 0);
            if !limiters.iter().any(|l| l.as_ptr() == Arc::as_ptr(limiter)) {
                limiters.push(Arc::downgrade(limiter));
            }
        }
    }

    /// Reports `replicas`' lag, searches and fallbacks (held weakly, like limiters).
    pub fn watch_replicas(&self, replicas: &Arc<Replicas>) {
        if let Ok(mut watched) = self.replicas.lock() {
            watched.retain(|r| r.strong_count() > 0);
            if !watched.iter().any(|r| r.as_ptr() == Arc::as_ptr(replicas)) {
                watched.push(Arc::downgrade(replicas));
            }
        }
    }

    fn watched_replicas(&self) -> Vec<Arc<Replicas>> {
        self.replicas.lock().map_or_else(
            |_| Vec::new(),
            |watched| watched.iter().filter_map(Weak::upgrade).collect(),
        )
    }

    fn limiter_wait_seconds(&self) -> f64 {
        self.limiters.lock().map_or(0.0, |limiters| {
            limiters
                .iter()
                .filter_map(Weak::upgrade)
                .map(|l| l.time_waited().as_secs_f64())
                .sum()
        })
    }
}

/// Help text and type of each family this module writes.
const FAMILIES: &[(&str, &str, &str)] = &[
    ("docket_jobs", "gauge", "Jobs by status and kind."),
    (
        "docket_oldest_due_job_age_seconds",
        "gauge",
        "Age of the oldest ready job that is due (future run_at not counted).",
    ),
    (
        "docket_dead_jobs",
        "gauge",
        "Dead jobs waiting for a person.",
    ),
    (
        "docket_extraction_failures",
        "gauge",
        "Documents that failed before they had chunks, by reason.",
    ),
    (
        "docket_model_documents_complete",
        "gauge",
        "Documents whose embedding set is complete, by model version.",
    ),
    ("docket_documents", "gauge", "Documents in the database."),
    (
        "docket_job_completions_total",
        "counter",
        "Jobs completed by this process, by kind.",
    ),
    (
        "docket_job_failures_total",
        "counter",
        "Job failures in this process, by kind and outcome.",
    ),
    (
        "docket_leases_reaped_total",
        "counter",
        "Expired leases rescued by this process.",
    ),
    (
        "docket_embedding_calls_total",
        "counter",
        "Embedding provider calls by model and outcome.",
    ),
    (
        "docket_embedding_rate_limited_total",
        "counter",
        "Embedding calls that ended rate limited (429) after in-call retries.",
    ),
    (
        "docket_embedding_429_responses_total",
        "counter",
        "HTTP 429 answers from the embedding provider, retried ones included, by provider model (openai:<model>:<dims>).",
    ),
    (
        "docket_embedding_call_seconds",
        "histogram",
        "Latency of embedding provider calls.",
    ),
    (
        "docket_embeddings_reused_total",
        "counter",
        "Vectors copied from identical text instead of sent to the provider.",
    ),
    (
        "docket_rate_limiter_wait_seconds_total",
        "counter",
        "Time spent waiting on the embedding rate limiter.",
    ),
    (
        "docket_rate_budget_grants_total",
        "counter",
        "Slices of the fleet-wide embedding rate budget (rate_budgets in PostgreSQL) this process booked.",
    ),
    (
        "docket_rate_budget_grant_microseconds_total",
        "counter",
        "Time spent in the statements that booked those slices.",
    ),
    (
        "docket_search_replica_up",
        "gauge",
        "1 when the next search may go to this read replica (reached, in recovery, within DOCKET_SEARCH_MAX_LAG_MS).",
    ),
    (
        "docket_search_replica_lag_seconds",
        "gauge",
        "Age of the oldest primary WAL position the replica has not replayed (0 when caught up).",
    ),
    (
        "docket_search_replica_lag_bytes",
        "gauge",
        "WAL bytes between the primary's position and the replica's replay position.",
    ),
    (
        "docket_search_replica_searches_total",
        "counter",
        "Searches a read replica answered.",
    ),
    (
        "docket_search_primary_fallbacks_total",
        "counter",
        "Searches the primary answered although replicas are configured, by reason (down, lagging, error, stale).",
    ),
    (
        "docket_schedule_firings_total",
        "counter",
        "Schedule firings enqueued by this process.",
    ),
    (
        "docket_schedule_backfills_total",
        "counter",
        "Missed schedule firings caught up after downtime.",
    ),
    (
        "docket_schedule_skipped_total",
        "counter",
        "Missed schedule firings older than the backfill window.",
    ),
];

/// The database's side of the picture, read at scrape time.
#[derive(Debug, Clone, Default)]
pub struct StateSnapshot {
    /// (status, kind, count).
    pub jobs: Vec<(String, String, i64)>,
    pub oldest_due_age_seconds: f64,
    pub dead_jobs: i64,
    /// (reason code, count).
    pub extraction_failures: Vec<(String, i64)>,
    /// (model version, complete documents).
    pub model_complete: Vec<(String, i64)>,
    pub documents: i64,
}

/// How long one reading of the database gauges is served to scrapes.
pub const GAUGE_TTL: Duration = Duration::from_secs(5);

/// The database gauges, read at most once per `ttl` however many scrapes arrive: the first
/// scrape after the interval reads them while the others wait for it and share its result, so
/// the aggregates never run more than once at a time or more often than the interval.
#[derive(Debug)]
pub struct GaugeCache {
    ttl: Duration,
    last: tokio::sync::Mutex<Option<(tokio::time::Instant, Arc<StateSnapshot>)>>,
}

impl GaugeCache {
    /// A cache serving each reading for `ttl` (zero: every scrape reads).
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// The gauges, from the last reading when it is fresh enough.
    pub async fn get(&self, pool: &sqlx::PgPool) -> Result<Arc<StateSnapshot>, sqlx::Error> {
        let mut last = self.last.lock().await;
        if let Some((at, snapshot)) = last.as_ref()
            && at.elapsed() < self.ttl
        {
            return Ok(snapshot.clone());
        }
        let snapshot = Arc::new(collect_state(pool).await?);
        *last = Some((tokio::time::Instant::now(), snapshot.clone()));
        Ok(snapshot)
    }
}

/// Reads the gauges from the database.
pub async fn collect_state(pool: &sqlx::PgPool) -> Result<StateSnapshot, sqlx::Error> {
    let jobs: Vec<(String, String, i64)> = sqlx::query_as(
        "select status, kind, count(*) from jobs group by status, kind order by status, kind",
    )
    .fetch_all(pool)
    .await?;
    let oldest_due_age_seconds: f64 = sqlx::query_scalar(
        "select coalesce(extract(epoch from now() - min(run_at))::float8, 0)
         from jobs
         where status = 'ready' and run_at <= now()",
    )
    .fetch_one(pool)
    .await?;
    let dead_jobs = jobs
        .iter()
        .filter(|(status, _, _)| status == "dead")
        .map(|(_, _, n)| n)
        .sum();
    let extraction_failures: Vec<(String, i64)> = sqlx::query_as(
        "select coalesce(d.error ->> 'code', 'unknown'), count(*)
         from documents d
         where d.status = 'failed'
           and not exists (select 1 from chunks c where c.document_id = d.id)
         group by 1
         order by 1",
    )
    .fetch_all(pool)
    .await?;
    let model_complete: Vec<(String, i64)> = sqlx::query_as(
        "select m.model_version, count(c.document_id)
         from embedding_models m
         left join embedding_sets_complete c on c.model_version = m.model_version
         group by m.model_version
         order by m.model_version",
    )
    .fetch_all(pool)
    .await?;
    let documents: i64 = sqlx::query_scalar("select count(*) from documents")
        .fetch_one(pool)
        .await?;
    Ok(StateSnapshot {
        jobs,
        oldest_due_age_seconds,
        dead_jobs,
        extraction_failures,
        model_complete,
        documents,
    })
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn float(value: f64) -> String {
    if value.is_infinite() {
        if value > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{value}")
    }
}

/// The replicas' series: one per replica, fallbacks summed over every set of replicas.
fn render_replicas(watched: &[Arc<Replicas>], push: &mut impl FnMut(&'static str, String)) {
    let mut fallbacks: BTreeMap<&'static str, u64> = BTreeMap::new();
    for replicas in watched {
        for status in replicas.status() {
            let label = labels(&[("replica", &status.name)]);
            push(
                "docket_search_replica_up",
                format!(
                    "docket_search_replica_up{label} {}",
                    u8::from(status.usable)
                ),
            );
            if let Some(lag) = status.lag_seconds {
                push(
                    "docket_search_replica_lag_seconds",
                    format!("docket_search_replica_lag_seconds{label} {}", float(lag)),
                );
            }
            if let Some(bytes) = status.lag_bytes {
                push(
                    "docket_search_replica_lag_bytes",
                    format!("docket_search_replica_lag_bytes{label} {bytes}"),
                );
            }
            push(
                "docket_search_replica_searches_total",
                format!(
                    "docket_search_replica_searches_total{label} {}",
                    status.searches
                ),
            );
        }
        for (reason, n) in replicas.all_fallbacks() {
            *fallbacks.entry(reason.as_str()).or_default() += n;
        }
    }
    for (reason, n) in fallbacks {
        push(
            "docket_search_primary_fallbacks_total",
            format!(
                "docket_search_primary_fallbacks_total{} {n}",
                labels(&[("reason", reason)])
            ),
        );
    }
}

/// Renders `state` and this process's counters as Prometheus text.
pub fn render(metrics: &Metrics, state: &StateSnapshot) -> String {
    let mut samples: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut push = |family: &'static str, line: String| {
        samples.entry(family).or_default().push(line);
    };
    for (status, kind, n) in &state.jobs {
        push(
            "docket_jobs",
            format!(
                "docket_jobs{} {n}",
                labels(&[("status", status), ("kind", kind)])
            ),
        );
    }
    push(
        "docket_oldest_due_job_age_seconds",
        format!(
            "docket_oldest_due_job_age_seconds {}",
            float(state.oldest_due_age_seconds)
        ),
    );
    push(
        "docket_dead_jobs",
        format!("docket_dead_jobs {}", state.dead_jobs),
    );
    for (reason, n) in &state.extraction_failures {
        push(
            "docket_extraction_failures",
            format!(
                "docket_extraction_failures{} {n}",
                labels(&[("reason", reason)])
            ),
        );
    }
    for (version, n) in &state.model_complete {
        push(
            "docket_model_documents_complete",
            format!(
                "docket_model_documents_complete{} {n}",
                labels(&[("model_version", version)])
            ),
        );
    }
    push(
        "docket_documents",
        format!("docket_documents {}", state.documents),
    );
    if let Ok(counters) = metrics.counters.lock() {
        for ((family, pairs), n) in counters.iter() {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            push(family, format!("{family}{} {n}", labels(&pairs)));
        }
    }
    if let Ok(latency) = metrics.latency.lock() {
        for (model, histogram) in latency.iter() {
            let family = "docket_embedding_call_seconds";
            for (bound, n) in LATENCY_BUCKETS.iter().zip(histogram.buckets) {
                let le = float(*bound);
                push(
                    family,
                    format!(
                        "{family}_bucket{} {n}",
                        labels(&[("model", model), ("le", &le)])
                    ),
                );
            }
            push(
                family,
                format!(
                    "{family}_bucket{} {}",
                    labels(&[("model", model), ("le", "+Inf")]),
                    histogram.count
                ),
            );
            push(
                family,
                format!(
                    "{family}_sum{} {}",
                    labels(&[("model", model)]),
                    float(histogram.sum)
                ),
            );
            push(
                family,
                format!(
                    "{family}_count{} {}",
                    labels(&[("model", model)]),
                    histogram.count
                ),
            );
        }
    }
    render_replicas(&metrics.watched_replicas(), &mut push);
    push(
        "docket_rate_limiter_wait_seconds_total",
        format!(
            "docket_rate_limiter_wait_seconds_total {}",
            float(metrics.limiter_wait_seconds())
        ),
    );

    let mut out = String::new();
    for (family, kind, help) in FAMILIES {
        let _ = writeln!(out, "# HELP {family} {help}");
        let _ = writeln!(out, "# TYPE {family} {kind}");
        for line in samples.get(family).into_iter().flatten() {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(labels(&[("a", "x\"y\\z\nw")]), r#"{a="x\"y\\z\nw"}"#);
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_in_inf() {
        let metrics = Metrics::default();
        metrics.embedding_call("m", "ok", Duration::from_millis(30));
        metrics.embedding_call("m", "ok", Duration::from_secs(3));
        let text = render(&metrics, &StateSnapshot::default());
        assert!(text.contains(r#"docket_embedding_call_seconds_bucket{model="m",le="0.025"} 0"#));
        assert!(text.contains(r#"docket_embedding_call_seconds_bucket{model="m",le="0.05"} 1"#));
        assert!(text.contains(r#"docket_embedding_call_seconds_bucket{model="m",le="5"} 2"#));
        assert!(text.contains(r#"docket_embedding_call_seconds_bucket{model="m",le="+Inf"} 2"#));
        assert!(text.contains(r#"docket_embedding_call_seconds_count{model="m"} 2"#));
    }
}
