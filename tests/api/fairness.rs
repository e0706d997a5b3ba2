//! Fair share of the workers: a claim gives each key (the pipeline's: a collection) with due
//! work its turn, fewest running first, so one collection's backlog never holds up another's
//! single file; unkeyed work is claimed oldest first, as before.

use std::collections::HashMap;
use std::time::Duration;

use docket::queue::{NewJob, Queue};
use serde_json::json;
use sqlx::PgPool;

use crate::access::upload_into;
use crate::support::{TestApp, enqueue};

fn queue(pool: &PgPool) -> Queue {
    Queue::new(pool.clone(), Duration::from_secs(30))
}

async fn enqueue_keyed(pool: &PgPool, key: &str, n: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for i in 0..n {
        let job = NewJob::new("noop", json!({ "n": i, "key": key })).fair_key(key);
        ids.push(enqueue(pool, job).await.0);
    }
    ids
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_single_job_of_another_key_is_claimed_before_a_backlog_drains(pool: PgPool) {
    let q = queue(&pool);
    let backlog = enqueue_keyed(&pool, "collection:a", 200).await;
    let single = enqueue_keyed(&pool, "collection:b", 1).await[0];
    // One slot at a time, as a busy worker frees them: A's oldest first (nothing runs yet and
    // it is older), then B's, because A now has a job running and B none.
    let first = q.claim("noop", 1, "w").await.expect("claim");
    assert_eq!(first[0].lease.job_id.0, backlog[0]);
    let second = q.claim("noop", 1, "w").await.expect("claim");
    assert_eq!(
        second[0].lease.job_id.0, single,
        "B's file waits for one claim, not for 199 of A's"
    );
    let third = q.claim("noop", 1, "w").await.expect("claim");
    assert_eq!(third[0].lease.job_id.0, backlog[1]);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_batch_is_shared_round_robin_between_keys(pool: PgPool) {
    let q = queue(&pool);
    for key in ["x", "y", "z"] {
        enqueue_keyed(&pool, key, 10).await;
    }
    let claimed = q.claim("noop", 6, "w").await.expect("claim");
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for job in &claimed {
        let key = job.payload["key"].as_str().expect("key").to_owned();
        *per_key.entry(key).or_default() += 1;
    }
    assert_eq!(claimed.len(), 6);
    assert!(per_key.values().all(|&n| n == 2), "{per_key:?}");
    // Within a key, oldest first.
    let xs: Vec<i64> = claimed
        .iter()
        .filter(|j| j.payload["key"] == "x")
        .map(|j| j.payload["n"].as_i64().expect("n"))
        .collect();
    assert_eq!(xs, [0, 1]);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn unkeyed_jobs_are_claimed_oldest_first_and_nothing_twice(pool: PgPool) {
    let q = queue(&pool);
    let mut ids = Vec::new();
    for i in 0..30 {
        ids.push(
            enqueue(&pool, NewJob::new("noop", json!({ "n": i })))
                .await
                .0,
        );
    }
    let mut claimed = Vec::new();
    // Two claimers at once take different rows (skip locked), together all of them.
    while claimed.len() < ids.len() {
        let (a, b) = tokio::join!(q.claim("noop", 4, "a"), q.claim("noop", 4, "b"));
        let (a, b) = (a.expect("claim"), b.expect("claim"));
        assert!(!a.is_empty() || !b.is_empty(), "due work is always claimed");
        claimed.extend(a.iter().chain(&b).map(|j| j.lease.job_id.0));
    }
    let mut sorted = claimed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), claimed.len(), "nothing twice");
    assert_eq!(sorted, ids, "every job once");

    let later: Vec<i64> = (0..5).map(|i| i + 1000).collect();
    let mut fresh = Vec::new();
    for n in &later {
        fresh.push(
            enqueue(&pool, NewJob::new("noop", json!({ "n": n })))
                .await
                .0,
        );
    }
    let batch: Vec<i64> = q
        .claim("noop", 3, "c")
        .await
        .expect("claim")
        .iter()
        .map(|j| j.lease.job_id.0)
        .collect();
    assert_eq!(batch, fresh[..3], "oldest first");
}

#[sqlx::test]
async fn a_documents_pipeline_jobs_carry_its_collection(pool: PgPool) {
    let app = TestApp::builder(pool.clone()).spawn().await;
    let created = app
        .client
        .post(app.url("/api/collections"))
        .json(&json!({ "name": "team" }))
        .send()
        .await
        .expect("create");
    assert!(created.status().is_success());
    let id = upload_into(
        &app,
        None,
        "team",
        "notes.txt",
        "Notes of the team meeting.",
    )
    .await;
    let collection: i64 = sqlx::query_scalar("select collection_id from documents where id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .expect("collection");
    app.worker().await.run_until_idle().await;
    let keys: Vec<(String, String)> = sqlx::query_as(
        "select kind, fair_key from jobs where payload ->> 'document_id' = $1::text order by id",
    )
    .bind(id.to_string())
    .fetch_all(&pool)
    .await
    .expect("jobs");
    let expected = format!("collection:{collection}");
    assert_eq!(
        keys,
        [
            ("extract".to_owned(), expected.clone()),
            ("embed".to_owned(), expected)
        ]
    );
}
