//! What the tests share: a real HTTP server on loopback over a test database, the URL of that
//! database for child processes, small queue helpers, and the pipeline wired as `docket serve`
//! wires it (real extraction child, hash or OpenAI-compatible embedder) for driving uploads.

use std::sync::Arc;
use std::time::Duration;

use docket::chunk::ChunkConfig;
use docket::embed::{
    Embedder, HashEmbedder, Limiter, LocalConfig, LocalEmbedder, OpenAiConfig, OpenAiEmbedder,
    RateLimits,
};
use docket::extract::ExtractSettings;
use docket::http::{self, AppState};
use docket::pipeline::{Pipeline, PipelineConcurrency};
use docket::queue::{self, JobId, NewJob, Queue};
use docket::worker::{Registry, Worker, WorkerConfig};
use docket_testkit::embedding_server::EmbeddingServer;
use reqwest::StatusCode;
use serde_json::Value;

/// A running API on 127.0.0.1 and a client for it.
pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for Api {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Api {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// GETs `path` and parses the JSON body, whatever the status.
    pub async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let response = self.client.get(self.url(path)).send().await.expect("GET");
        response.json().await.expect("a JSON body")
    }

    /// POSTs to `path` with no body and parses the JSON answer, whatever the status.
    pub async fn post_json<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let response = self.client.post(self.url(path)).send().await.expect("POST");
        response.json().await.expect("a JSON body")
    }
}

/// Serves the real router for `pool` on a loopback port; `token` protects `/api` when set.
pub async fn spawn_api(pool: sqlx::PgPool, token: Option<&str>) -> Api {
    spawn_api_with_limit(pool, token, 1024 * 1024).await
}

/// [`spawn_api`] with a chosen per-file upload limit.
pub async fn spawn_api_with_limit(
    pool: sqlx::PgPool,
    token: Option<&str>,
    max_upload_bytes: u64,
) -> Api {
    // Tests read the gauges right after changing the database: no caching here.
    let guard = http::Guard {
        gauges: Arc::new(docket::metrics::GaugeCache::new(Duration::ZERO)),
        ..http::Guard::default()
    };
    spawn_api_with(pool, token, max_upload_bytes, guard).await
}

/// [`spawn_api`] with a chosen upload limit and HTTP checks and bounds.
pub async fn spawn_api_with(
    pool: sqlx::PgPool,
    token: Option<&str>,
    max_upload_bytes: u64,
    guard: http::Guard,
) -> Api {
    let embedder = docket::embed::Embedder::Hash(docket::embed::HashEmbedder::new(384));
    spawn_api_serving(pool, token, max_upload_bytes, guard, embedder).await
}

/// [`spawn_api_with_limit`] whose searches embed queries with `embedder`.
pub async fn spawn_api_embedding_with(
    pool: sqlx::PgPool,
    token: Option<&str>,
    max_upload_bytes: u64,
    embedder: Embedder,
) -> Api {
    let guard = http::Guard {
        gauges: Arc::new(docket::metrics::GaugeCache::new(Duration::ZERO)),
        ..http::Guard::default()
    };
    spawn_api_serving(pool, token, max_upload_bytes, guard, embedder).await
}

async fn spawn_api_serving(
    pool: sqlx::PgPool,
    token: Option<&str>,
    max_upload_bytes: u64,
    guard: http::Guard,
    embedder: Embedder,
) -> Api {
    let model = docket::models::ModelVersion::of(&embedder, &docket::chunk::ChunkConfig::default());
    let searcher = docket::search::Searcher::new(pool.clone(), embedder, model);
    spawn_api_searching_with(pool, token, max_upload_bytes, guard, searcher).await
}

/// [`spawn_api_with_limit`] whose searches run through `searcher` (e.g. one with replicas).
pub async fn spawn_api_searching(pool: sqlx::PgPool, searcher: docket::search::Searcher) -> Api {
    let guard = http::Guard {
        gauges: Arc::new(docket::metrics::GaugeCache::new(Duration::ZERO)),
        ..http::Guard::default()
    };
    spawn_api_searching_with(pool, None, 1024 * 1024, guard, searcher).await
}

async fn spawn_api_searching_with(
    pool: sqlx::PgPool,
    token: Option<&str>,
    max_upload_bytes: u64,
    guard: http::Guard,
    searcher: docket::search::Searcher,
) -> Api {
    let stop = tokio_util::sync::CancellationToken::new();
    let state = AppState::builder(pool.clone(), Arc::new(searcher))
        .queue(Queue::new(pool, Duration::from_secs(30)))
        .api_token(token)
        .max_upload_bytes(max_upload_bytes)
        .guard(guard)
        .start(stop.clone());
    // Tests watching events must not miss the first ones to a LISTEN still connecting.
    state.events.listening().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let base = format!("http://{}", listener.local_addr().expect("local addr"));
    tokio::spawn(http::serve(
        listener,
        http::router(state),
        stop.clone().cancelled_owned(),
    ));
    Api {
        base,
        client: reqwest::Client::new(),
        stop,
    }
}

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

/// The bytes of `fixtures/<relative>`.
/// Loads the local model installed in `dir` on two threads, or fails saying how to install it
/// (`install` is the command); local-model tests never skip.
pub fn load_local_model(dir: std::path::PathBuf, install: &str) -> LocalEmbedder {
    assert!(
        dir.join("model.safetensors").is_file(),
        "no local model is installed in {}: run {install} (make test does it first)",
        dir.display()
    );
    LocalEmbedder::load(&LocalConfig {
        model_dir: dir,
        threads: 2,
    })
    .expect("the installed model loads")
}

pub fn fixture(relative: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(relative);
    std::fs::read(&path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
}

/// PDF limits with the real `docket __extract-pdf` child, bounded so a hostile file cannot
/// stall a test for the production minute.
pub fn extract_settings() -> ExtractSettings {
    ExtractSettings {
        timeout: Duration::from_secs(15),
        ..ExtractSettings::new(env!("CARGO_BIN_EXE_docket").into())
    }
}

/// A prepared pipeline (model version registered and active) embedding with `embedder`.
pub async fn pipeline(pool: &sqlx::PgPool, embedder: Embedder) -> Arc<Pipeline> {
    let pipeline = Pipeline::new(
        pool.clone(),
        embedder,
        ChunkConfig::default(),
        extract_settings(),
    );
    pipeline
        .prepare()
        .await
        .expect("register the model version");
    Arc::new(pipeline)
}

/// The offline pipeline: the deterministic hashing embedder.
pub async fn hash_pipeline(pool: &sqlx::PgPool) -> Arc<Pipeline> {
    pipeline(pool, Embedder::Hash(HashEmbedder::new(64))).await
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

/// A worker running only the pipeline's handlers, `embed` jobs `embed_concurrency` at a time.
pub fn pipeline_worker(
    pool: &sqlx::PgPool,
    pipeline: &Arc<Pipeline>,
    embed_concurrency: usize,
) -> Worker {
    let mut registry = Registry::new();
    pipeline.register(
        &mut registry,
        PipelineConcurrency {
            extract: 2,
            embed: embed_concurrency,
        },
    );
    let lease = Duration::from_secs(30);
    let mut config = WorkerConfig::for_lease(lease);
    config.poll_interval = Duration::from_millis(100);
    Worker::new(Queue::new(pool.clone(), lease), registry, config)
}

/// Runs `worker` step by step until no job is ready or running, moving backoff delays to now
/// instead of sleeping through them. Panics after `limit` rounds.
pub async fn drive(pool: &sqlx::PgPool, worker: &Worker, limit: usize) {
    for _ in 0..limit {
        worker.run_until_idle().await.expect("run jobs");
        let pending: i64 =
            sqlx::query_scalar("select count(*) from jobs where status in ('ready', 'running')")
                .fetch_one(pool)
                .await
                .expect("count pending jobs");
        if pending == 0 {
            return;
        }
        make_due(pool).await;
    }
    panic!("jobs still pending after {limit} rounds");
}

/// Sends `files` as one multipart upload; answers the status and the JSON body.
pub async fn upload(api: &Api, files: &[(&str, Vec<u8>)]) -> (StatusCode, Value) {
    let mut form = reqwest::multipart::Form::new();
    for (name, bytes) in files {
        form = form.part(
            "file",
            reqwest::multipart::Part::bytes(bytes.clone()).file_name((*name).to_owned()),
        );
    }
    let response = api
        .client
        .post(api.url("/api/documents"))
        .multipart(form)
        .send()
        .await
        .expect("upload request");
    let status = response.status();
    (status, response.json().await.expect("upload answers JSON"))
}

/// Uploads one new file and returns its document id.
pub async fn upload_one(api: &Api, name: &str, bytes: Vec<u8>) -> i64 {
    let (status, body) = upload(api, &[(name, bytes)]).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["results"][0]["document"]["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("no document id in {body}"))
}

/// `GET /api/documents/{id}` as JSON (panics unless 200).
pub async fn document(api: &Api, id: i64) -> Value {
    let response = api
        .client
        .get(api.url(&format!("/api/documents/{id}")))
        .send()
        .await
        .expect("get document");
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.expect("document JSON")
}

/// The texts of a document's chunks with their pages, in order.
pub async fn chunks(pool: &sqlx::PgPool, id: i64) -> Vec<(i32, String)> {
    sqlx::query_as("select page, text from chunks where document_id = $1 order by chunk_index")
        .bind(id)
        .fetch_all(pool)
        .await
        .expect("chunks")
}
