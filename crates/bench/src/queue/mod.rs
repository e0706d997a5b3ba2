//! `docket bench queue`: how fast the job queue moves no-op jobs, measured side by side with
//! what its own SQL can do without the worker runtime, and with graphile-worker on the same
//! server, in one run.
//!
//! Why side by side: the machine is shared and noisy, so absolute rates swing from run to run;
//! ratios measured minutes apart on the same server are what can be compared across runs.
//!
//! The run, in order:
//! 1. a scratch database (`docket_bench` by default) is dropped, created and migrated;
//! 2. for every setting of the matrix (handlers × claim batch) one round through the real
//!    [`docket::worker::Worker`] and one round of the raw-SQL ceiling, each on `--jobs` fresh
//!    jobs enqueued with [`docket::queue::enqueue_many`] (which also gives the enqueue rate);
//!    the table is never vacuumed by us between rounds, so later rounds run on a table that
//!    holds every earlier round's `done` rows (steady state, not a fresh table);
//! 3. one round at graphile-worker's concurrency (10), so that docket and graphile-worker are
//!    also compared at the same concurrency, not only at their best;
//! 4. pickup latency (enqueue commit → handler start) with NOTIFY and with polling alone;
//! 5. graphile-worker's anchor script at concurrency 10, unless skipped or absent.
//!
//! It prints a table and, as its last line, one JSON object.

mod anchor;
pub(crate) mod drain;
mod pickup;
pub(crate) mod report;
mod scratch;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use report::{Figures, Setting, SettingFigures};

/// graphile-worker's concurrency in the anchor, and docket's in the equal-concurrency rounds.
const EQUAL_CONCURRENCY: usize = 10;

/// The setting the headline figures (`jobs_per_s`, `ceiling_jobs_per_s`, `ratio`) come from.
const HEADLINE: Setting = Setting {
    handlers: 4,
    claim_batch: 10,
};

/// Options of `docket bench queue`.
#[derive(Debug, clap::Args)]
pub struct QueueBench {
    /// Server URL; a scratch database is created on the same server.
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    pub database_url: String,

    /// The scratch database, dropped and created at the start (everything in it is lost).
    #[arg(long, default_value = "docket_bench")]
    pub scratch_db: String,

    /// Jobs per drain round [default: 10000, or 2000 with --quick].
    #[arg(long)]
    pub jobs: Option<usize>,

    /// A smaller matrix and fewer latency samples, for smoke checks.
    #[arg(long)]
    pub quick: bool,

    /// Do not run graphile-worker; its figures are null.
    #[arg(long)]
    pub skip_anchor: bool,

    /// graphile-worker's anchor script [default: ../shared/anchors/graphile-worker/run.sh
    /// beside this repository].
    #[arg(long)]
    pub anchor: Option<PathBuf>,

    /// Pickup-latency samples per mode [default: 200, or 50 with --quick].
    #[arg(long)]
    pub samples: Option<usize>,

    /// Poll interval of the poll-only pickup measurement, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub poll_ms: u64,
}

impl QueueBench {
    fn jobs(&self) -> usize {
        self.jobs
            .unwrap_or(if self.quick { 2000 } else { 10_000 })
            .max(1)
    }

    fn samples(&self) -> usize {
        self.samples
            .unwrap_or(if self.quick { 50 } else { 200 })
            .max(1)
    }

    /// The settings in the order they run. The headline setting is not first, so that it runs
    /// on a table that already holds earlier rounds' rows.
    fn matrix(&self) -> Vec<Setting> {
        let pairs: &[(usize, usize)] = if self.quick {
            &[(1, 10), (4, 10), (16, 100)]
        } else {
            &[
                (1, 1),
                (1, 10),
                (1, 100),
                (4, 1),
                (4, 10),
                (4, 100),
                (16, 1),
                (16, 10),
                (16, 100),
            ]
        };
        pairs
            .iter()
            .map(|&(handlers, claim_batch)| Setting {
                handlers,
                claim_batch,
            })
            .collect()
    }

    fn anchor_script(&self) -> PathBuf {
        self.anchor
            .clone()
            .unwrap_or_else(|| PathBuf::from("../shared/anchors/graphile-worker/run.sh"))
    }
}

/// Runs the benchmark and prints its table, then the JSON line.
pub async fn run(args: QueueBench) -> anyhow::Result<()> {
    let figures = measure(&args).await?;
    print!("{}", report::table(&figures));
    println!("{}", report::json(&figures));
    Ok(())
}

/// Runs every measurement of the benchmark (see the module doc).
async fn measure(args: &QueueBench) -> anyhow::Result<Figures> {
    let jobs = args.jobs();
    let matrix = args.matrix();
    let largest = matrix.iter().map(|s| s.handlers).max().unwrap_or(1);

    let scratch = scratch::Scratch::create(&args.database_url, &args.scratch_db).await?;
    // Handlers, producer, completer, heartbeat and the bench's own checks each need a connection.
    let pool = scratch
        .pool(u32::try_from(largest + 8).unwrap_or(64))
        .await?;
    eprintln!(
        "queue bench: {jobs} jobs per round, {} settings, scratch database {}",
        matrix.len(),
        args.scratch_db
    );

    let mut enqueue = drain::EnqueueTally::default();
    let mut settings = Vec::new();
    let mut processed = 0usize;
    for setting in matrix {
        eprintln!(
            "  {} handlers × batch {}: worker…",
            setting.handlers, setting.claim_batch
        );
        let claims_before = processed;
        let ours = drain::worker_round(&pool, setting, jobs, &mut enqueue).await?;
        processed += jobs;
        eprintln!("    {:.0} jobs/s; ceiling…", ours.jobs_per_s);
        let ceiling = drain::ceiling_round(&pool, setting, jobs, &mut enqueue).await?;
        processed += jobs;
        eprintln!("    {:.0} jobs/s", ceiling.jobs_per_s);
        settings.push(SettingFigures {
            setting,
            claims_before,
            ours,
            ceiling,
        });
    }

    let equal = equal_concurrency(&pool, jobs, &mut enqueue).await?;
    let samples = args.samples();
    eprintln!("  pickup latency with NOTIFY ({samples} samples)…");
    let notify = pickup::measure(&pool, pickup::Mode::Notify, samples).await?;
    eprintln!("  pickup latency polling every {} ms…", args.poll_ms);
    let poll = pickup::measure(
        &pool,
        pickup::Mode::Poll(Duration::from_millis(args.poll_ms)),
        samples,
    )
    .await?;
    pool.close().await;

    let graphile = if args.skip_anchor {
        anchor::Anchor::skipped("--skip-anchor was given")
    } else {
        eprintln!("  graphile-worker…");
        anchor::run(
            &args.anchor_script(),
            &args.database_url,
            jobs,
            EQUAL_CONCURRENCY,
        )
        .await
        .context("running graphile-worker's anchor")?
    };

    scratch.drop_database().await?;

    Ok(Figures {
        jobs,
        headline: HEADLINE,
        settings,
        equal,
        enqueue_jobs_per_s: enqueue.jobs_per_s(),
        notify,
        poll,
        poll_interval_ms: args.poll_ms,
        graphile,
    })
}

/// docket at graphile-worker's concurrency, against graphile-worker's default runner.
async fn equal_concurrency(
    pool: &sqlx::PgPool,
    jobs: usize,
    enqueue: &mut drain::EnqueueTally,
) -> anyhow::Result<report::Equal> {
    let shape = drain::Shape {
        concurrency: EQUAL_CONCURRENCY,
        claim_batch: EQUAL_CONCURRENCY,
    };
    eprintln!("  concurrency {EQUAL_CONCURRENCY}: worker…");
    let plain = drain::shaped_round(pool, shape, jobs, enqueue).await?;
    eprintln!("    {:.0} jobs/s", plain.jobs_per_s);
    Ok(report::Equal {
        concurrency: EQUAL_CONCURRENCY,
        plain,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: QueueBench,
    }

    /// Runs the whole benchmark on a tiny workload against the real server: every stage
    /// finishes, every round drains all its jobs, and the JSON line carries the figures.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn quick_run_measures_every_stage_and_reports_json() {
        let scratch_db = format!("docket_bench_test_{}", std::process::id());
        let mut argv = vec![
            "bench",
            "--quick",
            "--jobs",
            "300",
            "--samples",
            "10",
            "--skip-anchor",
            "--scratch-db",
            &scratch_db,
        ];
        let url = std::env::var("DATABASE_URL").ok();
        if let Some(url) = &url {
            argv.extend(["--database-url", url.as_str()]);
        }
        let args = Cli::parse_from(argv).bench;
        let figures = measure(&args).await.expect("the quick bench runs");

        assert_eq!(figures.settings.len(), 3);
        assert!(
            figures
                .settings
                .iter()
                .all(|s| s.ours.jobs_per_s > 0.0 && s.ceiling.jobs_per_s > 0.0)
        );
        assert_eq!(figures.settings[1].claims_before, 600);
        assert_eq!(figures.notify.samples, 10);
        assert_eq!(figures.poll.samples, 10);
        assert!(figures.enqueue_jobs_per_s > 0.0);

        let line: serde_json::Value =
            serde_json::from_str(&report::json(&figures)).expect("the last line is JSON");
        assert_eq!(line["bench"], "queue");
        assert!(line["jobs_per_s"].as_f64().is_some_and(|r| r > 0.0));
        assert!(line["ratio"].as_f64().is_some_and(|r| r > 0.0));
        assert!(line["graphile_batched_jobs_per_s"].is_null());
        assert!(line["best_vs_graphile_batched"].is_null());
        assert_eq!(line["matrix"].as_array().map(Vec::len), Some(3));
        assert_eq!(line["equal_concurrency"], 10);
        assert!(
            line["equal_plain_jobs_per_s"]
                .as_f64()
                .is_some_and(|r| r > 0.0)
        );
        assert!(line["equal_plain_vs_graphile_default"].is_null());
    }
}
