//! Model versions end to end: upload, extract and embed under one version, activate another,
//! let the nightly reembed catch up, and watch search's notion of a document's version switch.
//! Also: identical text is copied, never sent to the provider twice.

use std::sync::Arc;

use docket::chunk::ChunkConfig;
use docket::documents::NewDocument;
use docket::embed::{Embedder, HashEmbedder, Limiter, OpenAiConfig, OpenAiEmbedder};
use docket::models::{self, NewModelVersion};
use docket::pipeline::{self, Pipeline, reembed};
use docket::queue::NewJob;
use docket::schedule::{self, NIGHTLY_REEMBED, store};
use docket_testkit::embedding_server::{self, EmbeddingServerConfig};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{TestApp, TestWorker, enqueue};

const CHUNKING: ChunkConfig = ChunkConfig {
    target_tokens: 200,
    overlap_tokens: 30,
};

async fn pipeline(pool: &PgPool, embedder: Embedder) -> Arc<Pipeline> {
    crate::support::pipeline_chunking(pool, embedder, CHUNKING).await
}

fn worker(pool: &PgPool, pipeline: &Arc<Pipeline>) -> TestWorker {
    TestWorker::new(pool, pipeline, 2)
}

async fn upload(pool: &PgPool, name: &str, text: &str) -> i64 {
    pipeline::create_with_extract_job(
        pool,
        &NewDocument {
            collection: docket::collections::DEFAULT,
            filename: name,
            content_type: "text/plain",
            bytes: text.as_bytes(),
            upload: None,
        },
    )
    .await
    .expect("upload")
    .document
    .id
    .0
}

/// document id → the version search reads it under.
async fn search_versions(pool: &PgPool) -> Vec<(i64, String)> {
    sqlx::query_as("select document_id, model_version from document_search_versions order by 1")
        .fetch_all(pool)
        .await
        .expect("view")
}

/// Registers a hashing version of `dims` with the default chunking and makes it active.
async fn activate_hash_version(pool: &PgPool, dims: i32) -> String {
    let new = models::add(
        pool,
        &NewModelVersion {
            provider: "hash".into(),
            model: "v1".into(),
            dims,
            chunk_tokens: CHUNKING.target_tokens as i32,
            chunk_overlap: CHUNKING.overlap_tokens as i32,
        },
    )
    .await
    .expect("add")
    .model_version;
    models::switch_to(pool, &new).await.expect("activate");
    new
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

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
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
    worker.run_due().await;
    let before: Vec<(i64, String)> = ids.iter().map(|id| (*id, old.clone())).collect();
    assert_eq!(search_versions(&pool).await, before);

    // A second version with other dimensions; activating it moves nothing yet.
    let new = activate_hash_version(&pool, 24).await;
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
    let builtins = [store::BuiltinSchedule::nightly_reembed(
        docket::pipeline::REEMBED_JOB,
    )];
    store::ensure_builtin(
        &pool,
        &builtins,
        chrono::Utc::now() - chrono::Duration::days(1),
    )
    .await
    .expect("built-in schedule");
    let fired = schedule::fire_due(&pool, NIGHTLY_REEMBED, chrono::Utc::now())
        .await
        .expect("fire");
    assert_eq!(fired.fired.len(), 1);
    worker.run_due().await;

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
    worker.run_due().await;
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
    worker.run_due().await;
    assert_eq!(search_versions(&pool).await, after);
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
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
    // Written by hand, not uploaded: the test needs chunks with no embed job yet (extraction
    // enqueues one in its own transaction), so it can plan first and embed one at a time.
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
    worker.run_due().await;
    assert_eq!(server.stats().inputs_embedded, 3);
    enqueue(&pool, job(ids[1])).await;
    worker.run_due().await;
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

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn models_api_lists_adds_and_activates_versions(pool: PgPool) {
    let pipeline = pipeline(&pool, Embedder::Hash(HashEmbedder::new(8))).await;
    let api = TestApp::builder(pool.clone()).spawn().await;
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

/// `GET /api/search` on `api`, as JSON (panics unless 200).
async fn search(api: &TestApp, q: &str, mode: &str) -> Value {
    let response = api
        .client
        .get(api.url("/api/search"))
        .query(&[("q", q), ("mode", mode), ("k", "20")])
        .send()
        .await
        .expect("search");
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    response.json().await.expect("search JSON")
}

/// (document, chunk, model version) of every hit, in order.
fn hit_versions(body: &Value) -> Vec<(i64, i64, Value)> {
    body["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| {
            (
                h["document_id"].as_i64().expect("document"),
                h["chunk_index"].as_i64().expect("chunk"),
                h["model_version"].clone(),
            )
        })
        .collect()
}

#[sqlx::test(migrator = "docket::db::MIGRATOR")]
async fn during_a_switch_vector_search_finds_a_document_through_its_old_version(pool: PgPool) {
    let pipeline = pipeline(&pool, Embedder::Hash(HashEmbedder::new(64))).await;
    let old = pipeline.model.model_version.clone();
    let worker = worker(&pool, &pipeline);
    let rivers = upload(&pool, "rivers.txt", "rivers flow through wide estuaries").await;
    // Long enough for several chunks, so its new set can be half written.
    let mountains_text = (0..60)
        .map(|i| format!("Glaciers carve alpine meadows below mountain ridge number {i}."))
        .collect::<Vec<_>>()
        .join(" ");
    let mountains = upload(&pool, "mountains.txt", &mountains_text).await;
    worker.run_due().await;

    let new = activate_hash_version(&pool, 32).await;
    let embed_under_new = |id: i64| {
        NewJob::new(
            "embed",
            json!({ "document_id": id, "model_version": new.clone() }),
        )
    };
    enqueue(&pool, embed_under_new(rivers)).await;
    worker.run_due().await;
    // The mountains' new set is under way: one chunk has its vector, the others do not. That
    // vector is the very one of a rivers query, so a search that let the half-written set answer
    // for the mountains would put them first for it.
    let rivers_query = "estuaries of rivers";
    sqlx::query(
        "insert into embeddings (document_id, model_version, chunk_index, embedding)
         values ($1, $2, 0, $3)",
    )
    .bind(mountains)
    .bind(&new)
    .bind(pgvector::Vector::from(
        HashEmbedder::new(32).embed_one(rivers_query),
    ))
    .execute(&pool)
    .await
    .expect("one new vector");
    let chunks: i64 = sqlx::query_scalar("select count(*) from chunks where document_id = $1")
        .bind(mountains)
        .fetch_one(&pool)
        .await
        .expect("chunks");
    assert!(chunks >= 3, "{chunks} chunks");
    assert_eq!(
        search_versions(&pool).await,
        vec![(rivers, new.clone()), (mountains, old.clone())]
    );

    // The server embeds with hash:v1:384, neither version: both are built from their rows.
    let api = TestApp::builder(pool.clone()).spawn().await;
    let body = search(&api, "glaciers alpine meadows mountain ridge", "vector").await;
    let hits = hit_versions(&body);
    assert_eq!(hits[0].0, mountains, "{body}");
    let of_mountains: Vec<_> = hits.iter().filter(|h| h.0 == mountains).collect();
    assert_eq!(
        of_mountains.len() as i64,
        chunks,
        "every chunk once: {body}"
    );
    assert!(
        of_mountains.iter().all(|h| h.2 == old.as_str()),
        "read under the old version only, not through its half-written new set: {body}"
    );
    assert!(
        hits.iter()
            .filter(|h| h.0 == rivers)
            .all(|h| h.2 == new.as_str()),
        "{body}"
    );
    assert_eq!(body["model_version"], new.as_str());
    assert_eq!(body["partial"], false);
    assert_eq!(
        body["versions"],
        json!([
            { "model_version": new, "role": "active", "documents": null, "searched": true, "reason": null },
            { "model_version": old, "role": "fallback", "documents": 1, "searched": true, "reason": null },
        ])
    );
    let body = search(&api, rivers_query, "vector").await;
    let hits = hit_versions(&body);
    assert_eq!(hits[0], (rivers, 0, json!(new)), "{body}");
    assert!(
        hits.iter().all(|h| h.0 != mountains || h.2 == old.as_str()),
        "{body}"
    );
    let body = search(&api, "glaciers alpine meadows", "hybrid").await;
    assert_eq!(hit_versions(&body)[0].0, mountains, "{body}");
    assert_eq!(hit_versions(&body)[0].2, old.as_str(), "{body}");
    // Asking for one document searches it where it is read.
    let response = api
        .client
        .get(api.url("/api/search"))
        .query(&[
            ("q", "glaciers"),
            ("mode", "vector"),
            ("document", &mountains.to_string()),
        ])
        .send()
        .await
        .expect("search");
    let body: Value = response.json().await.expect("json");
    assert!(!hit_versions(&body).is_empty(), "{body}");
    assert!(
        hit_versions(&body)
            .iter()
            .all(|h| h.0 == mountains && h.2 == old.as_str()),
        "{body}"
    );

    // Once its new set is whole, the document is read under the new version only.
    enqueue(&pool, embed_under_new(mountains)).await;
    worker.run_due().await;
    let body = search(&api, "glaciers alpine meadows mountain ridge", "vector").await;
    let hits = hit_versions(&body);
    assert_eq!(hits[0].0, mountains, "{body}");
    assert!(hits.iter().all(|h| h.2 == new.as_str()), "{body}");
    assert_eq!(
        body["versions"],
        json!([{ "model_version": new, "role": "active", "documents": null, "searched": true, "reason": null }])
    );
}
