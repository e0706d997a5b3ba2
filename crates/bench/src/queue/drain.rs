//! Drain rounds: `--jobs` no-op jobs are enqueued, then drained either by the real worker
//! runtime or by plain tokio tasks running the same claim and complete statements (the
//! ceiling). A round ends when every job is `done` in the table, not when handlers have run:
//! the completer acknowledges in batches, and only a committed `done` counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::report::{Round, Setting, rate};
use docket::queue::{Lease, NewJob, Queue, enqueue_many};
use docket::worker::builtin::NOOP;
use docket::worker::{Outcome, Registry, Worker, WorkerConfig};

/// Jobs per enqueue statement (and per transaction).
const ENQUEUE_BATCH: usize = 1000;

/// Long enough that no lease expires or needs a heartbeat during a round.
const LEASE: Duration = Duration::from_secs(300);

/// A round that takes longer than this is stuck, not slow.
const ROUND_TIMEOUT: Duration = Duration::from_secs(600);

/// Enqueue time summed over every round, for one enqueue rate.
#[derive(Debug, Default)]
pub(crate) struct EnqueueTally {
    jobs: usize,
    elapsed: Duration,
}

impl EnqueueTally {
    /// Jobs per second over every enqueue so far; zero before the first.
    pub fn jobs_per_s(&self) -> f64 {
        rate(self.jobs, self.elapsed)
    }
}

/// How the runtime runs the no-op kind in one round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub concurrency: usize,
    pub claim_batch: usize,
}

impl Shape {
    /// The same work in flight as the ceiling's `setting`: there, each of `handlers` tasks
    /// holds a claimed batch; here each job holds a slot, so the kind gets handlers × batch
    /// slots, which the producer fills `claim_batch` jobs per claim.
    pub fn of(setting: Setting) -> Shape {
        Shape {
            concurrency: setting.handlers * setting.claim_batch,
            claim_batch: setting.claim_batch,
        }
    }
}

/// Drains `jobs` fresh no-op jobs through [`Worker::run`] with `setting`
/// ([`Shape::of`] it).
pub(crate) async fn worker_round(
    pool: &sqlx::PgPool,
    setting: Setting,
    jobs: usize,
    tally: &mut EnqueueTally,
) -> anyhow::Result<Round> {
    shaped_round(pool, Shape::of(setting), jobs, tally).await
}

/// Drains `jobs` fresh no-op jobs through [`Worker::run`] with `shape`.
pub(super) async fn shaped_round(
    pool: &sqlx::PgPool,
    shape: Shape,
    jobs: usize,
    tally: &mut EnqueueTally,
) -> anyhow::Result<Round> {
    enqueue_noops(pool, jobs, tally).await?;

    let handled = Arc::new(AtomicUsize::new(0));
    let counter = handled.clone();
    let mut registry = Registry::new();
    registry.register(NOOP, shape.concurrency, move |_job| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(Outcome::Complete)
        }
    });
    let mut config = WorkerConfig::for_lease(LEASE);
    config.worker_id = format!("bench-c{}-b{}", shape.concurrency, shape.claim_batch);
    config.claim_batch = shape.claim_batch;
    let worker = Worker::new(Queue::new(pool.clone(), LEASE), registry, config);
    let stop = CancellationToken::new();

    let started = Instant::now();
    let running = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
    // Watching an in-process counter costs the database nothing; the table is asked only once
    // every handler has run, for the acknowledgements still on their way.
    let waited = async {
        while handled.load(Ordering::Relaxed) < jobs {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        wait_until_drained(pool).await
    };
    let outcome = tokio::time::timeout(ROUND_TIMEOUT, waited).await;
    let elapsed = started.elapsed();
    stop.cancel();
    running.await.context("the worker task failed")?;
    outcome
        .map_err(|_| {
            anyhow::anyhow!(
                "the worker round {shape:?} did not finish in {ROUND_TIMEOUT:?} ({} of {jobs} handled)",
                handled.load(Ordering::Relaxed)
            )
        })?
        .context("watching the worker round")?;
    Ok(Round::new(jobs, elapsed))
}

/// Drains `jobs` fresh no-op jobs with `setting.handlers` plain tasks, each claiming
/// `setting.claim_batch` jobs with [`Queue::claim`] and acknowledging them all with one
/// [`Queue::complete_many`]: the same statements as the runtime, with nothing around them.
pub(super) async fn ceiling_round(
    pool: &sqlx::PgPool,
    setting: Setting,
    jobs: usize,
    tally: &mut EnqueueTally,
) -> anyhow::Result<Round> {
    enqueue_noops(pool, jobs, tally).await?;
    let queue = Queue::new(pool.clone(), LEASE);
    let started = Instant::now();
    let tasks: Vec<_> = (0..setting.handlers)
        .map(|_| tokio::spawn(claim_and_complete(queue.clone(), setting.claim_batch)))
        .collect();
    let mut drained = 0;
    for task in tasks {
        drained += tokio::time::timeout(ROUND_TIMEOUT, task)
            .await
            .context("a ceiling task did not finish")?
            .context("a ceiling task failed")??;
    }
    let elapsed = started.elapsed();
    if drained != jobs {
        anyhow::bail!("the ceiling round completed {drained} jobs of {jobs}");
    }
    Ok(Round::new(jobs, elapsed))
}

/// Claims and completes until a claim comes back empty; returns how many jobs it completed.
async fn claim_and_complete(queue: Queue, batch: usize) -> anyhow::Result<usize> {
    let mut completed = 0;
    loop {
        let claimed = queue.claim(NOOP, batch, "bench-ceiling").await?;
        if claimed.is_empty() {
            return Ok(completed);
        }
        let leases: Vec<Lease> = claimed.iter().map(|job| job.lease).collect();
        let lost = queue.complete_many(&leases).await?;
        if !lost.is_empty() {
            anyhow::bail!("{} leases were lost during a ceiling round", lost.len());
        }
        completed += leases.len();
    }
}

/// Enqueues `jobs` no-op jobs in transactions of [`ENQUEUE_BATCH`], timing only the enqueues.
pub(super) async fn enqueue_noops(
    pool: &sqlx::PgPool,
    jobs: usize,
    tally: &mut EnqueueTally,
) -> anyhow::Result<()> {
    let batches: Vec<Vec<NewJob>> = (0..jobs)
        .collect::<Vec<_>>()
        .chunks(ENQUEUE_BATCH)
        .map(|chunk| {
            chunk
                .iter()
                .map(|&i| NewJob::new(NOOP, serde_json::json!({ "i": i })))
                .collect()
        })
        .collect();
    let started = Instant::now();
    for batch in &batches {
        let mut tx = pool.begin().await.context("starting an enqueue")?;
        enqueue_many(&mut tx, batch)
            .await
            .context("enqueueing a batch")?;
        tx.commit().await.context("committing an enqueue")?;
    }
    tally.elapsed += started.elapsed();
    tally.jobs += jobs;
    Ok(())
}

/// Waits until no job is `ready` or `running`.
///
/// Asked through the partial indexes of ready and running jobs, with sequential scans off for
/// that transaction: a `count(*)` over the status (as this check once was) reads the whole
/// table, every earlier round's `done` rows too, and took tens of milliseconds at the end of
/// every round, which the round's clock counted as the runtime's.
async fn wait_until_drained(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    loop {
        let mut tx = pool.begin().await.context("starting the drain check")?;
        sqlx::query("set local enable_seqscan = off")
            .execute(&mut *tx)
            .await
            .context("steering the drain check to the indexes")?;
        let open: bool = sqlx::query_scalar(
            "select exists (select from jobs where status = 'running')
                 or exists (select from jobs where status = 'ready')",
        )
        .fetch_one(&mut *tx)
        .await
        .context("looking for unfinished jobs")?;
        tx.commit().await.context("ending the drain check")?;
        if !open {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
