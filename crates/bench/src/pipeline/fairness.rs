//! `docket bench fairness`: what one collection's bulk upload costs another collection's single
//! file, through the whole pipeline (upload → extract → embed → ready, hash embedder, the
//! process's real workers).
//!
//! 1. **Idle**: one document uploaded into B on an empty queue, `--singles` times; the median
//!    time to ready is the reference.
//! 2. **Behind a backlog**: `--backlog` documents uploaded into A, then, while A drains, one
//!    document into B at a time (the next once the last is ready), `--singles` times. Aim: B's
//!    median within 2× of idle. A's documents ready per second over the same window is A's
//!    throughput *with* B's trickle; the next window of the same length, with nothing from B, is
//!    A's throughput *without*.
//!
//! For comparison, what first-in-first-out order would have made B wait: the A documents still
//! waiting when B's upload was committed, at A's measured rate.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use super::docket::{Docket, Provider, documents};

/// Options of `docket bench fairness`.
#[derive(Debug, clap::Args)]
pub struct FairnessBench {
    /// Server URL; the scratch database `docket_bench_pipeline` is created on it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,

    /// Documents queued in collection A.
    #[arg(long, default_value_t = 2000)]
    pub backlog: usize,

    /// Single documents uploaded into B, one after another, per phase.
    #[arg(long, default_value_t = 7)]
    pub singles: usize,
}

/// Runs the benchmark.
pub async fn run(args: FairnessBench) -> anyhow::Result<()> {
    anyhow::ensure!(args.singles >= 1, "--singles must be at least 1");
    let docket = Docket::start(&args.database_url, Provider::Hash, None, None, true).await?;
    let result = measure(&docket, &args).await;
    docket.stop().await?;
    let figures = result?;
    figures.print(&args);
    Ok(())
}

struct Figures {
    idle: Vec<Duration>,
    behind: Vec<Duration>,
    /// A's documents still waiting (not ready) when each of B's uploads was committed.
    waiting: Vec<i64>,
    a_with: f64,
    a_without: f64,
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

impl Figures {
    fn print(&self, args: &FairnessBench) {
        let idle = median(&self.idle).as_secs_f64();
        let behind = median(&self.behind).as_secs_f64();
        let worst = self.behind.iter().max().copied().unwrap_or_default();
        let waiting = self.waiting.iter().sum::<i64>() as f64 / self.waiting.len().max(1) as f64;
        let fifo = waiting / self.a_with.max(1e-9);
        println!();
        println!(
            "one document into B, {} times, alone and behind {} of A",
            args.singles, args.backlog
        );
        println!("  idle queue           median {:>8.3} s", idle);
        println!(
            "  behind A's backlog   median {:>8.3} s   slowest {:>8.3} s   ratio {:>5.2}×",
            behind,
            worst.as_secs_f64(),
            behind / idle.max(1e-9)
        );
        println!(
            "  first-in-first-out would wait for {waiting:.0} of A's documents: about {fifo:.1} s ({:.0}× idle)",
            fifo / idle.max(1e-9)
        );
        println!(
            "A's throughput: {:.1} documents/s with B's trickle, {:.1} without ({:.2}×)",
            self.a_with,
            self.a_without,
            self.a_with / self.a_without.max(1e-9)
        );
        println!(
            "{}",
            json!({
                "bench": "fairness",
                "backlog": args.backlog,
                "singles": args.singles,
                "idle_median_s": idle,
                "behind_median_s": behind,
                "behind_max_s": worst.as_secs_f64(),
                "ratio": behind / idle.max(1e-9),
                "fifo_estimate_s": fifo,
                "a_docs_per_s_with_trickle": self.a_with,
                "a_docs_per_s_without": self.a_without,
                "a_throughput_ratio": self.a_with / self.a_without.max(1e-9),
            })
        );
    }
}

async fn measure(docket: &Docket, args: &FairnessBench) -> anyhow::Result<Figures> {
    for name in ["a", "b"] {
        docket::collections::create(&docket.pool, name)
            .await
            .with_context(|| format!("creating collection {name}"))?;
    }
    let mut singles = documents(2 * args.singles, 2, 7).into_iter();
    let mut idle = Vec::new();
    for _ in 0..args.singles {
        let document = singles.next().context("a generated document")?;
        idle.push(one_into_b(docket, document).await?);
    }
    eprintln!(
        "bench fairness: uploading {} documents into A",
        args.backlog
    );
    docket
        .upload_into("a", documents(args.backlog, 2, 11))
        .await?;
    let started = Instant::now();
    let a_before = ready_in(docket, "a").await?;
    let mut behind = Vec::new();
    let mut waiting = Vec::new();
    for _ in 0..args.singles {
        waiting.push(args.backlog as i64 - ready_in(docket, "a").await?);
        let document = singles.next().context("a generated document")?;
        behind.push(one_into_b(docket, document).await?);
    }
    let window = started.elapsed();
    let a_after = ready_in(docket, "a").await?;
    anyhow::ensure!(
        a_after < args.backlog as i64,
        "A's backlog drained before B's uploads ended: raise --backlog"
    );
    let a_with = (a_after - a_before) as f64 / window.as_secs_f64();
    tokio::time::sleep(window).await;
    let a_later = ready_in(docket, "a").await?;
    anyhow::ensure!(
        a_later < args.backlog as i64,
        "A's backlog drained during the window without B: raise --backlog"
    );
    let a_without = (a_later - a_after) as f64 / window.as_secs_f64();
    Ok(Figures {
        idle,
        behind,
        waiting,
        a_with,
        a_without,
    })
}

/// Uploads `document` into B and waits until it is ready (at most 10 minutes).
async fn one_into_b(docket: &Docket, document: (String, String)) -> anyhow::Result<Duration> {
    let name = document.0.clone();
    let started = Instant::now();
    docket.upload_into("b", vec![document]).await?;
    loop {
        let status: Option<String> = sqlx::query_scalar(
            "select d.status from documents d join collections c on c.id = d.collection_id
             where c.name = 'b' and d.filename = $1",
        )
        .bind(&name)
        .fetch_optional(&docket.pool)
        .await?;
        match status.as_deref() {
            Some("ready") => return Ok(started.elapsed()),
            Some("failed") => anyhow::bail!("{name} failed"),
            _ => {}
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "{name} was not ready within 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn ready_in(docket: &Docket, collection: &str) -> anyhow::Result<i64> {
    sqlx::query_scalar(
        "select count(*) from documents d join collections c on c.id = d.collection_id
         where c.name = $1 and d.status = 'ready'",
    )
    .bind(collection)
    .fetch_one(&docket.pool)
    .await
    .context("counting ready documents")
}
