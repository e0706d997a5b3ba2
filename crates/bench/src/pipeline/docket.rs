//! The pieces `docket bench pipeline` is built from: docket serving in this process on a
//! scratch database (created on DATABASE_URL's server, dropped afterwards), the served
//! configuration, and the generated documents (pseudo-English from a seeded RNG: repeatable, and
//! every document distinct).

use std::num::NonZeroU32;

use anyhow::Context as _;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use sqlx::Connection as _;

use docket::app::App;
use docket::config::{DatabaseConfig, EmbedderKind, PipelineSettings, ServeConfig, WorkerSettings};
use docket::embed::{OpenAiConfig, Precision};
use docket::ingest::{UploadBody, UploadFile, Uploader};
use docket_testkit::{EmbeddingServer, StatsSnapshot};

/// The scratch database, created and dropped by each phase (spelled out literally in its
/// `create`/`drop` statements too: identifiers cannot be bound parameters).
pub(super) const SCRATCH_DATABASE: &str = "docket_bench_pipeline";
/// Vector size of the test server and of docket's model.
pub(super) const DIMS: usize = 384;
/// Files per upload request.
const UPLOAD_BATCH: usize = 50;

/// Uploads every document through `uploader`, a batch per request; all must be new.
async fn upload_with(uploader: &Uploader, documents: Vec<(String, String)>) -> anyhow::Result<()> {
    let mut documents = documents.into_iter().peekable();
    while documents.peek().is_some() {
        let batch: Vec<UploadFile> = documents
            .by_ref()
            .take(UPLOAD_BATCH)
            .map(|(filename, text)| UploadFile {
                filename,
                body: UploadBody::Bytes(text.into_bytes()),
            })
            .collect();
        for outcome in uploader.upload(batch).await? {
            anyhow::ensure!(
                matches!(outcome, docket::ingest::FileOutcome::New { .. }),
                "a generated document was not stored as new: {outcome:?}"
            );
        }
    }
    Ok(())
}

/// Requests the server answered with vectors.
pub(super) fn answered(stats: &StatsSnapshot) -> u64 {
    stats.requests.saturating_sub(
        stats.rate_limited
            + stats.server_errors
            + stats.drops
            + stats.unauthorized
            + stats.bad_requests,
    )
}

pub(super) fn openai_config(server: &EmbeddingServer) -> OpenAiConfig {
    let mut config = OpenAiConfig::new(server.base_url.clone(), "docket-bench");
    config.dimensions = Some(DIMS as u32);
    config
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Provider {
    Hash,
    TestServer,
    /// The installed default local model, in this precision.
    Local(Precision),
}

impl Provider {
    pub(super) fn label(self) -> &'static str {
        match self {
            Provider::Hash => "hash embedder",
            Provider::TestServer => "test server",
            Provider::Local(_) => "local model",
        }
    }
}

/// docket serving in this process on a fresh scratch database.
/// What [`Docket::measure_window`] saw: the server's stats at both ends, and the documents that
/// became ready in between.
pub(super) struct Window {
    pub(super) before: StatsSnapshot,
    pub(super) after: StatsSnapshot,
    pub(super) ready: i64,
}

pub(super) struct Docket {
    pub(super) pool: sqlx::PgPool,
    /// Where it serves (`http://127.0.0.1:PORT`).
    pub(super) base_url: String,
    uploader: Uploader,
    admin_url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Docket {
    pub(super) async fn start(
        database_url: &str,
        provider: Provider,
        rpm: Option<NonZeroU32>,
        server: Option<&EmbeddingServer>,
        workers: bool,
    ) -> anyhow::Result<Docket> {
        let url = scratch_url(database_url);
        recreate_scratch(database_url).await?;
        let mut config = serve_config(&url, provider, rpm, server);
        config.no_workers = !workers;
        let app = App::build(config).await.context("starting docket")?;
        let address = app.local_addr().context("reading docket's address")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&url)
            .await
            .context("connecting to the scratch database")?;
        let base_url = format!("http://{address}");
        let uploader = Uploader::new(&base_url, None, indicatif::ProgressBar::hidden())?;
        Ok(Docket {
            pool,
            base_url,
            uploader,
            admin_url: database_url.to_owned(),
            stop,
            serving,
        })
    }

    /// Uploads every document; all must be accepted as new.
    pub(super) async fn upload(&self, documents: Vec<(String, String)>) -> anyhow::Result<()> {
        upload_with(&self.uploader, documents).await
    }

    /// [`Docket::upload`] into the collection `name`.
    pub(super) async fn upload_into(
        &self,
        name: &str,
        documents: Vec<(String, String)>,
    ) -> anyhow::Result<()> {
        let uploader = Uploader::new(&self.base_url, None, indicatif::ProgressBar::hidden())?
            .into_collection(name);
        upload_with(&uploader, documents).await
    }

    /// Uploads real files (any outcome: a corpus may hold files docket refuses).
    pub(super) async fn upload_files(&self, files: Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        let mut files = files.into_iter().peekable();
        while files.peek().is_some() {
            let batch: Vec<UploadFile> = files
                .by_ref()
                .take(UPLOAD_BATCH)
                .map(|(filename, bytes)| UploadFile {
                    filename,
                    body: UploadBody::Bytes(bytes),
                })
                .collect();
            self.uploader.upload(batch).await?;
        }
        Ok(())
    }

    /// Waits (at most 120 s) for the first answered embedding request, then measures `seconds`:
    /// the server's stats and the ready documents at the start and at the end of the window.
    pub(super) async fn measure_window(
        &self,
        server: &EmbeddingServer,
        seconds: u64,
    ) -> anyhow::Result<Window> {
        let started = std::time::Instant::now();
        while answered(&server.stats()) == 0 {
            anyhow::ensure!(
                started.elapsed() < std::time::Duration::from_secs(120),
                "no embedding request arrived within 120 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let before = server.stats();
        let ready_before = self.ready().await?;
        tokio::time::sleep(std::time::Duration::from_secs(seconds)).await;
        Ok(Window {
            before,
            after: server.stats(),
            ready: self.ready().await? - ready_before,
        })
    }

    pub(super) async fn ready(&self) -> anyhow::Result<i64> {
        Ok(self.finished().await?.0)
    }

    /// Documents ready and failed.
    pub(super) async fn finished(&self) -> anyhow::Result<(i64, i64)> {
        sqlx::query_as(
            "select count(*) filter (where status = 'ready'),
                    count(*) filter (where status = 'failed')
             from documents",
        )
        .fetch_one(&self.pool)
        .await
        .context("counting finished documents")
    }

    pub(super) async fn chunks_per_ready_document(&self) -> anyhow::Result<f64> {
        let ratio: Option<f64> = sqlx::query_scalar(
            "select count(c.*)::float8 / nullif(count(distinct d.id), 0)
             from documents d
             join chunks c on c.document_id = d.id
             where d.status = 'ready'",
        )
        .fetch_one(&self.pool)
        .await
        .context("counting chunks")?;
        Ok(ratio.unwrap_or(0.0))
    }

    /// Stops docket and drops the scratch database.
    pub(super) async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.serving
            .await
            .context("the docket task failed")?
            .context("docket failed")?;
        self.pool.close().await;
        drop_scratch(&self.admin_url).await
    }
}

pub(super) fn serve_config(
    url: &str,
    provider: Provider,
    rpm: Option<NonZeroU32>,
    server: Option<&EmbeddingServer>,
) -> ServeConfig {
    ServeConfig {
        database: DatabaseConfig {
            database_url: url.to_owned(),
            db_pool: 16,
        },
        bind: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        api_token: None,
        max_upload_bytes: 50 * 1024 * 1024,
        no_workers: false,
        http: Default::default(),
        worker: WorkerSettings {
            lease_secs: 60,
            concurrency: 4,
            claim_batch: 10,
            poll_ms: 2000,
            // In-flight jobs at the end are abandoned with the scratch database.
            shutdown_grace_secs: 1,
            rescue_secs: 5,
            retention_hours: 168,
            embedding_cache_entries: 500_000,
            // The nightly schedule has nothing to do with this measurement.
            no_scheduler: true,
            scheduler_tick_secs: 15,
        },
        pipeline: PipelineSettings {
            embedder: Some(match provider {
                Provider::Hash => EmbedderKind::Hash,
                Provider::TestServer => EmbedderKind::Openai,
                Provider::Local(_) => EmbedderKind::Local,
            }),
            model_dir: None,
            embed_threads: None,
            local_precision: match provider {
                Provider::Local(precision) => precision,
                Provider::Hash | Provider::TestServer => Precision::F32,
            },
            hash_dims: DIMS,
            openai_base_url: server.map(|s| s.base_url.clone()).unwrap_or_default(),
            openai_api_key: None,
            openai_model: "docket-bench".into(),
            openai_dimensions: Some(DIMS as u32),
            rpm,
            tpm: None,
            rate_window_secs: 60,
            rate_latency_allowance_ms: 1000,
            chunk_tokens: 200,
            chunk_overlap: 30,
            extract_timeout_secs: 60,
            extract_memory_mb: 1024,
            extract_concurrency: None,
            embed_concurrency: None,
            ocr: true,
            webhook_allow_loopback: false,
            webhook_concurrency: None,
            ocr_langs: "auto".into(),
            ocr_max_pages: 200,
            ocr_concurrency: None,
        },
    }
}

/// DATABASE_URL with its database name replaced by the scratch database's.
pub(super) fn scratch_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut scratch = format!("{}/{SCRATCH_DATABASE}", &base[..path_start]);
    if let Some(query) = query {
        scratch.push('?');
        scratch.push_str(query);
    }
    scratch
}

pub(super) async fn recreate_scratch(admin_url: &str) -> anyhow::Result<()> {
    drop_scratch(admin_url).await?;
    let mut admin = sqlx::PgConnection::connect(admin_url)
        .await
        .context("connecting to DATABASE_URL")?;
    sqlx::query("create database docket_bench_pipeline")
        .execute(&mut admin)
        .await
        .context("creating the scratch database")?;
    Ok(())
}

pub(super) async fn drop_scratch(admin_url: &str) -> anyhow::Result<()> {
    let mut admin = sqlx::PgConnection::connect(admin_url)
        .await
        .context("connecting to DATABASE_URL")?;
    // `with (force)` ends connections a previous, interrupted run may have left.
    sqlx::query("drop database if exists docket_bench_pipeline with (force)")
        .execute(&mut admin)
        .await
        .context("dropping the scratch database")?;
    Ok(())
}

/// `count` distinct generated text documents of `paragraphs` paragraphs each.
pub(super) fn documents(count: usize, paragraphs: usize, seed: u64) -> Vec<(String, String)> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..count)
        .map(|n| {
            let mut text = format!("Document {n} of seed {seed}\n\n");
            for _ in 0..paragraphs {
                let sentences = rng.random_range(4..=6);
                for _ in 0..sentences {
                    text.push_str(&sentence(&mut rng));
                    text.push(' ');
                }
                text.push_str("\n\n");
            }
            (format!("bench-{seed}-{n:05}.txt"), text)
        })
        .collect()
}

/// One sentence of 8 to 15 pseudo-words.
pub(super) fn sentence(rng: &mut StdRng) -> String {
    const SYLLABLES: [&str; 24] = [
        "ka", "lo", "mi", "ter", "sun", "val", "dor", "pe", "ri", "chan", "mo", "tis", "ba", "gen",
        "ul", "fra", "net", "os", "qui", "ram", "se", "to", "vin", "yel",
    ];
    let words = rng.random_range(8..=15);
    let mut sentence = String::new();
    for i in 0..words {
        if i > 0 {
            sentence.push(' ');
        }
        let syllables = rng.random_range(1..=3);
        let mut word = String::new();
        for _ in 0..syllables {
            word.push_str(SYLLABLES[rng.random_range(0..SYLLABLES.len())]);
        }
        if i == 0 {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                word = first.to_uppercase().chain(chars).collect();
            }
        }
        sentence.push_str(&word);
    }
    sentence.push('.');
    sentence
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_url_keeps_credentials_host_and_options() {
        assert_eq!(
            scratch_url("postgres://u:p@127.0.0.1:5432/docket?sslmode=disable"),
            "postgres://u:p@127.0.0.1:5432/docket_bench_pipeline?sslmode=disable"
        );
        assert_eq!(
            scratch_url("postgres://postgres@localhost"),
            "postgres://postgres@localhost/docket_bench_pipeline"
        );
    }

    #[test]
    fn generated_documents_are_distinct_and_repeatable() {
        let first = documents(50, 3, 7);
        let again = documents(50, 3, 7);
        assert_eq!(first, again);
        let distinct: std::collections::HashSet<&String> = first.iter().map(|(_, t)| t).collect();
        assert_eq!(distinct.len(), 50);
    }
}
