//! What the tests share: a real HTTP server on loopback over a test database, the URL of that
//! database for child processes, and small queue helpers.

use std::sync::Arc;
use std::time::Duration;

use docket::http::{self, AppState};
use docket::queue::{self, JobId, NewJob, Queue};

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
}

/// Serves the real router for `pool` on a loopback port; `token` protects `/api` when set.
pub async fn spawn_api(pool: sqlx::PgPool, token: Option<&str>) -> Api {
    let stop = tokio_util::sync::CancellationToken::new();
    let embedder = docket::embed::Embedder::Hash(docket::embed::HashEmbedder::new(384));
    let model = docket::models::ModelVersion::of(
        &embedder,
        &docket::pipeline::chunk::ChunkConfig::default(),
    );
    let events = http::EventHub::start(pool.clone(), stop.clone());
    // Tests watching events must not miss the first ones to a LISTEN still connecting.
    events.listening().await;
    let state = AppState {
        searcher: Arc::new(docket::search::Searcher::new(pool.clone(), embedder, model)),
        events: events.clone(),
        queue: Queue::new(pool.clone(), Duration::from_secs(30)),
        pool,
        job_kinds: Arc::new(vec!["noop".to_owned(), "sleep".to_owned()]),
        api_token: token.map(Arc::from),
        max_upload_bytes: 1024 * 1024,
    };
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
