//! The Prometheus text format (version 0.0.4): every family with its help and type, in a fixed
//! order, then its samples; label values escaped. Pure: it renders what the counters, the
//! gauges and the reporters hold.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::counters::LATENCY_BUCKETS;
use super::{Metrics, ReplicaReport, StateSnapshot};

/// Help text and type of each family `/metrics` writes, in the order it writes them.
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
        "docket_step_microseconds_total",
        "counter",
        "Time spent in each step of the pipeline (extraction, ocr, chunking, keyword_indexing, embedding, writes), in microseconds.",
    ),
    (
        "docket_embedding_cache_hits_total",
        "counter",
        "Chunks whose vector came from the embedding cache (same text, same model version) instead of the provider.",
    ),
    (
        "docket_embedding_cache_misses_total",
        "counter",
        "Texts the embedding cache did not hold, sent to the provider.",
    ),
    (
        "docket_embedding_cache_tokens_saved_total",
        "counter",
        "Tokens of the chunks the embedding cache served: not sent to the provider.",
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

/// Sample lines by family, in the order they were added.
#[derive(Default)]
struct Samples(BTreeMap<&'static str, Vec<String>>);

impl Samples {
    fn push(&mut self, family: &'static str, line: String) {
        self.0.entry(family).or_default().push(line);
    }

    /// One sample of `family` per (value of `label`, count).
    fn counts_by(&mut self, family: &'static str, label: &str, counts: &[(String, i64)]) {
        for (value, n) in counts {
            self.push(family, format!("{family}{} {n}", labels(&[(label, value)])));
        }
    }

    /// Every family of [`FAMILIES`], with its help, type and samples.
    fn write(&self) -> String {
        let mut out = String::new();
        for (family, kind, help) in FAMILIES {
            let _ = writeln!(out, "# HELP {family} {help}");
            let _ = writeln!(out, "# TYPE {family} {kind}");
            for line in self.0.get(family).into_iter().flatten() {
                let _ = writeln!(out, "{line}");
            }
        }
        out
    }
}

/// Renders `state` and this process's counters as Prometheus text.
pub fn render(metrics: &Metrics, state: &StateSnapshot) -> String {
    let mut samples = Samples::default();
    state_samples(state, &mut samples);
    counter_samples(metrics, &mut samples);
    latency_samples(metrics, &mut samples);
    replica_samples(&metrics.watched_replicas(), &mut samples);
    samples.push(
        "docket_rate_limiter_wait_seconds_total",
        format!(
            "docket_rate_limiter_wait_seconds_total {}",
            float(metrics.limiter_wait_seconds())
        ),
    );
    samples.write()
}

/// The database gauges.
fn state_samples(state: &StateSnapshot, samples: &mut Samples) {
    for count in &state.jobs {
        samples.push(
            "docket_jobs",
            format!(
                "docket_jobs{} {}",
                labels(&[("status", count.status.as_str()), ("kind", &count.kind)]),
                count.jobs
            ),
        );
    }
    samples.push(
        "docket_oldest_due_job_age_seconds",
        format!(
            "docket_oldest_due_job_age_seconds {}",
            float(state.oldest_due_age_seconds)
        ),
    );
    samples.push(
        "docket_dead_jobs",
        format!("docket_dead_jobs {}", state.dead_jobs),
    );
    samples.counts_by(
        "docket_extraction_failures",
        "reason",
        &state.extraction_failures,
    );
    samples.counts_by(
        "docket_model_documents_complete",
        "model_version",
        &state.model_complete,
    );
    samples.push(
        "docket_documents",
        format!("docket_documents {}", state.documents),
    );
}

/// This process's counters, one line per series.
fn counter_samples(metrics: &Metrics, samples: &mut Samples) {
    if let Ok(counters) = metrics.counters.lock() {
        for ((family, pairs), n) in counters.iter() {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
            samples.push(family, format!("{family}{} {n}", labels(&pairs)));
        }
    }
}

/// The embedding latency histogram of each model: cumulative buckets, `+Inf`, sum and count.
fn latency_samples(metrics: &Metrics, samples: &mut Samples) {
    let Ok(latency) = metrics.latency.lock() else {
        return;
    };
    let family = "docket_embedding_call_seconds";
    for (model, histogram) in latency.iter() {
        for (bound, n) in LATENCY_BUCKETS.iter().zip(histogram.buckets) {
            let le = float(*bound);
            samples.push(
                family,
                format!(
                    "{family}_bucket{} {n}",
                    labels(&[("model", model), ("le", &le)])
                ),
            );
        }
        samples.push(
            family,
            format!(
                "{family}_bucket{} {}",
                labels(&[("model", model), ("le", "+Inf")]),
                histogram.count
            ),
        );
        samples.push(
            family,
            format!(
                "{family}_sum{} {}",
                labels(&[("model", model)]),
                float(histogram.sum)
            ),
        );
        samples.push(
            family,
            format!(
                "{family}_count{} {}",
                labels(&[("model", model)]),
                histogram.count
            ),
        );
    }
}

/// The replicas' series: one per replica, fallbacks summed over every set of replicas.
fn replica_samples(watched: &[std::sync::Arc<dyn ReplicaReport>], samples: &mut Samples) {
    let mut fallbacks: BTreeMap<&'static str, u64> = BTreeMap::new();
    for replicas in watched {
        for replica in replicas.replica_samples() {
            let label = labels(&[("replica", &replica.name)]);
            samples.push(
                "docket_search_replica_up",
                format!(
                    "docket_search_replica_up{label} {}",
                    u8::from(replica.usable)
                ),
            );
            if let Some(lag) = replica.lag_seconds {
                samples.push(
                    "docket_search_replica_lag_seconds",
                    format!("docket_search_replica_lag_seconds{label} {}", float(lag)),
                );
            }
            if let Some(bytes) = replica.lag_bytes {
                samples.push(
                    "docket_search_replica_lag_bytes",
                    format!("docket_search_replica_lag_bytes{label} {bytes}"),
                );
            }
            samples.push(
                "docket_search_replica_searches_total",
                format!(
                    "docket_search_replica_searches_total{label} {}",
                    replica.searches
                ),
            );
        }
        for (reason, n) in replicas.fallback_counts() {
            *fallbacks.entry(reason).or_default() += n;
        }
    }
    for (reason, n) in fallbacks {
        samples.push(
            "docket_search_primary_fallbacks_total",
            format!(
                "docket_search_primary_fallbacks_total{} {n}",
                labels(&[("reason", reason)])
            ),
        );
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

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
