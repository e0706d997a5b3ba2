//! The benchmark's figures, the table people read and the JSON line scripts compare.
//!
//! The JSON keeps its documented keys stable (`bench`, `jobs_per_s`, `ceiling_jobs_per_s`,
//! `ratio`, `best_jobs_per_s`) and adds the rest; a figure that was not measured is `null`.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;

use super::anchor::Anchor;

/// The aims from the issue.
const AIM_RATIO: f64 = 0.8;
const AIM_VS_GRAPHILE: f64 = 1.5;
const AIM_PICKUP_P50_MS: f64 = 5.0;

/// One point of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Setting {
    /// `handlers` concurrent claim-and-complete tasks for the ceiling; for the runtime, a kind
    /// with `handlers × claim_batch` slots (the same jobs in flight).
    pub handlers: usize,
    /// Most jobs per claim statement.
    pub claim_batch: usize,
}

/// One drain round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    pub seconds: f64,
    pub jobs_per_s: f64,
}

impl Round {
    /// `jobs` drained in `elapsed`.
    pub fn new(jobs: usize, elapsed: Duration) -> Round {
        Round {
            seconds: elapsed.as_secs_f64(),
            jobs_per_s: rate(jobs, elapsed),
        }
    }
}

/// Both rounds of one setting.
#[derive(Debug, Clone, Copy)]
pub(super) struct SettingFigures {
    pub setting: Setting,
    /// Jobs claimed and completed in the scratch table before this setting's rounds: the
    /// `done` rows (and dead tuples) the table carries into them.
    pub claims_before: usize,
    pub ours: Round,
    pub ceiling: Round,
}

impl SettingFigures {
    fn ratio(&self) -> f64 {
        ratio(self.ours.jobs_per_s, self.ceiling.jobs_per_s)
    }
}

/// docket at graphile-worker's concurrency (claiming only for free handlers, as always).
#[derive(Debug, Clone, Copy)]
pub(super) struct Equal {
    pub concurrency: usize,
    pub plain: Round,
}

/// Pickup latencies of one mode.
#[derive(Debug, Clone, Copy)]
pub(super) struct Latency {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// Summarises `samples` (in any order).
    pub fn from_samples(mut samples: Vec<Duration>) -> Latency {
        samples.sort_unstable();
        let ms = |d: Option<&Duration>| d.map_or(0.0, |d| d.as_secs_f64() * 1000.0);
        Latency {
            samples: samples.len(),
            p50_ms: ms(percentile(&samples, 50.0)),
            p99_ms: ms(percentile(&samples, 99.0)),
            max_ms: ms(samples.last()),
        }
    }
}

/// Everything one run measured.
#[derive(Debug)]
pub(super) struct Figures {
    pub jobs: usize,
    pub headline: Setting,
    pub settings: Vec<SettingFigures>,
    pub equal: Equal,
    pub enqueue_jobs_per_s: f64,
    pub notify: Latency,
    pub poll: Latency,
    pub poll_interval_ms: u64,
    pub graphile: Anchor,
}

impl Figures {
    fn headline(&self) -> Option<&SettingFigures> {
        self.settings.iter().find(|s| s.setting == self.headline)
    }

    fn best(&self) -> Option<&SettingFigures> {
        self.settings
            .iter()
            .max_by(|a, b| a.ours.jobs_per_s.total_cmp(&b.ours.jobs_per_s))
    }

    fn best_vs_graphile_batched(&self) -> Option<f64> {
        let best = self.best()?.ours.jobs_per_s;
        let graphile = self.graphile.batched.as_ref()?.jobs_per_s;
        Some(ratio(best, graphile))
    }

    /// docket against graphile-worker's default runner, both at the equal concurrency.
    fn equal_plain_vs_graphile_default(&self) -> Option<f64> {
        let graphile = self.graphile.default.as_ref()?.jobs_per_s;
        Some(ratio(self.equal.plain.jobs_per_s, graphile))
    }
}

/// The human-readable report.
pub(super) fn table(figures: &Figures) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nqueue drain: {} no-op jobs per round; the table keeps every earlier round's rows (no vacuum between rounds)",
        figures.jobs
    );
    let _ = writeln!(
        out,
        "{:>8} {:>6} {:>14} {:>14} {:>16} {:>7}",
        "handlers", "batch", "claims before", "docket jobs/s", "ceiling jobs/s", "ratio"
    );
    for s in &figures.settings {
        let mark = if s.setting == figures.headline {
            " ← headline"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:>8} {:>6} {:>14} {:>14.0} {:>16.0} {:>7.2}{mark}",
            s.setting.handlers,
            s.setting.claim_batch,
            s.claims_before,
            s.ours.jobs_per_s,
            s.ceiling.jobs_per_s,
            s.ratio()
        );
    }
    equal_table(&mut out, figures);
    let _ = writeln!(
        out,
        "\nenqueue (enqueue_many, 1000 per transaction): {:.0} jobs/s",
        figures.enqueue_jobs_per_s
    );
    for (name, latency) in [
        ("NOTIFY (poll 5 s)".to_owned(), &figures.notify),
        (
            format!("poll only ({} ms)", figures.poll_interval_ms),
            &figures.poll,
        ),
    ] {
        let _ = writeln!(
            out,
            "pickup {name:<20} p50 {:>7.2} ms   p99 {:>7.2} ms   max {:>7.2} ms   ({} samples)",
            latency.p50_ms, latency.p99_ms, latency.max_ms, latency.samples
        );
    }
    let _ = writeln!(out);
    for (name, run) in [
        ("default", &figures.graphile.default),
        ("batched (localQueue)", &figures.graphile.batched),
    ] {
        match run {
            Some(run) => {
                let _ = writeln!(
                    out,
                    "graphile-worker {name:<21} {:>8.0} jobs/s   enqueue {:>8.0} jobs/s   ({} jobs, concurrency {})",
                    run.jobs_per_s, run.enqueue_jobs_per_s, run.n, run.concurrency
                );
            }
            None => {
                let _ = writeln!(out, "graphile-worker {name:<21} not measured");
            }
        }
    }
    if let Some(note) = &figures.graphile.note {
        let _ = writeln!(out, "note: {note}");
    }

    let _ = writeln!(out, "\naims");
    let headline = figures.headline();
    let _ = writeln!(
        out,
        "  ratio at {}×{} ≥ {AIM_RATIO}: {}",
        figures.headline.handlers,
        figures.headline.claim_batch,
        verdict(headline.map(|h| (h.ratio(), h.ratio() >= AIM_RATIO)))
    );
    let _ = writeln!(
        out,
        "  best ≥ {AIM_VS_GRAPHILE} × graphile-worker batched: {}",
        verdict(
            figures
                .best_vs_graphile_batched()
                .map(|r| (r, r >= AIM_VS_GRAPHILE))
        )
    );
    let _ = writeln!(
        out,
        "  pickup p50 with NOTIFY < {AIM_PICKUP_P50_MS} ms: {}",
        verdict(Some((
            figures.notify.p50_ms,
            figures.notify.p50_ms < AIM_PICKUP_P50_MS
        )))
    );
    out
}

/// The equal-concurrency row, beside graphile-worker's default runner.
fn equal_table(out: &mut String, figures: &Figures) {
    let equal = &figures.equal;
    let _ = writeln!(
        out,
        "\nequal concurrency ({}), docket against graphile-worker in the same run",
        equal.concurrency
    );
    let ours = equal.plain.jobs_per_s;
    let (theirs, vs) = match &figures.graphile.default {
        Some(run) => (
            format!("{:.0}", run.jobs_per_s),
            format!("{:.2}×", ratio(ours, run.jobs_per_s)),
        ),
        None => ("not measured".to_owned(), "-".to_owned()),
    };
    let _ = writeln!(
        out,
        "  docket {ours:>8.0} jobs/s   graphile-worker default runner {theirs:>12} jobs/s   {vs}"
    );
}

fn verdict(value: Option<(f64, bool)>) -> String {
    match value {
        Some((value, true)) => format!("met ({value:.2})"),
        Some((value, false)) => format!("NOT met ({value:.2})"),
        None => "not measured".to_owned(),
    }
}

/// The JSON line; its keys are the contract with scripts.
pub(super) fn json(figures: &Figures) -> String {
    let headline = figures.headline();
    let best = figures.best();
    let graphile_rate = |run: &Option<super::anchor::AnchorRun>| run.as_ref().map(|r| r.jobs_per_s);
    let matrix: Vec<_> = figures
        .settings
        .iter()
        .map(|s| {
            json!({
                "handlers": s.setting.handlers,
                "claim_batch": s.setting.claim_batch,
                "claims_before": s.claims_before,
                "jobs_per_s": round1(s.ours.jobs_per_s),
                "ceiling_jobs_per_s": round1(s.ceiling.jobs_per_s),
                "ratio": round3(s.ratio()),
                "seconds": round3(s.ours.seconds),
                "ceiling_seconds": round3(s.ceiling.seconds),
            })
        })
        .collect();
    json!({
        "bench": "queue",
        "jobs_per_s": headline.map(|h| round1(h.ours.jobs_per_s)),
        "ceiling_jobs_per_s": headline.map(|h| round1(h.ceiling.jobs_per_s)),
        "ratio": headline.map(|h| round3(h.ratio())),
        "best_jobs_per_s": best.map(|b| round1(b.ours.jobs_per_s)),
        "best_handlers": best.map(|b| b.setting.handlers),
        "best_claim_batch": best.map(|b| b.setting.claim_batch),
        "best_ceiling_jobs_per_s": figures.settings.iter().map(|s| s.ceiling.jobs_per_s).reduce(f64::max).map(round1),
        "handlers": figures.headline.handlers,
        "claim_batch": figures.headline.claim_batch,
        "jobs_per_round": figures.jobs,
        "enqueue_jobs_per_s": round1(figures.enqueue_jobs_per_s),
        "pickup_notify_p50_ms": round3(figures.notify.p50_ms),
        "pickup_notify_p99_ms": round3(figures.notify.p99_ms),
        "pickup_poll_p50_ms": round3(figures.poll.p50_ms),
        "pickup_poll_p99_ms": round3(figures.poll.p99_ms),
        "pickup_samples": figures.notify.samples,
        "poll_interval_ms": figures.poll_interval_ms,
        "graphile_jobs_per_s": graphile_rate(&figures.graphile.default),
        "graphile_batched_jobs_per_s": graphile_rate(&figures.graphile.batched),
        "graphile_enqueue_jobs_per_s": figures.graphile.default.as_ref().map(|r| r.enqueue_jobs_per_s),
        "best_vs_graphile_batched": figures.best_vs_graphile_batched().map(round3),
        "equal_concurrency": figures.equal.concurrency,
        "equal_plain_jobs_per_s": round1(figures.equal.plain.jobs_per_s),
        "equal_plain_vs_graphile_default": figures.equal_plain_vs_graphile_default().map(round3),
        "matrix": matrix,
    })
    .to_string()
}

/// Jobs per second; zero when no time passed.
pub(super) fn rate(jobs: usize, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds > 0.0 {
        jobs as f64 / seconds
    } else {
        0.0
    }
}

fn ratio(ours: f64, reference: f64) -> f64 {
    if reference > 0.0 {
        ours / reference
    } else {
        0.0
    }
}

/// The nearest-rank percentile of sorted `samples`.
fn percentile<T>(sorted: &[T], p: f64) -> Option<&T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let sorted: Vec<u32> = (1..=200).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(&100));
        assert_eq!(percentile(&sorted, 99.0), Some(&198));
        assert_eq!(percentile(&[7u32], 99.0), Some(&7));
        assert_eq!(percentile::<u32>(&[], 50.0), None);
    }

    #[test]
    fn rate_is_jobs_over_seconds_and_zero_without_time() {
        assert_eq!(rate(500, Duration::from_millis(250)), 2000.0);
        assert_eq!(rate(500, Duration::ZERO), 0.0);
    }
}
