//! What the tests share: [`TestApp`], the one way to start docket (a real HTTP server on
//! loopback over a test database, with its pipeline and a worker the test drives), the URL of
//! that database for child processes, small queue helpers, and pipelines wired as `docket serve`
//! wires them (real extraction child, hash or OpenAI-compatible embedder).

mod app;
pub mod receiver;

pub use app::{TestApp, TestWorker};

use std::sync::Arc;
use std::time::Duration;

use docket::chunk::ChunkConfig;
use docket::embed::{
    Embedder, Limiter, LocalConfig, LocalEmbedder, OpenAiConfig, OpenAiEmbedder, Precision,
    RateLimits,
};
use docket::extract::ExtractSettings;
use docket::pipeline::Pipeline;
use docket::queue::{self, JobId, NewJob};
use docket_testkit::embedding_server::EmbeddingServer;

/// The URL of the database behind `pool` (a `#[sqlx::test]` database), for child processes.
pub async fn database_url(pool: &sqlx::PgPool) -> String {
    let name: String = sqlx::query_scalar("select current_database()")
        .fetch_one(pool)
        .await
        .expect("current database");
    let mut url = url::Url::parse(&std::env::var("DATABASE_URL").expect("DATABASE_URL is set"))
        .expect("DATABASE_URL is a URL");
    url.set_path(&name);
    url.to_string()
}

/// Enqueues one job outside any other transaction.
pub async fn enqueue(pool: &sqlx::PgPool, job: NewJob) -> JobId {
    let mut conn = pool.acquire().await.expect("connection");
    queue::enqueue(&mut conn, &job).await.expect("enqueue").id
}

/// A job's status, attempts and error history length.
pub async fn job_state(pool: &sqlx::PgPool, id: JobId) -> (String, i32, i64) {
    sqlx::query_as(
        "select status, attempts, jsonb_array_length(errors)::bigint from jobs where id = $1",
    )
    .bind(id.0)
    .fetch_one(pool)
    .await
    .expect("job exists")
}

/// Makes every ready job due now: tests move time forward instead of sleeping through backoff.
pub async fn make_due(pool: &sqlx::PgPool) {
    sqlx::query("update jobs set run_at = now() where status = 'ready'")
        .execute(pool)
        .await
        .expect("make due");
}

/// Polls `check` every 20 ms until it is true; panics with `what` after `limit`.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Loads the local model installed in `dir` on two threads, or fails saying how to install it
/// (`install` is the command); local-model tests never skip.
pub fn load_local_model(dir: std::path::PathBuf, install: &str) -> LocalEmbedder {
    load_local_model_in(dir, install, Precision::F32)
}

/// [`load_local_model`] in a chosen precision.
pub fn load_local_model_in(
    dir: std::path::PathBuf,
    install: &str,
    precision: Precision,
) -> LocalEmbedder {
    assert!(
        dir.join("model.safetensors").is_file(),
        "no local model is installed in {}: run {install} (make test does it first)",
        dir.display()
    );
    LocalEmbedder::load(&LocalConfig {
        model_dir: dir,
        threads: 2,
        precision,
    })
    .expect("the installed model loads")
}

/// The bytes of `fixtures/<relative>`.
pub fn fixture(relative: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(relative);
    std::fs::read(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

/// Extraction settings with the real `docket __extract-pdf` child, bounded so a hostile file cannot
/// stall a test for the production minute.
pub fn extract_settings() -> ExtractSettings {
    ExtractSettings {
        timeout: Duration::from_secs(15),
        ..ExtractSettings::new(env!("CARGO_BIN_EXE_docket").into())
    }
}

/// A prepared pipeline (model version registered, and active unless another is) embedding
/// with `embedder` and the default chunking.
pub async fn pipeline(pool: &sqlx::PgPool, embedder: Embedder) -> Arc<Pipeline> {
    pipeline_chunking(pool, embedder, ChunkConfig::default()).await
}

/// [`pipeline`] with a chosen chunking.
pub async fn pipeline_chunking(
    pool: &sqlx::PgPool,
    embedder: Embedder,
    chunking: ChunkConfig,
) -> Arc<Pipeline> {
    let pipeline = Pipeline::new(pool.clone(), embedder, chunking, extract_settings());
    pipeline
        .prepare()
        .await
        .expect("register the model version");
    Arc::new(pipeline)
}

/// An OpenAI-compatible embedder for `server`, with `tweak` applied to its settings.
pub fn openai_embedder(
    server: &EmbeddingServer,
    dims: u32,
    limits: RateLimits,
    tweak: impl FnOnce(&mut OpenAiConfig),
) -> Embedder {
    let mut config = OpenAiConfig::new(server.base_url.clone(), "docket-test-embedder");
    config.dimensions = Some(dims);
    tweak(&mut config);
    let limiter = Arc::new(Limiter::new(limits));
    Embedder::OpenAi(OpenAiEmbedder::new(config, limiter).expect("embedder config"))
}

/// The texts of a document's chunks with their pages, in order.
pub async fn chunks(pool: &sqlx::PgPool, id: i64) -> Vec<(i32, String)> {
    sqlx::query_as("select page, text from chunks where document_id = $1 order by chunk_index")
        .bind(id)
        .fetch_all(pool)
        .await
        .expect("chunks")
}
