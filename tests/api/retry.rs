//! A person's retry, through the API, against a real PostgreSQL and the real pipeline: a dead
//! or cancelled job starts over with a fresh attempt budget and its history kept, and the
//! failed document it works on goes back into the job's step at once, so a client watching the
//! document sees what the retry does (to `ready`, or to the new failure).

use std::sync::Arc;
use std::time::Duration;

use docket::pipeline::ExtractJob;
use docket::queue::{JobId, Queue};
use docket::worker::{Declare, Registry, Worker, WorkerConfig};
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::TestApp;

/// The newest job of `kind` working on document `id`.
async fn job_of(pool: &PgPool, id: i64, kind: &str) -> JobId {
    let job: i64 = sqlx::query_scalar(
        "select id from jobs
         where kind = $2 and (payload ->> 'document_id')::bigint = $1
         order by id desc
         limit 1",
    )
    .bind(id)
    .bind(kind)
    .fetch_one(pool)
    .await
    .expect("a job of the document");
    JobId(job)
}

async fn retry(api: &TestApp, job: JobId) -> Value {
    let response = api
        .client
        .post(api.url(&format!("/api/jobs/{job}/retry")))
        .send()
        .await
        .expect("retry");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("the job")
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_retried_extract_job_starts_afresh_and_its_document_follows_it_to_ready(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one(
            "flaky.txt",
            b"Words that extract fine the second time.".to_vec(),
        )
        .await;
    let job = job_of(&pool, id, "extract").await;
    // Every attempt fails, as a flaky disk or a killed worker would make them: the queue kills
    // it on the last one and the pipeline's end hook fails the document.
    let q = Queue::new(pool.clone(), Duration::from_secs(30))
        .with_ends(Arc::new(docket::pipeline::kinds()));
    let budget = q.get(job).await.expect("the job").max_attempts;
    assert!(budget > 1, "{budget}");
    for attempt in 1..=budget {
        let claimed = q.claim("extract", 1, "w").await.expect("claim").remove(0);
        assert_eq!(claimed.attempt, attempt);
        q.retry(
            &claimed.lease,
            &format!("disk hiccup {attempt}"),
            Duration::ZERO,
            true,
        )
        .await
        .expect("a failed attempt");
    }
    let doc = api.document(id).await;
    assert_eq!(doc["status"], "failed", "{doc}");
    assert_eq!(doc["error"]["code"], "retries_exhausted");
    assert_eq!(doc["error"]["permanent"], false);

    let fresh = retry(&api, job).await;
    assert_eq!(fresh["status"], "ready");
    assert_eq!(
        (fresh["attempts"].as_i64(), fresh["max_attempts"].as_i64()),
        (Some(0), Some(i64::from(budget))),
        "a fresh run with the original budget, not {budget} of {}: {fresh}",
        2 * budget
    );
    assert_eq!(fresh["retries"], 1);
    assert!(fresh["retried_at"].is_string(), "{fresh}");
    assert!(fresh["last_error"].is_null(), "{fresh}");
    assert_eq!(
        fresh["errors"].as_array().map(Vec::len),
        usize::try_from(budget).ok(),
        "the history is kept"
    );
    // The document left `failed` in the retry's transaction: what a client sees at once.
    let doc = api.document(id).await;
    assert_eq!(doc["status"], "uploaded", "{doc}");
    assert!(doc["error"].is_null(), "{doc}");
    let listed = doc["jobs"]
        .as_array()
        .and_then(|jobs| jobs.iter().find(|j| j["id"] == job.0).cloned())
        .expect("the job on the document");
    assert_eq!(listed["retries"], 1, "{listed}");

    api.worker().await.run_until_idle().await;
    let doc = api.document(id).await;
    assert_eq!(doc["status"], "ready", "{doc}");
    let done: Value = api.get_json(&format!("/api/jobs/{job}")).await;
    assert_eq!(
        (done["status"].as_str(), done["attempts"].as_i64()),
        (Some("done"), Some(1)),
        "{done}"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_retried_embed_job_puts_its_failed_document_back_in_embedding(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one(
            "cut-short.txt",
            b"Chunked, then its embedding was stopped.".to_vec(),
        )
        .await;
    // Extraction only: a worker that knows the extract kind alone.
    let mut registry = Registry::new();
    registry.with(api.pipeline().await).kind::<ExtractJob>();
    let worker = Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(30)),
        registry,
        WorkerConfig::for_lease(Duration::from_secs(30)),
    );
    worker.run_until_idle().await.expect("extract");
    let embed = job_of(&pool, id, "embed").await;
    let response = api
        .client
        .post(api.url(&format!("/api/jobs/{embed}/cancel")))
        .send()
        .await
        .expect("cancel");
    assert_eq!(response.status(), StatusCode::OK);
    let doc = api.document(id).await;
    assert_eq!(
        (doc["status"].as_str(), doc["error"]["code"].as_str()),
        (Some("failed"), Some("cancelled")),
        "{doc}"
    );

    retry(&api, embed).await;
    let doc = api.document(id).await;
    assert_eq!(doc["status"], "embedding", "{doc}");
    assert!(doc["error"].is_null(), "{doc}");
    api.worker().await.run_until_idle().await;
    assert_eq!(api.document(id).await["status"], "ready");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_retry_leaves_a_document_that_another_job_speaks_for_alone(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("moved-on.txt", b"Cancelled, then reprocessed.".to_vec())
        .await;
    let first = job_of(&pool, id, "extract").await;
    let cancelled = api
        .client
        .post(api.url(&format!("/api/jobs/{first}/cancel")))
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancelled.status(), StatusCode::OK);
    api.worker().await.run_until_idle().await;
    let reprocessed = api
        .client
        .post(api.url(&format!("/api/documents/{id}/reprocess")))
        .send()
        .await
        .expect("reprocess");
    assert_eq!(reprocessed.status(), StatusCode::ACCEPTED);
    api.worker().await.run_until_idle().await;
    assert_eq!(api.document(id).await["status"], "ready");

    // The old cancelled job runs again if a person asks, but a ready document stays ready
    // until that run itself starts (it then re-extracts the same bytes).
    retry(&api, first).await;
    assert_eq!(api.document(id).await["status"], "ready");
}
