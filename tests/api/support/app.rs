//! The one way a test starts docket: `TestApp::builder(pool)`, named options, `.spawn()`.
//! It builds the HTTP state with the product's own [`AppState::builder`] and serves the real
//! router on a loopback port; the same embedder and chunking make the app's pipeline, so a
//! test writes its fixtures the way a user does (upload, then [`TestWorker::run_until_idle`])
//! and searches them with the version they were embedded under.

use std::sync::Arc;
use std::time::Duration;

use docket::chunk::ChunkConfig;
use docket::embed::{Embedder, HashEmbedder};
use docket::http::{self, AppState, Guard};
use docket::models::ModelVersion;
use docket::pipeline::Pipeline;
use docket::queue::Queue;
use docket::search::Searcher;
use docket::webhooks::Targets;
use docket::worker::{Registry, Worker, WorkerConfig};
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

/// Options for a [`TestApp`]; see [`TestApp::builder`].
pub struct TestAppBuilder {
    pool: PgPool,
    token: Option<String>,
    max_upload_bytes: u64,
    guard: Option<Guard>,
    embedder: Embedder,
    chunking: ChunkConfig,
    searcher: Option<Searcher>,
    webhook_targets: Targets,
}

impl TestAppBuilder {
    /// Where webhooks may go, at registration and delivery (unless set: loopback permitted,
    /// as `DOCKET_WEBHOOK_ALLOW_LOOPBACK=true` does, since test receivers listen on loopback).
    pub fn webhook_targets(mut self, targets: Targets) -> Self {
        self.webhook_targets = targets;
        self
    }

    /// The bearer token `/api` requires (none: `/api` is open).
    pub fn token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    /// The largest file one upload may carry (1 MiB unless set).
    pub fn max_upload_bytes(mut self, bytes: u64) -> Self {
        self.max_upload_bytes = bytes;
        self
    }

    /// The HTTP checks and bounds, as given (unless set: the defaults, with database gauges
    /// read afresh at every scrape, since tests read them right after changing the database).
    pub fn guard(mut self, guard: Guard) -> Self {
        self.guard = Some(guard);
        self
    }

    /// What embeds queries and, in [`TestApp::pipeline`], chunks (the 384-dimension hashing
    /// embedder unless set).
    pub fn embedder(mut self, embedder: Embedder) -> Self {
        self.embedder = embedder;
        self
    }

    /// How [`TestApp::pipeline`] cuts text, which is part of the app's model version (the
    /// default chunking unless set).
    pub fn chunking(mut self, chunking: ChunkConfig) -> Self {
        self.chunking = chunking;
        self
    }

    /// Searches run through `searcher` (e.g. one with replicas) instead of one built from the
    /// embedder and chunking; it should search under the same version.
    pub fn searcher(mut self, searcher: Searcher) -> Self {
        self.searcher = Some(searcher);
        self
    }

    /// Serves the router on 127.0.0.1 until the [`TestApp`] is dropped.
    pub async fn spawn(self) -> TestApp {
        let model = ModelVersion::of(&self.embedder, &self.chunking);
        // Tests of ranking see every hit; the relevance tests pass a searcher with the default
        // threshold (tests/api/relevance.rs).
        let searcher = self.searcher.unwrap_or_else(|| {
            Searcher::new(self.pool.clone(), self.embedder.clone(), model.clone())
                .returning_every_hit()
        });
        let guard = self.guard.unwrap_or_else(|| Guard {
            gauges: Arc::new(docket::metrics::GaugeCache::new(Duration::ZERO)),
            ..Guard::default()
        });
        let stop = CancellationToken::new();
        let state = AppState::builder(self.pool.clone(), Arc::new(searcher))
            .queue(Queue::new(self.pool.clone(), Duration::from_secs(30)))
            .api_token(self.token.as_deref())
            .max_upload_bytes(self.max_upload_bytes)
            .guard(guard)
            .webhook_targets(self.webhook_targets.clone())
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
        TestApp {
            base,
            client: reqwest::Client::new(),
            pool: self.pool,
            embedder: self.embedder,
            chunking: self.chunking,
            model,
            webhook_targets: self.webhook_targets,
            stop,
        }
    }
}

/// A running docket API on 127.0.0.1, a client for it, and the pipeline behind it.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub pool: PgPool,
    embedder: Embedder,
    chunking: ChunkConfig,
    model: ModelVersion,
    webhook_targets: Targets,
    stop: CancellationToken,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestApp {
    /// Options for an app over `pool` (a `#[sqlx::test]` database).
    pub fn builder(pool: PgPool) -> TestAppBuilder {
        TestAppBuilder {
            pool,
            token: None,
            max_upload_bytes: 1024 * 1024,
            guard: None,
            embedder: Embedder::Hash(HashEmbedder::new(384)),
            chunking: ChunkConfig::default(),
            searcher: None,
            webhook_targets: Targets::new(true),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The version the app's embedder and chunking make (what its worker embeds under).
    pub fn model(&self) -> &ModelVersion {
        &self.model
    }

    /// The app's pipeline, prepared: its version registered, and active unless another is;
    /// its webhooks go where the app's registrations may.
    pub async fn pipeline(&self) -> Arc<Pipeline> {
        let pipeline = Pipeline::new(
            self.pool.clone(),
            self.embedder.clone(),
            self.chunking,
            super::extract_settings(),
        )
        .with_webhooks(self.webhook_targets.clone());
        pipeline
            .prepare()
            .await
            .expect("register the model version");
        Arc::new(pipeline)
    }

    /// A worker running the app's pipeline (one embed job at a time), for the test to drive.
    pub async fn worker(&self) -> TestWorker {
        TestWorker::new(&self.pool, &self.pipeline().await, 1)
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

    /// `GET /api/search?{query}`: the status and the JSON body.
    pub async fn search(&self, query: &str) -> (StatusCode, Value) {
        let response = self
            .client
            .get(self.url(&format!("/api/search?{query}")))
            .send()
            .await
            .expect("search request");
        let status = response.status();
        (status, response.json().await.expect("JSON body"))
    }

    /// Sends `files` as one multipart upload; answers the status and the JSON body.
    pub async fn upload(&self, files: &[(&str, Vec<u8>)]) -> (StatusCode, Value) {
        self.upload_to("/api/documents", None, files).await
    }

    /// [`TestApp::upload`] to `path` (e.g. with `?collection=`), with `secret` as the bearer
    /// token when given.
    pub async fn upload_to(
        &self,
        path: &str,
        secret: Option<&str>,
        files: &[(&str, Vec<u8>)],
    ) -> (StatusCode, Value) {
        let mut form = reqwest::multipart::Form::new();
        for (name, bytes) in files {
            form = form.part(
                "file",
                reqwest::multipart::Part::bytes(bytes.clone()).file_name((*name).to_owned()),
            );
        }
        let mut request = self.client.post(self.url(path)).multipart(form);
        if let Some(secret) = secret {
            request = request.bearer_auth(secret);
        }
        let response = request.send().await.expect("upload request");
        let status = response.status();
        (status, response.json().await.expect("upload answers JSON"))
    }

    /// Uploads one new file and returns its document id.
    pub async fn upload_one(&self, name: &str, bytes: Vec<u8>) -> i64 {
        let (status, body) = self.upload(&[(name, bytes)]).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        body["results"][0]["document"]["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("no document id in {body}"))
    }

    /// Uploads `paragraphs` as one text file (a blank line between them), runs the app's
    /// pipeline until idle and checks that each paragraph became one chunk, in order: a search
    /// fixture written by the real write path. Returns the document id.
    pub async fn upload_paragraphs(&self, name: &str, paragraphs: &[String]) -> i64 {
        let id = self
            .upload_one(name, paragraphs.join("\n\n").into_bytes())
            .await;
        self.worker().await.run_until_idle().await;
        let texts: Vec<String> = super::chunks(&self.pool, id)
            .await
            .into_iter()
            .map(|(_, text)| text)
            .collect();
        assert_eq!(
            texts, paragraphs,
            "{name}: each paragraph is one chunk (choose the app's chunking to fit)"
        );
        id
    }

    /// `GET /api/documents/{id}` as JSON (panics unless 200).
    pub async fn document(&self, id: i64) -> Value {
        let response = self
            .client
            .get(self.url(&format!("/api/documents/{id}")))
            .send()
            .await
            .expect("get document");
        assert_eq!(response.status(), StatusCode::OK);
        response.json().await.expect("document JSON")
    }
}

/// A worker running only a pipeline's handlers, driven step by step by the test.
pub struct TestWorker {
    pool: PgPool,
    worker: Worker,
}

impl TestWorker {
    /// Runs `pipeline`'s jobs, `embed` jobs `embed_concurrency` at a time.
    pub fn new(pool: &PgPool, pipeline: &Arc<Pipeline>, embed_concurrency: usize) -> TestWorker {
        let mut registry = Registry::new();
        pipeline.register(&mut registry);
        registry
            .set_concurrency("extract", 2)
            .set_concurrency("embed", embed_concurrency);
        let lease = Duration::from_secs(30);
        let mut config = WorkerConfig::for_lease(lease);
        config.poll_interval = Duration::from_millis(100);
        TestWorker {
            pool: pool.clone(),
            worker: Worker::new(Queue::new(pool.clone(), lease), registry, config),
        }
    }

    /// Runs jobs until none is ready or running, moving backoff delays to now instead of
    /// sleeping through them; panics after 20 rounds.
    pub async fn run_until_idle(&self) {
        self.run_until_idle_within(20).await;
    }

    /// [`Self::run_until_idle`], panicking after `rounds` rounds.
    pub async fn run_until_idle_within(&self, rounds: usize) {
        for _ in 0..rounds {
            self.worker.run_until_idle().await.expect("run jobs");
            let pending: i64 = sqlx::query_scalar(
                "select count(*) from jobs where status in ('ready', 'running')",
            )
            .fetch_one(&self.pool)
            .await
            .expect("count pending jobs");
            if pending == 0 {
                return;
            }
            super::make_due(&self.pool).await;
        }
        panic!("jobs still pending after {rounds} rounds");
    }

    /// Claims and runs the due jobs until none is left, without moving any delay; answers
    /// how many ran.
    pub async fn run_due(&self) -> usize {
        self.worker.run_until_idle().await.expect("run jobs")
    }

    /// The worker itself, to run in the background with [`Worker::run`].
    pub fn into_worker(self) -> Worker {
        self.worker
    }
}
