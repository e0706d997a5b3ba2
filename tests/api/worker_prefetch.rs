//! A kind that prefetches against a real PostgreSQL: handlers stay within the kind's
//! concurrency while up to `prefetch` more jobs wait claimed, every job still runs once, and a
//! job that waits longer than its lease keeps it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket::queue::{self, JobId, NewJob, Queue};
use docket::worker::{Outcome, Registry, Worker, WorkerConfig};
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::support::wait_until;

async fn count(pool: &PgPool, status: &str) -> i64 {
    sqlx::query_scalar("select count(*) from jobs where status = $1")
        .bind(status)
        .fetch_one(pool)
        .await
        .expect("count")
}

async fn enqueue_many(pool: &PgPool, kind: &str, n: usize) {
    let mut conn = pool.acquire().await.expect("conn");
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new(kind, json!({ "i": i })))
        .collect();
    queue::enqueue_many(&mut conn, &jobs)
        .await
        .expect("enqueue");
}

/// Concurrency 2, prefetch 6: never more than 2 handlers at once, never more than 8 jobs
/// `running` in the table, and more than 2 at some point (the prefetch is real).
#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_prefetching_kind_runs_within_its_concurrency_and_holds_at_most_its_prefetch(
    pool: PgPool,
) {
    const JOBS: usize = 40;
    enqueue_many(&pool, "fetched", JOBS).await;
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let peak_in_db = Arc::new(AtomicUsize::new(0));
    let runs: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let mut registry = Registry::new();
    {
        let (running, peak, peak_in_db, runs, pool) = (
            running.clone(),
            peak.clone(),
            peak_in_db.clone(),
            runs.clone(),
            pool.clone(),
        );
        registry.register("fetched", 2, move |job| {
            let (running, peak, peak_in_db, runs, pool) = (
                running.clone(),
                peak.clone(),
                peak_in_db.clone(),
                runs.clone(),
                pool.clone(),
            );
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                *runs.lock().expect("lock").entry(job.id).or_default() += 1;
                let leased = count(&pool, "running").await as usize;
                peak_in_db.fetch_max(leased, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(Outcome::Complete)
            }
        });
    }
    registry.prefetch("fetched", 6);
    let mut cfg = WorkerConfig::for_lease(Duration::from_secs(60));
    cfg.poll_interval = Duration::from_millis(200);
    cfg.claim_batch = 8;
    let stop = CancellationToken::new();
    let worker = Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        cfg,
    );
    let handle = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
    wait_until(Duration::from_secs(60), "all done", || async {
        count(&pool, "done").await == JOBS as i64
    })
    .await;
    stop.cancel();
    handle.await.expect("stops");

    let peak = peak.load(Ordering::SeqCst);
    let peak_in_db = peak_in_db.load(Ordering::SeqCst);
    assert!(peak <= 2, "handlers at once: {peak}");
    assert!(
        peak_in_db <= 8,
        "claimed beyond concurrency + prefetch: {peak_in_db} running"
    );
    assert!(
        peak_in_db > 2,
        "nothing was prefetched: at most {peak_in_db} running"
    );
    let runs = std::mem::take(&mut *runs.lock().expect("lock"));
    assert_eq!(runs.len(), JOBS, "every job ran");
    assert!(runs.values().all(|n| *n == 1), "a job ran twice: {runs:?}");
}

/// Concurrency 1, prefetch 3, a lease of one second and handlers of 700 ms: the last of four
/// jobs claimed together waits over two seconds for its handler. The heartbeat keeps every
/// waiting lease, so a rescuer running all along finds nothing expired and each job runs once.
#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_prefetched_job_keeps_its_lease_while_it_waits_for_a_handler(pool: PgPool) {
    let lease = Duration::from_secs(1);
    enqueue_many(&pool, "slow", 4).await;
    let ran = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    {
        let ran = ran.clone();
        registry.register("slow", 1, move |_job| {
            let ran = ran.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(700)).await;
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(Outcome::Complete)
            }
        });
    }
    registry.prefetch("slow", 3);
    let mut cfg = WorkerConfig::for_lease(lease);
    cfg.claim_batch = 4;
    let queue = Queue::new(pool.clone(), lease);
    let stop = CancellationToken::new();
    let worker = Worker::new(queue.clone(), registry, cfg);
    let handle = tokio::spawn(worker.run(stop.clone().cancelled_owned()));

    let rescued = AtomicU64::new(0);
    wait_until(Duration::from_secs(30), "all four done", || async {
        let found = queue.rescue_expired(10).await.expect("rescue");
        rescued.fetch_add(found.requeued + found.dead, Ordering::SeqCst);
        count(&pool, "done").await == 4
    })
    .await;
    stop.cancel();
    handle.await.expect("stops");
    assert_eq!(
        rescued.load(Ordering::SeqCst),
        0,
        "a waiting job lost its lease"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 4);
    let attempts: Vec<i32> = sqlx::query_scalar("select attempts from jobs order by id")
        .fetch_all(&pool)
        .await
        .expect("attempts");
    assert_eq!(attempts, vec![1; 4]);
}
