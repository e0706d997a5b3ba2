//! The states a document must never be left in, against a real PostgreSQL and real servers:
//! every way a pipeline job ends settles its document, no job speaks for a document that moved
//! on, a process claims only the embed jobs it can do, and a reprocess or delete stops the
//! document's running jobs and fences their writes.

use std::sync::Arc;
use std::time::Duration;

use docket::embed::RateLimits;
use docket::queue::{JobId, NewJob, Queue};
use docket::worker::{JobError, Outcome, Registry, Worker, WorkerConfig};
use docket_testkit::embedding_server::{self, EmbeddingServerConfig};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::support::{TestApp, TestWorker, enqueue, openai_embedder, pipeline, wait_until};

/// A document's status and the code of its error.
async fn settled(pool: &PgPool, id: i64) -> (String, Option<String>) {
    sqlx::query_as("select status, error ->> 'code' from documents where id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .expect("document")
}

async fn job_of(pool: &PgPool, id: i64, kind: &str) -> (JobId, String) {
    let (job, status): (i64, String) = sqlx::query_as(
        "select id, status from jobs
         where kind = $2 and (payload ->> 'document_id')::bigint = $1
         order by id desc
         limit 1",
    )
    .bind(id)
    .bind(kind)
    .fetch_one(pool)
    .await
    .expect("a job of the document");
    (JobId(job), status)
}

/// A queue that settles the pipeline's ended jobs, as a process's does.
fn queue(pool: &PgPool) -> Queue {
    Queue::new(pool.clone(), Duration::from_secs(30)).with_ends(Arc::new(docket::pipeline::kinds()))
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_job_the_rescuer_dead_letters_fails_its_document(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("crash.txt", b"the worker dies on this one".to_vec())
        .await;
    sqlx::query("update jobs set max_attempts = 1 where kind = 'extract'")
        .execute(&pool)
        .await
        .expect("one attempt");
    let q = queue(&pool);
    let claimed = q.claim("extract", 1, "doomed").await.expect("claim");
    assert_eq!(claimed.len(), 1);
    sqlx::query("update documents set status = 'extracting' where id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .expect("extracting");
    // The worker was killed (or ran out of memory): its lease runs out.
    let later = q.at(chrono::Utc::now() + q.lease() + Duration::from_secs(1));
    assert_eq!(later.rescue_expired(10).await.expect("rescue").dead, 1);
    let (status, code) = settled(&pool, id).await;
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("retries_exhausted"))
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_cancelled_job_fails_its_document(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("cancel.txt", b"a person cancels this".to_vec())
        .await;
    let (job, _) = job_of(&pool, id, "extract").await;
    let response = api
        .client
        .post(api.url(&format!("/api/jobs/{job}/cancel")))
        .send()
        .await
        .expect("cancel");
    assert_eq!(response.status(), StatusCode::OK);
    let (status, code) = settled(&pool, id).await;
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("cancelled"))
    );
}

fn explode() -> Result<Outcome, JobError> {
    panic!("the parser blew up")
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_handler_that_panics_on_its_last_attempt_fails_its_document(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("panic.txt", b"this one panics the handler".to_vec())
        .await;
    sqlx::query("update jobs set max_attempts = 1 where kind = 'extract'")
        .execute(&pool)
        .await
        .expect("one attempt");
    let mut registry = Registry::new();
    registry.register("extract", 1, |_job| async { explode() });
    // A handler registered as a closure has no end hook of its own: the queue's settles.
    let worker = Worker::new(
        queue(&pool),
        registry,
        WorkerConfig::for_lease(Duration::from_secs(30)),
    );
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(job_of(&pool, id, "extract").await.1, "dead");
    let (status, code) = settled(&pool, id).await;
    assert_eq!(
        (status.as_str(), code.as_deref()),
        ("failed", Some("retries_exhausted"))
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_failed_embed_under_another_version_does_not_fail_a_searchable_document(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("found.txt", b"people can already find this".to_vec())
        .await;
    api.worker().await.run_until_idle().await;
    assert_eq!(settled(&pool, id).await.0, "ready");

    // A second version whose provider rejects every request (it makes 32 dimensions, not 48).
    let server = embedding_server::start(EmbeddingServerConfig {
        dims: 32,
        ..EmbeddingServerConfig::default()
    })
    .await
    .expect("server");
    let rejecting = pipeline(
        &pool,
        openai_embedder(&server, 48, RateLimits::default(), |_| {}),
    )
    .await;
    let version = rejecting.model.model_version.clone();
    enqueue(
        &pool,
        NewJob::new(
            "embed",
            json!({ "document_id": id, "model_version": version }),
        ),
    )
    .await;
    TestWorker::new(&pool, &rejecting, 1).run_until_idle().await;
    assert_eq!(job_of(&pool, id, "embed").await.1, "dead");
    assert_eq!(server.stats().bad_requests, 1);
    assert_eq!(settled(&pool, id).await, ("ready".to_owned(), None));
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_process_leaves_embed_jobs_of_versions_it_cannot_build_to_one_that_can(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("fleet.txt", b"embedded by two kinds of worker".to_vec())
        .await;
    let hash_worker = api.worker().await;
    hash_worker.run_until_idle().await;

    let server = embedding_server::start(EmbeddingServerConfig {
        dims: 32,
        ..EmbeddingServerConfig::default()
    })
    .await
    .expect("server");
    let remote = pipeline(
        &pool,
        openai_embedder(&server, 32, RateLimits::default(), |_| {}),
    )
    .await;
    let version = remote.model.model_version.clone();
    let job = enqueue(
        &pool,
        NewJob::new(
            "embed",
            json!({ "document_id": id, "model_version": version }),
        ),
    )
    .await;
    // The hash-only process does not take it (it would have died there).
    assert_eq!(hash_worker.run_due().await, 0);
    let (status, attempts, _) = crate::support::job_state(&pool, job).await;
    assert_eq!((status.as_str(), attempts), ("ready", 0));
    // A process configured for that version does.
    TestWorker::new(&pool, &remote, 1).run_until_idle().await;
    let (status, attempts, _) = crate::support::job_state(&pool, job).await;
    assert_eq!((status.as_str(), attempts), ("done", 1));
    let complete: i64 =
        sqlx::query_scalar("select count(*) from embedding_sets_complete where document_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("sets");
    assert_eq!(complete, 2);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn reprocess_and_delete_stop_the_document_s_running_jobs(pool: PgPool) {
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("busy.txt", b"a document being worked on".to_vec())
        .await;
    let q = queue(&pool);
    let running = q.claim("extract", 1, "w").await.expect("claim").remove(0);
    let response = api
        .client
        .post(api.url(&format!("/api/documents/{id}/reprocess")))
        .send()
        .await
        .expect("reprocess");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let record = q.get(running.lease.job_id).await.expect("old job");
    assert_eq!(record.status, "cancelled");
    assert!(
        record
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("reprocessed")),
        "{record:?}"
    );
    // The new extraction waits, and the document is not failed by the old job's end.
    let (newer, status) = job_of(&pool, id, "extract").await;
    assert_ne!(newer, running.lease.job_id);
    assert_eq!(status, "ready");
    assert_eq!(settled(&pool, id).await, ("uploaded".to_owned(), None));
    // The old worker's heartbeat and completion are refused.
    assert_eq!(
        q.extend(&[running.lease]).await.expect("extend"),
        vec![running.lease]
    );

    let second = q.claim("extract", 1, "w").await.expect("claim").remove(0);
    let response = api
        .client
        .delete(api.url(&format!("/api/documents/{id}")))
        .send()
        .await
        .expect("delete");
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        q.get(second.lease.job_id).await.expect("job").status,
        "cancelled"
    );
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn vectors_of_replaced_text_never_land_on_the_new_chunks(pool: PgPool) {
    // Every answer takes a second, so the chunks can change while the request is out.
    let server = embedding_server::start(EmbeddingServerConfig {
        dims: 32,
        slow_rate: 1.0,
        slow_delay: Duration::from_secs(1),
        ..EmbeddingServerConfig::default()
    })
    .await
    .expect("server");
    let embedder = openai_embedder(&server, 32, RateLimits::default(), |_| {});
    let remote = pipeline(&pool, embedder.clone()).await;
    let api = TestApp::builder(pool.clone()).spawn().await;
    let id = api
        .upload_one("old.txt", b"the old text of the document".to_vec())
        .await;
    let worker = TestWorker::new(&pool, &remote, 1);
    let running = tokio::spawn(async move {
        worker.run_due().await;
        worker
    });
    let stats = Arc::new(server);
    let probe = stats.clone();
    wait_until(
        Duration::from_secs(10),
        "the embedding request is out",
        || {
            let probe = probe.clone();
            async move { probe.stats().requests >= 1 }
        },
    )
    .await;
    // Meanwhile the text is replaced, under the same chunk index (what a reprocess's
    // extraction writes).
    let new_text = "a new text that replaced the old one";
    let mut tx = pool.begin().await.expect("begin");
    sqlx::query("delete from chunks where document_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await
        .expect("delete the chunks");
    sqlx::query(
        "insert into chunks (document_id, chunk_index, page, text, token_count, content_hash)
         values ($1, 0, 1, $2, 8, sha256(convert_to($2, 'UTF8')))",
    )
    .bind(id)
    .bind(new_text)
    .execute(&mut *tx)
    .await
    .expect("insert the new chunk");
    tx.commit().await.expect("commit");
    let worker = running.await.expect("worker task");
    let stale: i64 = sqlx::query_scalar("select count(*) from embeddings where document_id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(
        stale, 0,
        "a vector of the old text was written onto the new chunk"
    );

    worker.run_until_idle().await;
    let stored: pgvector::Vector =
        sqlx::query_scalar("select embedding from embeddings where document_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("the new vector");
    let expected = embedder
        .embed(&[new_text.to_owned()])
        .await
        .expect("embed the new text");
    let stored = stored.to_vec();
    assert_eq!(stored.len(), expected[0].len());
    for (a, b) in stored.iter().zip(&expected[0]) {
        assert!(
            (a - b).abs() < 1e-5,
            "the stored vector is not the new text's"
        );
    }
    assert_eq!(settled(&pool, id).await.0, "ready");
}
