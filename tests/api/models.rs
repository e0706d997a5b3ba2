//! Model versions end to end: upload, extract and embed under one version, activate another,
//! let the nightly reembed catch up, and watch search's notion of a document's version switch.
//! Also: identical text is copied, never sent to the provider twice.

use std::sync::Arc;
use std::time::Duration;

use docket::documents::{self, NewDocument};
use docket::embed::{Embedder, HashEmbedder, Limiter, OpenAiConfig, OpenAiEmbedder};
use docket::models::{self, NewModelVersion};
use docket::pipeline::chunk::ChunkConfig;
use docket::pipeline::{Pipeline, PipelineConcurrency, reembed};
use docket::queue::{NewJob, Queue};
use docket::schedule::{self, NIGHTLY_REEMBED, store};
use docket::testkit::embedding_server::{self, EmbeddingServerConfig};
use docket::worker::{Registry, Worker, WorkerConfig};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{enqueue, spawn_api};

const CHUNKING: ChunkConfig = ChunkConfig {
    target_tokens: 200,
    overlap_tokens: 30,
};

async fn pipeline(pool: &PgPool, embedder: Embedder) -> Arc<Pipeline> {
    let exe = std::env::current_exe().expect("test binary path");
    let pipeline = Pipeline::new(
        pool.clone(),
        embedder,
        CHUNKING,
        docket::extract::PdfLimits::new(exe),
    );
    pipeline.prepare().await.expect("register the version");
    Arc::new(pipeline)
}

fn worker(pool: &PgPool, pipeline: &Arc<Pipeline>) -> Worker {
    let mut registry = Registry::new();
    pipeline.register(
        &mut registry,
        PipelineConcurrency {
            extract: 2,
            embed: 2,
        },
    );
    Worker::new(
        Queue::new(pool.clone(), Duration::from_secs(60)),
        registry,
        WorkerConfig::for_lease(Duration::from_secs(60)),
    )
}

async fn upload(pool: &PgPool, name: &str, text: &str) -> i64 {
    documents::create_with_extract_job(
        pool,
        &NewDocument {
            filename: name,
            content_type: "text/plain",
            bytes: text.as_bytes(),
        },
    )
    .await
    .expect("upload")
    .document
    .id
}

/// document id → the version search reads it under.
async fn search_versions(pool: &PgPool) -> Vec<(i64, String)> {
    sqlx::query_as("select document_id, model_version from document_search_versions order by 1")
        .fetch_all(pool)
        .await
        .expect("view")
}

async fn embed_jobs_for(pool: &PgPool, version: &str) -> i64 {
    sqlx::query_scalar(
        "select count(*) from jobs where kind = 'embed' and payload ->> 'model_version' = $1",
    )
    .bind(version)
    .fetch_one(pool)
    .await
    .expect("count")
}

#[sqlx::test(migrator = "docket::app::MIGRATOR")]
async fn activating_a_new_version_reembeds_every_document_once_and_search_switches(pool: PgPool) {
    let pipeline = pipeline(&pool, Embedder::Hash(HashEmbedder::new(16))).await;
    let old = pipeline.model.model_version.clone();
    let worker = worker(&pool, &pipeline);
    let long = "A paragraph about rivers and the sea. ".repeat(80);
    let ids = [
        upload(&pool, "a.txt", &format!("alpha document\n\n{long}")).await,
        upload(&pool, "b.txt", "beta document about mountains").await,
        upload(&pool, "c.txt", "gamma document about deserts").await,
    ];
    worker.run_until_idle().await.expect("pipeline runs");
    let before: Vec<(i64, String)> = ids.iter().map(|id| (*id, old.clone())).collect();
    assert_eq!(search_versions(&pool).await, before);

    // A second version with other dimensions; activating it moves nothing yet.
    let new = models::add(
        &pool,
        &NewModelVersion {
            provider: "hash".into(),
            model: "v1".into(),
            dims: 24,
            chunk_tokens: 200,
            chunk_overlap: 30,
        },
    )
    .await
    .expect("add")
    .model_version;
    models::switch_to(&pool, &new).await.expect("activate");
    assert_eq!(
        search_versions(&pool).await,
        before,
        "old sets serve until new ones are whole"
    );

    let chunks: i64 = sqlx::query_scalar("select count(*) from chunks")
        .fetch_one(&pool)
        .await
        .expect("chunks");
    let (distinct, tokens): (i64, i64) = sqlx::query_as(
        "select count(*), coalesce(sum(token_count), 0)::bigint
         from (select distinct on (content_hash) content_hash, token_count from chunks) t",
    )
    .fetch_one(&pool)
    .await
    .expect("distinct");
    assert!(
        distinct < chunks,
        "the long document repeats a chunk, so something is copied"
    );
    let plan = reembed::plan(&pool, &new).await.expect("plan");
    assert_eq!(
        (plan.documents, plan.chunks, plan.tokens),
        (3, distinct, tokens)
    );

    // The nightly schedule fires at 02:00 UTC and its reembed job enqueues the embed jobs.
    store::ensure_builtin(&pool, chrono::Utc::now() - chrono::Duration::days(1))
        .await
        .expect("built-in schedule");
    let fired = schedule::fire_due(&pool, NIGHTLY_REEMBED, chrono::Utc::now())
        .await
        .expect("fire");
    assert_eq!(fired.fired.len(), 1);
    worker.run_until_idle().await.expect("reembed runs");

    assert_eq!(
        embed_jobs_for(&pool, &new).await,
        3,
        "one embed job per document"
    );
    let vectors: i64 = sqlx::query_scalar(
        "select count(*) from embeddings where model_version = $1 and vector_dims(embedding) = 24",
    )
    .bind(&new)
    .fetch_one(&pool)
    .await
    .expect("vectors");
    assert_eq!(vectors, chunks);
    let after: Vec<(i64, String)> = ids.iter().map(|id| (*id, new.clone())).collect();
    assert_eq!(search_versions(&pool).await, after);
    let plan = reembed::plan(&pool, &new).await.expect("plan");
    assert_eq!((plan.documents, plan.chunks), (0, 0));

    // A second run the same night finds nothing to do.
    schedule::run_now(&pool, NIGHTLY_REEMBED, chrono::Utc::now())
        .await
        .expect("run now");
    worker.run_until_idle().await.expect("second reembed runs");
    assert_eq!(embed_jobs_for(&pool, &new).await, 3);

    // A set that loses a vector is incomplete: that document falls back to the old version
    // until the next run mends it.
    sqlx::query("delete from embeddings where document_id = $1 and model_version = $2")
        .bind(ids[1])
        .bind(&new)
        .execute(&pool)
        .await
        .expect("delete");
    let versions = search_versions(&pool).await;
    assert_eq!(versions[1], (ids[1], old.clone()));
    // Tonight's key for that document is spent (the work is done once a night); the next
    // night's run enqueues it again.
    let tonight = chrono::Utc::now();
    let stale = |at| reembed::enqueue_stale(&pool, &new, at);
    assert_eq!(stale(tonight).await.expect("enqueue"), 0);
    assert_eq!(
        stale(tonight + chrono::Duration::days(1))
            .await
            .expect("enqueue"),
        1
    );
    worker.run_until_idle().await.expect("mend");
    assert_eq!(search_versions(&pool).await, after);
}

#[sqlx::test(migrator = "docket::app::MIGRATOR")]
async fn identical_text_is_copied_not_sent_to_the_provider(pool: PgPool) {
    let server = embedding_server::start(EmbeddingServerConfig {
        dims: 16,
        ..Default::default()
    })
    .await
    .expect("server");
    let mut config = OpenAiConfig::new(server.base_url.clone(), "test-model");
    config.dimensions = Some(16);
    let embedder = Embedder::OpenAi(
        OpenAiEmbedder::new(config, Arc::new(Limiter::unlimited())).expect("client"),
    );
    let pipeline = pipeline(&pool, embedder).await;
    let version = pipeline.model.model_version.clone();
    let worker = worker(&pool, &pipeline);

    // Two documents with the same three chunks, and in the second a fourth that repeats one.
    let texts = [
        "first shared text",
        "second shared text",
        "third shared text",
    ];
    let mut ids = Vec::new();
    for (n, chunk_texts) in [texts.to_vec(), [&texts[..], &texts[..1]].concat()]
        .iter()
        .enumerate()
    {
        let id: i64 = sqlx::query_scalar(
            "insert into documents (filename, content_type, byte_size, sha256, status)
             values ($1, 'text/plain', 1, sha256($1::bytea), 'embedding')
             returning id",
        )
        .bind(format!("doc{n}.txt"))
        .fetch_one(&pool)
        .await
        .expect("document");
        for (index, text) in chunk_texts.iter().enumerate() {
            sqlx::query(
                "insert into chunks (document_id, chunk_index, page, text, token_count, content_hash)
                 values ($1, $2, 1, $3, 4, sha256(convert_to($3, 'UTF8')))",
            )
            .bind(id)
            .bind(index as i32)
            .bind(*text)
            .execute(&pool)
            .await
            .expect("chunk");
        }
        ids.push(id);
    }
    let plan = reembed::plan(&pool, &version).await.expect("plan");
    assert_eq!((plan.documents, plan.chunks, plan.tokens), (2, 3, 12));

    let job = |id: i64| {
        NewJob::new(
            "embed",
            json!({ "document_id": id, "model_version": version }),
        )
    };
    enqueue(&pool, job(ids[0])).await;
    worker.run_until_idle().await.expect("embed first");
    assert_eq!(server.stats().inputs_embedded, 3);
    enqueue(&pool, job(ids[1])).await;
    worker.run_until_idle().await.expect("embed second");
    assert_eq!(
        server.stats().inputs_embedded,
        3,
        "the second document's text was copied"
    );
    let vectors: i64 = sqlx::query_scalar(
        "select count(*) from embeddings where document_id = $1 and model_version = $2",
    )
    .bind(ids[1])
    .bind(&version)
    .fetch_one(&pool)
    .await
    .expect("count");
    assert_eq!(vectors, 4);
    let status: String = sqlx::query_scalar("select status from documents where id = $1")
        .bind(ids[1])
        .fetch_one(&pool)
        .await
        .expect("status");
    assert_eq!(status, "ready");
}

#[sqlx::test(migrator = "docket::app::MIGRATOR")]
async fn models_api_lists_adds_and_activates_versions(pool: PgPool) {
    let pipeline = pipeline(&pool, Embedder::Hash(HashEmbedder::new(8))).await;
    let api = spawn_api(pool.clone(), None).await;
    let added = api
        .client
        .post(api.url("/api/models"))
        .json(&json!({ "provider": "hash", "model": "v1", "dims": 12, "chunk_tokens": 200, "chunk_overlap": 30 }))
        .send()
        .await
        .expect("post");
    assert_eq!(added.status(), reqwest::StatusCode::CREATED);
    let version = added.json::<Value>().await.expect("json")["model"]["model_version"]
        .as_str()
        .expect("name")
        .to_owned();
    assert_eq!(version, "hash:v1:12:c200o30");
    let bad = api
        .client
        .post(api.url("/api/models"))
        .json(&json!({ "provider": "carrier-pigeon", "model": "v1", "dims": 12, "chunk_tokens": 200, "chunk_overlap": 30 }))
        .send()
        .await
        .expect("post");
    assert_eq!(bad.status(), reqwest::StatusCode::BAD_REQUEST);

    let activated = api
        .client
        .post(api.url(&format!("/api/models/{version}/activate")))
        .send()
        .await
        .expect("activate");
    assert_eq!(activated.status(), reqwest::StatusCode::OK);
    let listed: Value = api.get_json("/api/models").await;
    let listed = listed["models"].as_array().expect("models").clone();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["model_version"], version.as_str());
    assert_eq!(listed[0]["active"], true);
    assert_eq!(
        listed[1]["model_version"],
        pipeline.model.model_version.as_str()
    );
    assert_eq!(listed[1]["active"], false);
    let missing = api
        .client
        .post(api.url("/api/models/nope/activate"))
        .send()
        .await
        .expect("activate");
    assert_eq!(missing.status(), reqwest::StatusCode::NOT_FOUND);
}
