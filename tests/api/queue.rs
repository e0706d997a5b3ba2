//! The queue's contract against a real PostgreSQL: claims, fencing, retries, idempotency,
//! transactional enqueue, rescue, retention, and the claim plan. Time moves by handing the
//! queue a later instant ([`Queue::at`]), never by rewriting rows.

use std::time::Duration;

use docket::queue::{self, CLAIM_SQL, JobId, JobStatus, NewJob, Queue, QueueError, RetryPolicy};
use serde_json::json;
use sqlx::PgPool;

use crate::support::{enqueue, job_state};

fn queue(pool: &PgPool) -> Queue {
    Queue::new(pool.clone(), Duration::from_secs(30))
}

/// The queue a second after every lease taken now has run out.
fn after_leases(q: &Queue) -> Queue {
    q.at(chrono::Utc::now() + q.lease() + Duration::from_secs(1))
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn stale_lease_cannot_complete_retry_or_extend(pool: PgPool) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("noop", json!({}))).await;
    let first = q.claim("noop", 1, "first").await.expect("claim").remove(0);

    let later = after_leases(&q);
    let rescued = later.rescue_expired(10).await.expect("rescue");
    assert_eq!(rescued.requeued, 1);
    let second = later
        .claim("noop", 1, "second")
        .await
        .expect("claim")
        .remove(0);
    assert_eq!(second.lease.job_id, id);
    assert_ne!(second.lease.token, first.lease.token);

    let stale = first.lease;
    assert!(matches!(
        q.complete(&stale).await,
        Err(QueueError::LeaseLost(_))
    ));
    assert!(matches!(
        q.retry(&stale, "late", Duration::ZERO, true).await,
        Err(QueueError::LeaseLost(_))
    ));
    assert!(matches!(
        q.fail(&stale, "late").await,
        Err(QueueError::LeaseLost(_))
    ));
    assert_eq!(q.extend(&[stale]).await.expect("extend"), vec![stale]);
    assert_eq!(q.complete_many(&[stale]).await.expect("ack"), vec![stale]);
    assert_eq!(
        job_state(&pool, id).await.0,
        "running",
        "the stale worker changed nothing"
    );

    q.complete(&second.lease)
        .await
        .expect("the current lease completes");
    assert_eq!(job_state(&pool, id).await.0, "done");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn rescue_does_not_overwrite_a_completion_that_landed_first(pool: PgPool) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("noop", json!({}))).await;
    let claimed = q.claim("noop", 1, "w").await.expect("claim").remove(0);
    q.complete(&claimed.lease)
        .await
        .expect("complete before the rescuer runs");
    let rescued = after_leases(&q).rescue_expired(10).await.expect("rescue");
    assert_eq!((rescued.requeued, rescued.dead), (0, 0));
    assert_eq!(job_state(&pool, id).await.0, "done");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn expired_lease_on_the_last_attempt_goes_dead_with_its_reason(pool: PgPool) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("noop", json!({})).max_attempts(1)).await;
    q.claim("noop", 1, "w").await.expect("claim");
    assert_eq!(
        q.rescue_expired(10).await.expect("rescue"),
        Default::default()
    );
    let rescued = after_leases(&q).rescue_expired(10).await.expect("rescue");
    assert_eq!((rescued.requeued, rescued.dead), (0, 1));
    let job = q.get(id).await.expect("job");
    assert_eq!(job.status, "dead");
    assert!(job.last_error.unwrap_or_default().contains("lease expired"));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn rescue_works_in_batches(pool: PgPool) {
    let q = queue(&pool);
    let mut conn = pool.acquire().await.expect("conn");
    let jobs: Vec<NewJob> = (0..25)
        .map(|i| NewJob::new("noop", json!({ "i": i })))
        .collect();
    queue::enqueue_many(&mut conn, &jobs)
        .await
        .expect("enqueue");
    q.claim("noop", 25, "w").await.expect("claim");
    let later = after_leases(&q);
    assert_eq!(later.rescue_expired(10).await.expect("rescue").requeued, 10);
    docket::maintenance::rescue_all(&later, 10).await;
    let ready: i64 = sqlx::query_scalar("select count(*) from jobs where status = 'ready'")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(ready, 25);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn transient_failures_back_off_with_growing_jittered_delays(pool: PgPool) {
    let q = queue(&pool);
    let policy = RetryPolicy {
        initial: Duration::from_secs(10),
        multiplier: 4.0,
        jitter: 0.5,
        max: Duration::from_secs(1_000_000),
    };
    let ids: Vec<JobId> = {
        let mut ids = Vec::new();
        for i in 0..5 {
            ids.push(
                enqueue(
                    &pool,
                    NewJob::new("flaky", json!({ "i": i })).max_attempts(10),
                )
                .await,
            );
        }
        ids
    };
    // delays[attempt][job]
    let mut delays: Vec<Vec<f64>> = Vec::new();
    // Every delay here is due within a day.
    let tomorrow = q.at(chrono::Utc::now() + chrono::Duration::days(1));
    for attempt in 1..=4 {
        let claimed = tomorrow.claim("flaky", 10, "w").await.expect("claim");
        assert_eq!(claimed.len(), ids.len());
        for job in &claimed {
            assert_eq!(job.attempt, attempt);
            let delay = policy.delay(job.attempt);
            let status = q
                .retry(&job.lease, "connection reset", delay, true)
                .await
                .expect("retry");
            assert_eq!(status, JobStatus::Ready);
        }
        let waits: Vec<f64> = sqlx::query_scalar(
            "select extract(epoch from run_at - updated_at)::float8 from jobs order by id",
        )
        .fetch_all(&pool)
        .await
        .expect("delays");
        delays.push(waits);
        assert!(
            q.claim("flaky", 10, "w").await.expect("claim").is_empty(),
            "nothing is due before its delay"
        );
    }
    for (attempt, pair) in delays.windows(2).enumerate() {
        for (job, (before, after)) in pair[0].iter().zip(&pair[1]).enumerate() {
            assert!(
                after > before,
                "job {job}: delay after attempt {} ({after:.1}s) is not longer than after attempt {} ({before:.1}s)",
                attempt + 2,
                attempt + 1,
            );
        }
        let attempt = attempt + 1;
        let distinct: std::collections::BTreeSet<u64> = delays[attempt]
            .iter()
            .map(|d| (d * 1000.0) as u64)
            .collect();
        assert!(
            distinct.len() > 1,
            "five jobs got the same delay: no jitter"
        );
    }
    let (_, attempts, history) = job_state(&pool, ids[0]).await;
    assert_eq!((attempts, history), (4, 4));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn max_attempts_leads_to_dead_with_the_error_history(pool: PgPool) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("flaky", json!({})).max_attempts(3)).await;
    for attempt in 1..=3 {
        let job = q.claim("flaky", 1, "w").await.expect("claim").remove(0);
        let status = q
            .retry(
                &job.lease,
                &format!("timeout on attempt {attempt}"),
                Duration::ZERO,
                true,
            )
            .await
            .expect("retry");
        assert_eq!(
            status,
            if attempt < 3 {
                JobStatus::Ready
            } else {
                JobStatus::Dead
            }
        );
    }
    let job = q.get(id).await.expect("job");
    assert_eq!(job.status, "dead");
    let errors: Vec<String> = job
        .errors
        .as_array()
        .expect("array")
        .iter()
        .map(|e| e["error"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        errors,
        [
            "timeout on attempt 1",
            "timeout on attempt 2",
            "timeout on attempt 3"
        ]
    );

    // A person's retry starts a fresh run: attempt 1 of the original 3 again (so its backoff
    // starts from the first step), the history of the earlier run kept.
    let retried = q.retry_dead(id).await.expect("retry dead");
    assert_eq!(retried.status, "ready");
    assert_eq!((retried.attempts, retried.max_attempts), (0, 3));
    assert_eq!(retried.retries, 1);
    assert!(retried.last_error.is_none());
    let job = q.claim("flaky", 1, "w").await.expect("claim").remove(0);
    assert_eq!(job.attempt, 1);
    q.complete(&job.lease).await.expect("complete");
    let (status, attempts, history) = job_state(&pool, id).await;
    assert_eq!((status.as_str(), attempts, history), ("done", 1, 3));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn every_retry_of_a_dead_job_gives_its_original_budget_again_and_counts_the_retries(
    pool: PgPool,
) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("flaky", json!({})).max_attempts(3)).await;
    // Forty rounds of "it died again, a person retries it": doubling the budget each time
    // would pass int4 after about thirty.
    for round in 1..=40 {
        sqlx::query(
            "update jobs
             set status = 'dead', attempts = max_attempts, finished_at = now()
             where id = $1",
        )
        .bind(id.0)
        .execute(&pool)
        .await
        .expect("dies again");
        let retried = q
            .retry_dead(id)
            .await
            .unwrap_or_else(|err| panic!("retry in round {round}: {err}"));
        assert_eq!(
            (retried.attempts, retried.max_attempts, retried.retries),
            (0, 3, round),
            "round {round}"
        );
    }
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn permanent_failure_is_dead_at_once(pool: PgPool) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("parse", json!({}))).await;
    let job = q.claim("parse", 1, "w").await.expect("claim").remove(0);
    q.fail(&job.lease, "the PDF is malformed: no xref table")
        .await
        .expect("fail");
    let record = q.get(id).await.expect("job");
    assert_eq!((record.status.as_str(), record.attempts), ("dead", 1));
    assert_eq!(
        record.last_error.as_deref(),
        Some("the PDF is malformed: no xref table")
    );
    assert!(matches!(
        q.retry_dead(JobId(id.0 + 1000)).await,
        Err(QueueError::NotFound(_))
    ));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn rate_limited_retry_gives_the_attempt_back(pool: PgPool) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("embed", json!({})).max_attempts(1)).await;
    for _ in 0..3 {
        let job = q.claim("embed", 1, "w").await.expect("claim").remove(0);
        assert_eq!(job.attempt, 1);
        let status = q
            .retry(&job.lease, "429 Too Many Requests", Duration::ZERO, false)
            .await
            .expect("snooze");
        assert_eq!(
            status,
            JobStatus::Ready,
            "waiting is not failing, even on the last attempt"
        );
    }
    assert_eq!(job_state(&pool, id).await, ("ready".to_owned(), 0, 0));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn same_idempotency_key_gives_one_job(pool: PgPool) {
    let job = NewJob::new("noop", json!({ "doc": 1 })).idempotency_key("extract:doc-1");
    let mut conn = pool.acquire().await.expect("conn");
    let first = queue::enqueue(&mut conn, &job).await.expect("first");
    let second = queue::enqueue(&mut conn, &job).await.expect("second");
    assert!(first.created && !second.created);
    assert_eq!(first.id, second.id);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn concurrent_enqueues_of_one_key_give_one_job(pool: PgPool) {
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut tx = pool.begin().await.expect("begin");
                let job = NewJob::new("noop", json!({})).idempotency_key("same-work");
                let enqueued = queue::enqueue(&mut tx, &job).await.expect("enqueue");
                tx.commit().await.expect("commit");
                enqueued
            })
        })
        .collect();
    let mut ids = std::collections::BTreeSet::new();
    let mut created = 0;
    for task in tasks {
        let enqueued = task.await.expect("task");
        ids.insert(enqueued.id);
        created += usize::from(enqueued.created);
    }
    assert_eq!(ids.len(), 1);
    assert_eq!(created, 1);
    let count: i64 = sqlx::query_scalar("select count(*) from jobs")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 1);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn batch_enqueue_skips_existing_keys(pool: PgPool) {
    let mut conn = pool.acquire().await.expect("conn");
    let jobs: Vec<NewJob> = (0..10)
        .map(|i| NewJob::new("noop", json!({})).idempotency_key(format!("k{}", i % 5)))
        .collect();
    assert_eq!(
        queue::enqueue_many(&mut conn, &jobs[..5])
            .await
            .expect("first"),
        5
    );
    assert_eq!(
        queue::enqueue_many(&mut conn, &jobs).await.expect("second"),
        0
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn rolled_back_transaction_leaves_no_job(pool: PgPool) {
    let mut tx = pool.begin().await.expect("begin");
    queue::enqueue(&mut tx, &NewJob::new("noop", json!({})))
        .await
        .expect("enqueue");
    queue::enqueue_many(&mut tx, &[NewJob::new("noop", json!({}))])
        .await
        .expect("enqueue many");
    tx.rollback().await.expect("rollback");
    let count: i64 = sqlx::query_scalar("select count(*) from jobs")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 0);

    let mut tx = pool.begin().await.expect("begin");
    queue::enqueue(&mut tx, &NewJob::new("noop", json!({})))
        .await
        .expect("enqueue");
    tx.commit().await.expect("commit");
    let count: i64 = sqlx::query_scalar("select count(*) from jobs")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, 1);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn delayed_job_is_not_claimed_before_its_time(pool: PgPool) {
    let q = queue(&pool);
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    enqueue(&pool, NewJob::new("noop", json!({})).run_at(later)).await;
    assert!(q.claim("noop", 10, "w").await.expect("claim").is_empty());
    let just_before = q.at(later - chrono::Duration::seconds(1));
    assert!(
        just_before
            .claim("noop", 10, "w")
            .await
            .expect("claim")
            .is_empty()
    );
    assert_eq!(
        q.at(later)
            .claim("noop", 10, "w")
            .await
            .expect("claim")
            .len(),
        1
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn claims_never_hand_one_job_to_two_workers(pool: PgPool) {
    let mut conn = pool.acquire().await.expect("conn");
    let jobs: Vec<NewJob> = (0..500)
        .map(|i| NewJob::new("noop", json!({ "i": i })))
        .collect();
    queue::enqueue_many(&mut conn, &jobs)
        .await
        .expect("enqueue");
    let tasks: Vec<_> = (0..8)
        .map(|w| {
            let q = queue(&pool);
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let claimed = q.claim("noop", 7, &format!("w{w}")).await.expect("claim");
                    if claimed.is_empty() {
                        return mine;
                    }
                    mine.extend(claimed.into_iter().map(|j| j.lease.job_id));
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    let distinct: std::collections::BTreeSet<JobId> = all.iter().copied().collect();
    assert_eq!(all.len(), 500);
    assert_eq!(distinct.len(), 500);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn cancel_stops_a_ready_job_and_fences_a_running_one(pool: PgPool) {
    let q = queue(&pool);
    let ready = enqueue(&pool, NewJob::new("a", json!({}))).await;
    let running = enqueue(&pool, NewJob::new("b", json!({}))).await;
    let job = q.claim("b", 1, "w").await.expect("claim").remove(0);
    assert_eq!(q.cancel(ready).await.expect("cancel").status, "cancelled");
    assert_eq!(q.cancel(running).await.expect("cancel").status, "cancelled");
    assert!(matches!(
        q.complete(&job.lease).await,
        Err(QueueError::LeaseLost(_))
    ));
    assert!(matches!(
        q.cancel(ready).await,
        Err(QueueError::WrongState { .. })
    ));
    assert!(q.claim("a", 1, "w").await.expect("claim").is_empty());
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn retention_prunes_old_done_jobs_in_batches_and_keeps_dead_ones(pool: PgPool) {
    sqlx::query(
        "insert into jobs (kind, status, finished_at, attempts)
         select 'noop', case when i % 10 = 0 then 'dead' else 'done' end,
                now() - interval '10 days', 1
         from generate_series(1, 250) as i",
    )
    .execute(&pool)
    .await
    .expect("seed");
    enqueue(&pool, NewJob::new("noop", json!({}))).await;
    let q = queue(&pool);
    assert_eq!(
        q.prune_done(Duration::from_secs(7 * 24 * 3600), 100)
            .await
            .expect("prune"),
        100
    );
    let mut total = 100;
    loop {
        let n = q
            .prune_done(Duration::from_secs(7 * 24 * 3600), 100)
            .await
            .expect("prune");
        total += n;
        if n == 0 {
            break;
        }
    }
    assert_eq!(total, 225);
    let left: Vec<(String, i64)> =
        sqlx::query_as("select status, count(*) from jobs group by status order by status")
            .fetch_all(&pool)
            .await
            .expect("count");
    assert_eq!(left, [("dead".to_owned(), 25), ("ready".to_owned(), 1)]);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn error_history_is_bounded(pool: PgPool) {
    let q = queue(&pool);
    let id = enqueue(&pool, NewJob::new("flaky", json!({})).max_attempts(100)).await;
    for attempt in 1..=25 {
        let job = q.claim("flaky", 1, "w").await.expect("claim").remove(0);
        q.retry(
            &job.lease,
            &format!("failure {attempt}"),
            Duration::ZERO,
            true,
        )
        .await
        .expect("retry");
    }
    let job = q.get(id).await.expect("job");
    let errors = job.errors.as_array().expect("array");
    assert_eq!(errors.len(), 20);
    assert_eq!(errors[0]["error"], "failure 6");
    assert_eq!(errors[19]["error"], "failure 25");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn oversized_payload_and_bad_kind_are_refused(pool: PgPool) {
    let mut conn = pool.acquire().await.expect("conn");
    let big = NewJob::new("noop", json!({ "blob": "x".repeat(70 * 1024) }));
    assert!(matches!(
        queue::enqueue(&mut conn, &big).await,
        Err(QueueError::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        queue::enqueue(&mut conn, &NewJob::new("", json!({}))).await,
        Err(QueueError::Invalid(_))
    ));
}

/// The plan of the claim statement on a table of 100,000 done rows: it must read the partial
/// index of ready jobs (by kind and fair key), under a custom and under a generic plan (sqlx prepares statements,
/// and PostgreSQL switches to a generic plan after five runs).
#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn claim_uses_the_partial_index_on_a_large_table(pool: PgPool) {
    sqlx::query(
        "insert into jobs (kind, status, attempts, finished_at)
         select 'noop', 'done', 1, now() from generate_series(1, 100000)",
    )
    .execute(&pool)
    .await
    .expect("seed done rows");
    let mut conn = pool.acquire().await.expect("conn");
    let jobs: Vec<NewJob> = (0..200)
        .map(|i| NewJob::new("noop", json!({ "i": i })))
        .collect();
    queue::enqueue_many(&mut conn, &jobs)
        .await
        .expect("enqueue");
    sqlx::query("analyze jobs")
        .execute(&mut *conn)
        .await
        .expect("analyze");

    sqlx::query(sqlx::AssertSqlSafe(format!(
        "prepare claim(text, bigint, float8, text, text, text[], timestamptz) as {CLAIM_SQL}"
    )))
    .execute(&mut *conn)
    .await
    .expect("prepare");
    for mode in ["auto", "force_generic_plan", "force_custom_plan"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("set plan_cache_mode = {mode}")))
            .execute(&mut *conn)
            .await
            .expect("set plan mode");
        let plan: serde_json::Value = sqlx::query_scalar(
            "explain (format json) execute claim('noop', 10, 60000, 'w', null, null, null)",
        )
        .fetch_one(&mut *conn)
        .await
        .expect("explain");
        let text = plan.to_string();
        assert!(
            text.contains("jobs_ready_fair_idx"),
            "{mode}: the claim does not use jobs_ready_fair_idx: {text}"
        );
        assert!(
            !text.contains("Seq Scan"),
            "{mode}: the claim scans the table: {text}"
        );
    }
    // And it really claims.
    let q = queue(&pool);
    assert_eq!(q.claim("noop", 10, "w").await.expect("claim").len(), 10);
}

/// The claim commits asynchronously on the queue's own claim connections: the statement carries
/// no setting, so the queue's pool stays synchronous after claims, and running the statement
/// inside a caller's transaction leaves that transaction synchronous.
#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_claim_commits_asynchronously_and_leaves_the_connection_synchronous(pool: PgPool) {
    enqueue(&pool, NewJob::new("noop", json!({}))).await;
    enqueue(&pool, NewJob::new("noop", json!({}))).await;
    let show = "select current_setting('synchronous_commit')";
    // One connection, so the claim and the checks share it.
    let single = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(pool.connect_options().as_ref().clone())
        .await
        .expect("a one-connection pool");
    let q = Queue::new(single.clone(), Duration::from_secs(30));
    assert_eq!(q.claim("noop", 1, "w").await.expect("claim").len(), 1);
    let after: String = sqlx::query_scalar(show)
        .fetch_one(&single)
        .await
        .expect("show");
    assert_eq!(
        after, "on",
        "the setting ended with the claim's transaction"
    );

    let mut conn = pool.acquire().await.expect("conn");
    let mut tx = sqlx::Connection::begin(&mut *conn).await.expect("begin");
    let claimed = sqlx::query(CLAIM_SQL)
        .bind("noop")
        .bind(1_i64)
        .bind(30_000.0_f64)
        .bind("w")
        .bind(None::<&str>)
        .bind(None::<Vec<String>>)
        .bind(None::<chrono::DateTime<chrono::Utc>>)
        .fetch_all(&mut *tx)
        .await
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    let during: String = sqlx::query_scalar(show)
        .fetch_one(&mut *tx)
        .await
        .expect("show");
    assert_eq!(during, "on", "a caller's transaction stays synchronous");
    tx.commit().await.expect("commit");
}

/// Every enqueue names its attempt budget (`queue::DEFAULT_MAX_ATTEMPTS` unless told); the
/// table's own default serves only SQL-side inserts (a pg_cron firing) and must be the same.
#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn the_attempt_budget_has_one_default(pool: PgPool) {
    let id = enqueue(&pool, NewJob::new("noop", json!({}))).await;
    assert_eq!(
        queue(&pool).get(id).await.expect("job").max_attempts,
        queue::DEFAULT_MAX_ATTEMPTS
    );
    let column: String = sqlx::query_scalar(
        "select column_default from information_schema.columns
         where table_name = 'jobs' and column_name = 'max_attempts'",
    )
    .fetch_one(&pool)
    .await
    .expect("the column's default");
    assert_eq!(column, queue::DEFAULT_MAX_ATTEMPTS.to_string());
}
