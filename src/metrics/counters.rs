//! The per-process counters: one method per event, called where the event happens, so each
//! family's name and labels are written once, here.

use std::time::Duration;

use super::Metrics;

/// Upper bounds of the embedding latency histogram, in seconds.
pub const LATENCY_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// One model's embedding latencies.
#[derive(Debug, Clone, Default)]
pub(super) struct Histogram {
    /// Cumulative counts per bucket of [`LATENCY_BUCKETS`].
    pub(super) buckets: [u64; LATENCY_BUCKETS.len()],
    pub(super) count: u64,
    pub(super) sum: f64,
}

/// A counter's identity: its family and its label pairs (in a fixed order per family).
pub(super) type SeriesKey = (&'static str, Vec<(&'static str, String)>);

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

    /// Time spent in one step of a document's life (`extraction`, `ocr`, `chunking`,
    /// `keyword_indexing`, `embedding`, `writes`), for `docket bench pipeline`'s breakdown.
    pub fn step_time(&self, step: &'static str, elapsed: Duration) {
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.add(
            "docket_step_microseconds_total",
            vec![("step", step.to_owned())],
            micros,
        );
    }

    /// One batch through the embedding cache: chunks it served, texts sent (misses), and the
    /// tokens the hits did not send.
    pub fn embedding_cache(&self, model: &str, hits: u64, misses: u64, tokens_saved: u64) {
        let labels = || vec![("model", model.to_owned())];
        self.add("docket_embedding_cache_hits_total", labels(), hits);
        self.add("docket_embedding_cache_misses_total", labels(), misses);
        self.add(
            "docket_embedding_cache_tokens_saved_total",
            labels(),
            tokens_saved,
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
}
