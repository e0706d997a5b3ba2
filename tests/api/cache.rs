//! The embedding cache, counted at the test embedding server: a text already embedded under the
//! active version is never sent again (a second document, two documents at once, a re-upload
//! after a delete, a reprocess), a model switch sends it again under the new version, and the
//! maintenance bound evicts the least recently used entries first.

use std::time::Duration;

use docket::chunk::ChunkConfig;
use docket::embed::{Embedder, RateLimits, cache};
use docket_testkit::embedding_server::{self, EmbeddingServer, EmbeddingServerConfig};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::PgPool;

use crate::support::{self, TestApp, TestWorker};

/// One sentence, one chunk.
const SENTENCE_CHUNKS: ChunkConfig = ChunkConfig {
    target_tokens: 30,
    overlap_tokens: 0,
};

const DIMS: u32 = 16;

async fn server(slow: bool) -> EmbeddingServer {
    embedding_server::start(EmbeddingServerConfig {
        dims: DIMS as usize,
        // Slow answers keep two jobs' calls in flight together, when nothing serialises them.
        slow_rate: if slow { 1.0 } else { 0.0 },
        slow_delay: Duration::from_millis(300),
        ..Default::default()
    })
    .await
    .expect("embedding server")
}

/// An embedder for `server` under `model` (the model name is part of the version).
fn embedder(server: &EmbeddingServer, model: &str) -> Embedder {
    support::openai_embedder(server, DIMS, RateLimits::default(), |c| {
        c.model = model.to_owned();
    })
}

async fn app(pool: &PgPool, embedder: Embedder) -> TestApp {
    TestApp::builder(pool.clone())
        .embedder(embedder)
        .chunking(SENTENCE_CHUNKS)
        .spawn()
        .await
}

fn sentences(prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("{prefix} sentence {i} says something about the harbour and its ships."))
        .collect()
}

/// Every text of `texts` was answered by the server exactly once.
fn each_sent_once(server: &EmbeddingServer, texts: &[String]) {
    let stats = server.stats();
    for text in texts {
        assert_eq!(stats.times_embedded(text), 1, "{text:?}: {stats:?}");
    }
    assert_eq!(stats.duplicate_embeddings(), 0, "{stats:?}");
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_second_document_with_the_same_text_sends_nothing_new(pool: PgPool) {
    let server = server(false).await;
    // A model name of this test's own, so the metrics below count only its calls.
    let app = app(&pool, embedder(&server, "cache-second-document")).await;
    let shared = sentences("Boilerplate", 4);
    app.upload_paragraphs("first.txt", &shared).await;
    let sent = server.stats().inputs_embedded;
    assert_eq!(sent, 4);

    let mut second = shared.clone();
    second.push("Only the second document has this closing sentence about lighthouses.".into());
    app.upload_paragraphs("second.txt", &second).await;
    assert_eq!(
        server.stats().inputs_embedded,
        sent + 1,
        "only the new sentence"
    );
    each_sent_once(&server, &second);

    let version = app.model().model_version.clone();
    let metrics = docket::metrics::global();
    let count = |family: &str| metrics.counter(family, &[("model", version.as_str())]);
    assert_eq!(count("docket_embedding_cache_hits_total"), 4);
    assert_eq!(count("docket_embedding_cache_misses_total"), 5);
    assert!(count("docket_embedding_cache_tokens_saved_total") > 0);
    assert_eq!(cache::entries(&pool).await.expect("entries"), 5);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn two_documents_sharing_chunks_embedded_at_the_same_time_send_them_once(pool: PgPool) {
    let server = server(true).await;
    let app = app(&pool, embedder(&server, "cache-at-once")).await;
    let shared = sentences("Shared", 3);
    let (mut a, mut b) = (shared.clone(), shared.clone());
    a.push("Document A ends with a sentence about cormorants on the pier.".into());
    b.insert(
        0,
        "Document B opens with a sentence about fog over the bay.".into(),
    );
    app.upload_one("a.txt", a.join("\n\n").into_bytes()).await;
    app.upload_one("b.txt", b.join("\n\n").into_bytes()).await;
    // Both embed jobs run at once (two slots), each call taking 300 ms.
    let worker = TestWorker::new(&pool, &app.pipeline().await, 2);
    worker.run_until_idle().await;
    for name in ["a.txt", "b.txt"] {
        let status: String = sqlx::query_scalar("select status from documents where filename = $1")
            .bind(name)
            .fetch_one(&pool)
            .await
            .expect("status");
        assert_eq!(status, "ready", "{name}");
    }
    each_sent_once(&server, &[a, b].concat());
    assert_eq!(server.stats().inputs_embedded, 5);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_re_upload_after_a_delete_and_a_reprocess_take_the_cached_vectors(pool: PgPool) {
    let server = server(false).await;
    let app = app(&pool, embedder(&server, "cache-reupload")).await;
    let texts = sentences("Contract", 3);
    let id = app.upload_paragraphs("contract.txt", &texts).await;
    assert_eq!(server.stats().inputs_embedded, 3);

    // Reprocess: the chunks are extracted again and the document is ready with nothing sent.
    let response = app
        .client
        .post(app.url(&format!("/api/documents/{id}/reprocess")))
        .send()
        .await
        .expect("reprocess");
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    app.worker().await.run_until_idle().await;
    assert_eq!(app.document(id).await["status"], "ready");

    // Delete, then upload the same bytes again: a new document whose vectors all come from
    // the cache (the deleted document's own vectors went with it).
    let response = app
        .client
        .delete(app.url(&format!("/api/documents/{id}")))
        .send()
        .await
        .expect("delete");
    assert!(response.status().is_success(), "{}", response.status());
    let again = app.upload_paragraphs("contract.txt", &texts).await;
    assert_ne!(again, id);
    assert_eq!(app.document(again).await["status"], "ready");
    each_sent_once(&server, &texts);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn a_model_switch_never_serves_another_versions_vector(pool: PgPool) {
    let server = server(false).await;
    let old = app(&pool, embedder(&server, "cache-model-old")).await;
    let texts = sentences("Versioned", 3);
    let id = old.upload_paragraphs("versioned.txt", &texts).await;
    assert_eq!(server.stats().inputs_embedded, 3);

    // The same texts under another version are sent again, each once.
    let new =
        support::pipeline_chunking(&pool, embedder(&server, "cache-model-new"), SENTENCE_CHUNKS)
            .await;
    let version = new.model.model_version.clone();
    assert_ne!(version, old.model().model_version);
    support::enqueue(
        &pool,
        docket::queue::NewJob::new(
            "embed",
            json!({ "document_id": id, "model_version": version }),
        ),
    )
    .await;
    TestWorker::new(&pool, &new, 1).run_until_idle().await;
    let stats = server.stats();
    assert_eq!(stats.inputs_embedded, 6, "{stats:?}");
    for text in &texts {
        assert_eq!(stats.times_embedded(text), 2, "{text:?}");
    }
    let vectors: i64 = sqlx::query_scalar(
        "select count(*) from embeddings where document_id = $1 and model_version = $2",
    )
    .bind(id)
    .bind(&version)
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(vectors, 3);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn eviction_keeps_the_bound_and_the_most_recently_used(pool: PgPool) {
    let server = server(false).await;
    let app = app(&pool, embedder(&server, "cache-eviction")).await;
    let older = sentences("Older", 3);
    let newer = sentences("Newer", 3);
    app.upload_paragraphs("older.txt", &older).await;
    // Entries written by one transaction share its time: make the two uploads' times differ.
    sqlx::query("update embedding_cache set last_used = last_used - interval '1 hour'")
        .execute(&pool)
        .await
        .expect("age the first entries");
    app.upload_paragraphs("newer.txt", &newer).await;
    assert_eq!(cache::entries(&pool).await.expect("entries"), 6);

    // One entry per statement, so the batches loop.
    let evicted = cache::evict(&pool, 3, 1).await.expect("evict");
    assert_eq!(evicted, 3);
    assert_eq!(cache::entries(&pool).await.expect("entries"), 3);
    assert_eq!(cache::evict(&pool, 3, 1).await.expect("evict again"), 0);

    // A third document with one text of each: the evicted one is sent again, the kept one not.
    let third = vec![older[0].clone(), newer[0].clone()];
    app.upload_paragraphs("third.txt", &third).await;
    let stats = server.stats();
    assert_eq!(stats.times_embedded(&older[0]), 2, "{stats:?}");
    assert_eq!(stats.times_embedded(&newer[0]), 1, "{stats:?}");
}
