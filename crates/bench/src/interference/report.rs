//! The table and the JSON line of `docket bench interference`, and the replica it searches on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{DATABASE, InterferenceBench, Latencies, MODES};
use crate::search::round;
use docket::search::Replicas;

/// The replica at `url`, reading the scratch database, once it is usable (it may take a while
/// to replay the corpus load).
pub(super) async fn replicas(pool: &sqlx::PgPool, url: &str) -> anyhow::Result<Arc<Replicas>> {
    let options: sqlx::postgres::PgConnectOptions = url.parse()?;
    let replicas = Replicas::with_options(
        pool.clone(),
        vec![options.database(DATABASE)],
        8,
        Duration::from_secs(5),
        Duration::from_millis(200),
    );
    replicas.spawn_probe();
    let deadline = Instant::now() + Duration::from_secs(300);
    while !replicas.status().iter().all(|s| s.usable) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the replica did not catch up within 5 minutes: {:?}",
            replicas.status()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(replicas)
}

/// Searches on a replica: idle, and while the queue drains on the primary.
pub(super) struct ReplicaFigures {
    pub(super) idle: Latencies,
    pub(super) busy: Latencies,
    /// The queue's rate meanwhile, jobs/s.
    pub(super) rate: f64,
    pub(super) served: u64,
    pub(super) fallbacks: u64,
}

/// Everything measured, for the table and the JSON line.
pub(super) struct Report<'a> {
    pub(super) args: &'a InterferenceBench,
    pub(super) idle: Latencies,
    /// Idle again after the loaded phases.
    pub(super) idle_after: Latencies,
    pub(super) queue: Latencies,
    /// Jobs/s alone, and while searches ran.
    pub(super) queue_rates: (f64, f64),
    pub(super) ingest: Latencies,
    /// Documents/s alone, and while searches ran.
    pub(super) ingest_rates: (f64, f64),
    pub(super) replica: Option<ReplicaFigures>,
}

fn ratio(loaded: &Latencies, idle: &Latencies, mode: &str, p95: bool) -> f64 {
    let pick = |l: &Latencies| {
        l.get(mode)
            .map_or(f64::NAN, |f| if p95 { f.1 } else { f.0 })
    };
    round(pick(loaded) / pick(idle))
}

fn row(name: &str, figures: &Latencies, load: &str) {
    let cells: Vec<String> = MODES
        .iter()
        .map(|m| {
            figures
                .get(m)
                .map_or_else(String::new, |f| format!("{:>7.2} {:>7.2}", f.0, f.1))
        })
        .collect();
    println!("{name:<26} {}   {load}", cells.join("   "));
}

fn json_latencies(figures: &Latencies) -> serde_json::Value {
    figures
        .iter()
        .map(|(mode, (p50, p95))| {
            (
                (*mode).to_owned(),
                serde_json::json!({ "p50_ms": round(*p50), "p95_ms": round(*p95) }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn ratios(loaded: &Latencies, idle: &Latencies) -> serde_json::Value {
    MODES
        .iter()
        .map(|m| {
            (
                (*m).to_owned(),
                serde_json::json!({
                    "p50": ratio(loaded, idle, m, false),
                    "p95": ratio(loaded, idle, m, true),
                }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

impl Report<'_> {
    pub(super) fn print(&self) {
        let (qa, qb) = self.queue_rates;
        let (ia, ib) = self.ingest_rates;
        println!();
        println!(
            "search over {} chunks, one query at a time, {} timed per mode and phase (ms)",
            self.args.chunks, self.args.queries
        );
        println!(
            "{:<26} {:>15}   {:>15}   {:>15}   background load: alone → during searches",
            "phase", "vector p50 p95", "text p50 p95", "hybrid p50 p95"
        );
        row("idle", &self.idle, "");
        row("idle, at the end", &self.idle_after, "");
        row(
            "queue draining",
            &self.queue,
            &format!("{qa:.0} → {qb:.0} jobs/s"),
        );
        row(
            "ingesting",
            &self.ingest,
            &format!("{ia:.2} → {ib:.2} documents/s"),
        );
        if let Some(r) = &self.replica {
            row("replica, idle", &r.idle, "");
            row(
                "replica, queue on primary",
                &r.busy,
                &format!("{:.0} jobs/s", r.rate),
            );
            println!(
                "replica answered {} searches, the primary {} (fallbacks)",
                r.served, r.fallbacks
            );
        }
        for (name, loaded) in [("queue", &self.queue), ("ingest", &self.ingest)] {
            println!(
                "{name}/idle: hybrid p50 ×{}, p95 ×{}; vector p95 ×{}; text p95 ×{}",
                ratio(loaded, &self.idle, "hybrid", false),
                ratio(loaded, &self.idle, "hybrid", true),
                ratio(loaded, &self.idle, "vector", true),
                ratio(loaded, &self.idle, "text", true),
            );
        }
        let replica = self.replica.as_ref().map(|r| {
            serde_json::json!({
                "idle": json_latencies(&r.idle),
                "queue": json_latencies(&r.busy),
                "queue_jobs_per_s": round(r.rate),
                "queue_vs_primary_idle": ratios(&r.busy, &self.idle),
                "searches_on_replica": r.served,
                "fallbacks": r.fallbacks,
            })
        });
        println!(
            "{}",
            serde_json::json!({
                "bench": "interference",
                "chunks": self.args.chunks,
                "queries": self.args.queries,
                "idle": json_latencies(&self.idle),
                "idle_after": json_latencies(&self.idle_after),
                "queue": json_latencies(&self.queue),
                "ingest": json_latencies(&self.ingest),
                "queue_vs_idle": ratios(&self.queue, &self.idle),
                "ingest_vs_idle": ratios(&self.ingest, &self.idle),
                "hybrid_p95_ratio_queue": ratio(&self.queue, &self.idle, "hybrid", true),
                "hybrid_p95_ratio_ingest": ratio(&self.ingest, &self.idle, "hybrid", true),
                "queue_jobs_per_s_alone": round(qa),
                "queue_jobs_per_s_with_searches": round(qb),
                "ingest_docs_per_s_alone": round(ia),
                "ingest_docs_per_s_with_searches": round(ib),
                "replica": replica,
            })
        );
    }
}
