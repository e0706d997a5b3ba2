//! The worker runtime against a real PostgreSQL: exactly-once without faults, wake-ups by
//! NOTIFY and by polling, leases lost and kept, a killed worker process, shutdown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket::queue::{self, JobId, NewJob, Queue};
use docket::worker::{JobError, Outcome, Registry, Worker, WorkerConfig};
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::support::{database_url, enqueue, job_state, wait_until};

fn config(lease: Duration) -> WorkerConfig {
    let mut config = WorkerConfig::for_lease(lease);
    config.poll_interval = Duration::from_millis(200);
    config
}

async fn count(pool: &PgPool, status: &str) -> i64 {
    sqlx::query_scalar("select count(*) from jobs where status = $1")
        .bind(status)
        .fetch_one(pool)
        .await
        .expect("count")
}

/// Starts `worker` in the background; cancel the token to stop it, await the handle to join.
fn start(worker: Worker) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let handle = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
    (stop, handle)
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn eight_workers_complete_ten_thousand_jobs_exactly_once(pool: PgPool) {
    const JOBS: usize = 10_000;
    let mut conn = pool.acquire().await.expect("conn");
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|i| NewJob::new("count", json!({ "i": i })))
        .collect();
    for chunk in jobs.chunks(1000) {
        queue::enqueue_many(&mut conn, chunk)
            .await
            .expect("enqueue");
    }
    drop(conn);

    let runs: Arc<Mutex<HashMap<JobId, u32>>> = Arc::default();
    let mut workers = Vec::new();
    for _ in 0..8 {
        let runs = runs.clone();
        let mut registry = Registry::new();
        registry.register("count", 4, move |job| {
            let runs = runs.clone();
            async move {
                *runs.lock().expect("lock").entry(job.id).or_default() += 1;
                Ok(Outcome::Complete)
            }
        });
        // Each worker has its own small pool, as separate processes would.
        let own_pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect_with(pool.connect_options().as_ref().clone())
            .await
            .expect("worker pool");
        let queue = Queue::new(own_pool, Duration::from_secs(60));
        workers.push(start(Worker::new(
            queue,
            registry,
            config(Duration::from_secs(60)),
        )));
    }
    wait_until(Duration::from_secs(120), "all jobs done", || async {
        count(&pool, "done").await == JOBS as i64
    })
    .await;
    for (stop, handle) in workers {
        stop.cancel();
        handle.await.expect("worker stops");
    }
    let runs = std::mem::take(&mut *runs.lock().expect("lock"));
    assert_eq!(runs.len(), JOBS, "every job ran");
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "jobs ran more than once: {twice:?}");
    assert_eq!(count(&pool, "running").await, 0);
    let attempts: i64 = sqlx::query_scalar("select count(*) from jobs where attempts <> 1")
        .fetch_one(&pool)
        .await
        .expect("attempts");
    assert_eq!(attempts, 0);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_kind_never_runs_more_jobs_than_its_concurrency(pool: PgPool) {
    let mut conn = pool.acquire().await.expect("conn");
    let jobs: Vec<NewJob> = (0..60)
        .map(|i| NewJob::new("limited", json!({ "i": i })))
        .collect();
    queue::enqueue_many(&mut conn, &jobs)
        .await
        .expect("enqueue");
    drop(conn);
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let peak_in_db = Arc::new(AtomicUsize::new(0));
    let mut registry = Registry::new();
    {
        let (running, peak, peak_in_db, pool) = (
            running.clone(),
            peak.clone(),
            peak_in_db.clone(),
            pool.clone(),
        );
        registry.register("limited", 3, move |_job| {
            let (running, peak, peak_in_db, pool) = (
                running.clone(),
                peak.clone(),
                peak_in_db.clone(),
                pool.clone(),
            );
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let leased = count(&pool, "running").await as usize;
                peak_in_db.fetch_max(leased, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(Outcome::Complete)
            }
        });
    }
    let mut cfg = config(Duration::from_secs(60));
    cfg.claim_batch = 10;
    let (stop, handle) = start(Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        cfg,
    ));
    wait_until(Duration::from_secs(60), "all done", || async {
        count(&pool, "done").await == 60
    })
    .await;
    stop.cancel();
    handle.await.expect("stops");
    assert!(
        peak.load(Ordering::SeqCst) <= 3,
        "handlers at once: {}",
        peak.load(Ordering::SeqCst)
    );
    assert!(
        peak_in_db.load(Ordering::SeqCst) <= 3,
        "claimed more than free capacity: {} running",
        peak_in_db.load(Ordering::SeqCst)
    );
}

/// Waits until this database has a session listening for jobs.
async fn wait_for_listener(pool: &PgPool) {
    wait_until(Duration::from_secs(10), "the worker LISTENs", || async {
        let n: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity
             where datname = current_database() and query ilike 'listen%'",
        )
        .fetch_one(pool)
        .await
        .expect("pg_stat_activity");
        n > 0
    })
    .await;
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn notify_wakes_an_idle_worker_long_before_the_poll_interval(pool: PgPool) {
    let poll = Duration::from_secs(300);
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let mut registry = Registry::new();
    registry.register("wake", 1, move |job| {
        let started_tx = started_tx.clone();
        async move {
            let _ = started_tx.send(job.id);
            Ok(Outcome::Complete)
        }
    });
    let mut cfg = config(Duration::from_secs(60));
    cfg.poll_interval = poll;
    let (stop, handle) = start(Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        cfg,
    ));
    wait_for_listener(&pool).await;
    // The producer's first claim found nothing; from here only a notification or the
    // five-minute poll can wake it.
    let id = enqueue(&pool, NewJob::new("wake", json!({}))).await;
    let woke = tokio::select! {
        got = started.recv() => got,
        () = tokio::time::sleep(poll) => None,
    };
    assert_eq!(
        woke,
        Some(id),
        "the handler started before the poll interval: NOTIFY woke it"
    );
    stop.cancel();
    handle.await.expect("stops");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn polling_alone_drains_the_queue_when_notifications_are_lost(pool: PgPool) {
    let mut registry = Registry::new();
    registry.register("poll", 4, |_job| async { Ok(Outcome::Complete) });
    let mut cfg = config(Duration::from_secs(60));
    cfg.listen = false;
    cfg.poll_interval = Duration::from_millis(50);
    let (stop, handle) = start(Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        cfg,
    ));
    for i in 0..20 {
        enqueue(&pool, NewJob::new("poll", json!({ "i": i }))).await;
    }
    wait_until(Duration::from_secs(30), "polling drains", || async {
        count(&pool, "done").await == 20
    })
    .await;
    let listening: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity where datname = current_database() and query ilike 'listen%'",
    )
    .fetch_one(&pool)
    .await
    .expect("activity");
    assert_eq!(listening, 0, "this worker must not have used LISTEN");
    stop.cancel();
    handle.await.expect("stops");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn lost_lease_stops_the_handler_and_discards_its_result(pool: PgPool) {
    let wrote = Arc::new(AtomicBool::new(false));
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let mut registry = Registry::new();
    {
        let wrote = wrote.clone();
        registry.register("slow", 1, move |_job| {
            let (wrote, started_tx) = (wrote.clone(), started_tx.clone());
            async move {
                let _ = started_tx.send(());
                tokio::time::sleep(Duration::from_secs(30)).await;
                wrote.store(true, Ordering::SeqCst);
                Ok(Outcome::Complete)
            }
        });
    }
    let mut cfg = config(Duration::from_secs(3));
    cfg.heartbeat = Duration::from_millis(50);
    let queue = Queue::new(pool.clone(), Duration::from_secs(3));
    let (stop, handle) = start(Worker::new(queue.clone(), registry, cfg));
    let id = enqueue(&pool, NewJob::new("slow", json!({}))).await;
    started.recv().await.expect("handler started");
    queue.cancel(id).await.expect("cancel");
    // The heartbeat finds the lease gone and stops the handler, so shutdown is immediate even
    // though the handler would sleep 30 s.
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), handle)
        .await
        .expect("the worker stops without waiting for the cancelled handler")
        .expect("join");
    assert!(
        !wrote.load(Ordering::SeqCst),
        "the handler was stopped before writing"
    );
    assert_eq!(job_state(&pool, id).await.0, "cancelled");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn heartbeat_keeps_a_job_longer_than_its_lease(pool: PgPool) {
    let mut registry = Registry::new();
    registry.register("long", 1, |_job| async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        Ok(Outcome::Complete)
    });
    let lease = Duration::from_millis(400);
    let mut cfg = config(lease);
    cfg.heartbeat = Duration::from_millis(100);
    let queue = Queue::new(pool.clone(), lease);
    let (stop, handle) = start(Worker::new(queue.clone(), registry, cfg));
    let id = enqueue(&pool, NewJob::new("long", json!({}))).await;
    let rescued = Arc::new(AtomicUsize::new(0));
    wait_until(Duration::from_secs(30), "the long job is done", || {
        let (queue, pool, rescued) = (queue.clone(), pool.clone(), rescued.clone());
        async move {
            let r = queue.rescue_expired(10).await.expect("rescue");
            rescued.fetch_add((r.requeued + r.dead) as usize, Ordering::SeqCst);
            job_state(&pool, id).await.0 == "done"
        }
    })
    .await;
    let rescued = rescued.load(Ordering::SeqCst);
    assert_eq!(
        rescued, 0,
        "the rescuer took a job whose lease was being extended"
    );
    assert_eq!(job_state(&pool, id).await.1, 1);
    stop.cancel();
    handle.await.expect("stops");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn shutdown_hands_unfinished_jobs_back_without_spending_an_attempt(pool: PgPool) {
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let mut registry = Registry::new();
    registry.register("slow", 2, move |job| {
        let started_tx = started_tx.clone();
        async move {
            let _ = started_tx.send(());
            let ms = job.payload["ms"].as_u64().unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(Outcome::Complete)
        }
    });
    let mut cfg = config(Duration::from_secs(60));
    cfg.shutdown_grace = Duration::from_millis(500);
    let (stop, handle) = start(Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        cfg,
    ));
    let quick = enqueue(&pool, NewJob::new("slow", json!({ "ms": 100 }))).await;
    let stuck = enqueue(&pool, NewJob::new("slow", json!({ "ms": 600_000 }))).await;
    started.recv().await.expect("first started");
    started.recv().await.expect("second started");
    stop.cancel();
    handle.await.expect("stops");
    assert_eq!(
        job_state(&pool, quick).await,
        ("done".to_owned(), 1, 0),
        "finished within the grace period"
    );
    assert_eq!(
        job_state(&pool, stuck).await,
        ("ready".to_owned(), 0, 0),
        "handed back, attempt not spent"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_stop_while_the_database_is_away_still_ends(pool: PgPool) {
    let (ran_tx, mut ran) = tokio::sync::mpsc::unbounded_channel();
    let mut registry = Registry::new();
    let closing = pool.clone();
    registry.register("last", 1, move |_job| {
        let (pool, ran_tx) = (closing.clone(), ran_tx.clone());
        async move {
            // The database goes away between the handler's end and its acknowledgement.
            pool.close().await;
            let _ = ran_tx.send(());
            Ok(Outcome::Complete)
        }
    });
    let mut cfg = config(Duration::from_secs(60));
    cfg.listen = false;
    cfg.shutdown_grace = Duration::from_millis(500);
    enqueue(&pool, NewJob::new("last", json!({}))).await;
    let (stop, handle) = start(Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        cfg,
    ));
    ran.recv().await.expect("the handler ran");
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(15), handle)
        .await
        .expect("the worker stops although its completions cannot be written")
        .expect("worker task");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_job_this_process_cannot_run_goes_back_without_spending_an_attempt(pool: PgPool) {
    let mut registry = Registry::new();
    registry.register("picky", 1, |_job| async {
        Err(JobError::Elsewhere {
            reason: "needs a worker with another model".into(),
        })
    });
    let lease = Duration::from_secs(30);
    let worker = Worker::new(Queue::new(pool.clone(), lease), registry, config(lease));
    let id = enqueue(&pool, NewJob::new("picky", json!({}))).await;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(job_state(&pool, id).await, ("ready".to_owned(), 0, 0));
    let (due_later, last_error): (bool, Option<String>) =
        sqlx::query_as("select run_at > now(), last_error from jobs where id = $1")
            .bind(id.0)
            .fetch_one(&pool)
            .await
            .expect("job");
    assert!(
        due_later,
        "not straight back to the process that cannot run it"
    );
    assert_eq!(
        last_error.as_deref(),
        Some("needs a worker with another model")
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_panicking_handler_is_retried_and_the_worker_keeps_going(pool: PgPool) {
    let mut registry = Registry::new();
    registry.register("boom", 1, |job| async move {
        if job.payload["panic"].as_bool().unwrap_or(false) {
            panic!("malformed input exploded");
        }
        Ok(Outcome::Complete)
    });
    registry.register("fatal", 1, |_job| async {
        Err(JobError::Fatal(anyhow::anyhow!("no text layer (scanned?)")))
    });
    let worker = Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        config(Duration::from_secs(60)),
    );
    let bad = enqueue(
        &pool,
        NewJob::new("boom", json!({ "panic": true })).max_attempts(1),
    )
    .await;
    let good = enqueue(&pool, NewJob::new("boom", json!({ "panic": false }))).await;
    let fatal = enqueue(&pool, NewJob::new("fatal", json!({}))).await;
    assert_eq!(worker.run_until_idle().await.expect("run"), 3);
    let queue = Queue::new(pool.clone(), Duration::from_secs(60));
    let bad = queue.get(bad).await.expect("job");
    assert_eq!(bad.status, "dead");
    assert!(
        bad.last_error
            .unwrap_or_default()
            .contains("malformed input exploded")
    );
    assert_eq!(job_state(&pool, good).await.0, "done");
    let fatal = queue.get(fatal).await.expect("job");
    assert_eq!((fatal.status.as_str(), fatal.attempts), ("dead", 1));
    assert_eq!(
        fatal.last_error.as_deref(),
        Some("no text layer (scanned?)")
    );
}

/// A real `docket worker` process is killed with SIGKILL while it holds a job; once the lease
/// expires the rescuer hands the job out again and another worker finishes it.
#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_killed_worker_process_loses_nothing(pool: PgPool) {
    let id = enqueue(&pool, NewJob::new("sleep", json!({ "ms": 600_000 }))).await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_docket"))
        .arg("worker")
        .env("DATABASE_URL", database_url(&pool).await)
        .env("DOCKET_LEASE_SECS", "3")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .expect("start docket worker");
    let pid = child.id().expect("child pid");
    wait_until(
        Duration::from_secs(60),
        "the child claims the job",
        || async {
            let leased_by: Option<String> = sqlx::query_scalar(
                "select leased_by from jobs where id = $1 and status = 'running'",
            )
            .bind(id.0)
            .fetch_optional(&pool)
            .await
            .expect("job")
            .flatten();
            leased_by.is_some_and(|w| w.starts_with(&format!("worker-{pid}-")))
        },
    )
    .await;
    child.start_kill().expect("SIGKILL");
    let status = child.wait().await.expect("child exits");
    assert!(!status.success(), "killed, not exited");

    let queue = Queue::new(pool.clone(), Duration::from_secs(60));
    assert_eq!(
        job_state(&pool, id).await.0,
        "running",
        "the dead worker's lease still stands"
    );
    wait_until(
        Duration::from_secs(30),
        "the lease expires and the job is rescued",
        || async { queue.rescue_expired(10).await.expect("rescue").requeued == 1 },
    )
    .await;
    let mut registry = Registry::new();
    registry.register("sleep", 1, |_job| async { Ok(Outcome::Complete) });
    let survivor = Worker::new(queue.clone(), registry, config(Duration::from_secs(60)));
    assert_eq!(survivor.run_until_idle().await.expect("run"), 1);
    let job = queue.get(id).await.expect("job");
    assert_eq!((job.status.as_str(), job.attempts), ("done", 2));
    assert!(job.errors.to_string().contains("lease expired"));
}
