//! `docket bench pipeline`: the embedding path, upload → extract → chunk → embed → ready.
//!
//! docket runs in this process ([`App`] on 127.0.0.1:0, real workers) against a scratch
//! database `docket_bench_pipeline` created on DATABASE_URL's server and dropped afterwards;
//! documents go in over HTTP through the same client as `docket ingest`; vectors come from the
//! test embedding server ([`crate::testkit::embedding_server`]) on loopback.
//!
//! Two measurements:
//!
//! 1. **Rate-limited.** The test server enforces `--rpm` requests per 60 s window and docket's
//!    limiter is set to the same RPM (DOCKET_RPM). More documents are uploaded than the limit
//!    lets through in `--seconds`, so the limiter is the bottleneck. From the first answered
//!    embedding request, requests answered during `--seconds` give the achieved rate; the aim
//!    is at least 95 % of the limit, with no 429.
//! 2. **Unlimited.** The same documents run twice, each on a fresh database: with the in-process
//!    hash embedder (no provider calls, so wall time per chunk is the pipeline's own cost:
//!    HTTP upload, sniffing, extraction, chunking, queue, inserts) and with the unlimited test
//!    server. The chunks are then embedded again directly, one call after another, with the
//!    hash embedder and through the HTTP provider, to show what the provider calls cost by
//!    themselves next to the pipeline's wall time per chunk.
//!
//! Documents are generated: pseudo-English text from a fixed vocabulary and a seeded RNG, so
//! runs are repeatable and every document is distinct (no duplicates).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::json;
use sqlx::Connection as _;

use crate::app::App;
use crate::config::{DatabaseConfig, EmbedderKind, PipelineSettings, ServeConfig, WorkerSettings};
use crate::embed::{HashEmbedder, Limiter, OpenAiConfig, OpenAiEmbedder};
use crate::ingest::{UploadBody, UploadFile, Uploader};
use crate::testkit::{self, EmbeddingServer, EmbeddingServerConfig, StatsSnapshot};

/// The scratch database, created and dropped by each phase (spelled out literally in its
/// `create`/`drop` statements too: identifiers cannot be bound parameters).
const SCRATCH_DATABASE: &str = "docket_bench_pipeline";
/// Vector size of the test server and of docket's model.
const DIMS: usize = 384;
/// Files per upload request.
const UPLOAD_BATCH: usize = 50;

/// Options of `docket bench pipeline`.
#[derive(Debug, clap::Args)]
pub struct PipelineBench {
    /// Server URL; the scratch database `docket_bench_pipeline` is created on it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,

    /// Requests per minute of the test server and of docket's limiter.
    #[arg(long, default_value_t = 120)]
    pub rpm: u32,

    /// Seconds the rate-limited phase is measured (keep it a multiple of the 60 s window).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,

    /// Documents of the unlimited phase.
    #[arg(long, default_value_t = 200)]
    pub docs: usize,

    /// Paragraphs per document of the unlimited phase (about 80 tokens each).
    #[arg(long, default_value_t = 12)]
    pub paragraphs: usize,
}

/// Runs the benchmark.
pub async fn run(args: PipelineBench) -> anyhow::Result<()> {
    let rpm = NonZeroU32::new(args.rpm).context("--rpm must be at least 1")?;
    anyhow::ensure!(args.seconds >= 10, "--seconds must be at least 10");
    let limited = rate_limited(&args, rpm).await?;
    let hash = unlimited(&args, Provider::Hash).await?;
    let http = unlimited(&args, Provider::TestServer).await?;
    let direct = direct_calls(&http.chunk_texts).await?;

    println!();
    println!("rate-limited: {} RPM for {} s", args.rpm, args.seconds);
    println!(
        "  requests answered {:>6}   achieved {:>7.1}/min   share of limit {:>6.1} %   429s {}   most in a window {}",
        limited.requests,
        limited.achieved_rpm,
        limited.share * 100.0,
        limited.rate_limited,
        limited.max_in_window
    );
    println!(
        "  documents ready {:>6}   {:>7.1} documents/min   chunks/document {:.1}",
        limited.documents, limited.documents_per_min, limited.chunks_per_document
    );
    println!(
        "unlimited: {} documents, {} chunks",
        hash.documents, hash.chunks
    );
    println!(
        "{:<34} {:>10} {:>12} {:>14}",
        "path", "wall s", "docs/min", "µs per chunk"
    );
    for (label, run) in [
        ("pipeline, hash embedder", &hash),
        ("pipeline, test server (no limit)", &http),
    ] {
        println!(
            "{:<34} {:>10.2} {:>12.0} {:>14.0}",
            label,
            run.wall.as_secs_f64(),
            run.documents as f64 / run.wall.as_secs_f64().max(1e-9) * 60.0,
            run.per_chunk_us()
        );
    }
    println!(
        "{:<34} {:>10.2} {:>12} {:>14.0}",
        "direct calls, hash embedder",
        direct.hash.as_secs_f64(),
        "",
        direct.hash_per_chunk_us()
    );
    println!(
        "{:<34} {:>10.2} {:>12} {:>14.0}",
        "direct calls, test server",
        direct.http.as_secs_f64(),
        "",
        direct.http_per_chunk_us()
    );
    // The pipeline's own cost per chunk: wall time per chunk minus what the embedding itself
    // costs when called directly. The hash run is the clean figure (no network at all); the
    // test-server run is shown too, because run order and a shared machine move both.
    let overhead_us = hash.per_chunk_us() - direct.hash_per_chunk_us();
    let overhead_http_us = http.per_chunk_us() - direct.http_per_chunk_us();
    println!(
        "pipeline overhead per chunk: {overhead_us:.0} µs (hash run minus hash embedding), \
         {overhead_http_us:.0} µs (test-server run minus direct provider calls)"
    );
    println!(
        "{}",
        json!({
            "bench": "pipeline",
            "rpm_limit": args.rpm,
            "seconds": args.seconds,
            "requests": limited.requests,
            "achieved_rpm": round(limited.achieved_rpm),
            "share_of_limit": round(limited.share),
            "rate_limited_429": limited.rate_limited,
            "documents_per_min_limited": round(limited.documents_per_min),
            "unlimited_documents": hash.documents,
            "unlimited_chunks": hash.chunks,
            "hash_wall_s": round(hash.wall.as_secs_f64()),
            "hash_us_per_chunk": round(hash.per_chunk_us()),
            "http_wall_s": round(http.wall.as_secs_f64()),
            "http_us_per_chunk": round(http.per_chunk_us()),
            "direct_hash_us_per_chunk": round(direct.hash_per_chunk_us()),
            "direct_http_us_per_chunk": round(direct.http_per_chunk_us()),
            "overhead_us_per_chunk": round(overhead_us),
            "overhead_http_us_per_chunk": round(overhead_http_us),
            "ratio": round(limited.share),
        })
    );
    Ok(())
}

/// The figures of the rate-limited phase.
struct Limited {
    requests: u64,
    achieved_rpm: f64,
    share: f64,
    rate_limited: u64,
    max_in_window: u64,
    documents: i64,
    documents_per_min: f64,
    chunks_per_document: f64,
}

async fn rate_limited(args: &PipelineBench, rpm: NonZeroU32) -> anyhow::Result<Limited> {
    let server = testkit::start(EmbeddingServerConfig {
        rpm: Some(rpm.get()),
        dims: DIMS,
        ..EmbeddingServerConfig::default()
    })
    .await?;
    // Half as much demand again as the limit lets through, so the queue never runs dry.
    let wanted = (u64::from(rpm.get()) * args.seconds / 60) as usize;
    let documents = documents(wanted * 3 / 2 + 20, 2, 1);
    println!(
        "rate-limited phase: {} documents, limit {} RPM, measuring {} s",
        documents.len(),
        rpm,
        args.seconds
    );
    let docket = Docket::start(args, Provider::TestServer, Some(rpm), Some(&server)).await?;
    let upload = docket.upload(documents);
    let measure = async {
        let started = Instant::now();
        while answered(&server.stats()) == 0 {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(120),
                "no embedding request arrived within 120 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let before = server.stats();
        let ready_before = docket.ready().await?;
        tokio::time::sleep(Duration::from_secs(args.seconds)).await;
        let after = server.stats();
        let ready_after = docket.ready().await?;
        Ok((before, after, ready_before, ready_after))
    };
    let (uploaded, measured) = tokio::join!(upload, measure);
    uploaded?;
    let (before, after, ready_before, ready_after) = measured?;
    let chunks_per_document = docket.chunks_per_ready_document().await?;
    docket.stop().await?;
    let requests = answered(&after) - answered(&before);
    let minutes = args.seconds as f64 / 60.0;
    let achieved_rpm = requests as f64 / minutes;
    let documents = ready_after - ready_before;
    Ok(Limited {
        requests,
        achieved_rpm,
        share: achieved_rpm / f64::from(rpm.get()),
        rate_limited: after.rate_limited,
        max_in_window: after.max_requests_in_window,
        documents,
        documents_per_min: documents as f64 / minutes,
        chunks_per_document,
    })
}

/// Requests the server answered with vectors.
fn answered(stats: &StatsSnapshot) -> u64 {
    stats.requests.saturating_sub(
        stats.rate_limited
            + stats.server_errors
            + stats.drops
            + stats.unauthorized
            + stats.bad_requests,
    )
}

/// The figures of one unlimited run.
struct Unlimited {
    documents: usize,
    chunks: usize,
    wall: Duration,
    chunk_texts: Vec<String>,
}

impl Unlimited {
    fn per_chunk_us(&self) -> f64 {
        self.wall.as_secs_f64() * 1e6 / (self.chunks.max(1) as f64)
    }
}

async fn unlimited(args: &PipelineBench, provider: Provider) -> anyhow::Result<Unlimited> {
    let server = testkit::start(EmbeddingServerConfig {
        dims: DIMS,
        ..EmbeddingServerConfig::default()
    })
    .await?;
    let documents = documents(args.docs, args.paragraphs.max(1), 2);
    let count = documents.len();
    println!("unlimited phase ({}): {count} documents", provider.label());
    let docket = Docket::start(args, provider, None, Some(&server)).await?;
    let started = Instant::now();
    docket.upload(documents).await?;
    loop {
        let (ready, failed) = docket.finished().await?;
        anyhow::ensure!(failed == 0, "{failed} documents failed; see the log");
        if ready as usize == count {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "only {ready} of {count} documents ready after 600 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let wall = started.elapsed();
    let chunk_texts: Vec<String> =
        sqlx::query_scalar("select text from chunks order by document_id, chunk_index")
            .fetch_all(&docket.pool)
            .await
            .context("reading the chunks")?;
    docket.stop().await?;
    Ok(Unlimited {
        documents: count,
        chunks: chunk_texts.len(),
        wall,
        chunk_texts,
    })
}

/// Time to embed the same chunks directly, one call after another, in pipeline-sized batches.
struct Direct {
    chunks: usize,
    hash: Duration,
    http: Duration,
}

impl Direct {
    fn hash_per_chunk_us(&self) -> f64 {
        self.hash.as_secs_f64() * 1e6 / (self.chunks.max(1) as f64)
    }

    fn http_per_chunk_us(&self) -> f64 {
        self.http.as_secs_f64() * 1e6 / (self.chunks.max(1) as f64)
    }
}

async fn direct_calls(texts: &[String]) -> anyhow::Result<Direct> {
    let hash = HashEmbedder::new(DIMS);
    let started = Instant::now();
    for batch in texts.chunks(256) {
        std::hint::black_box(hash.embed_all(batch));
    }
    let hash_time = started.elapsed();

    let server = testkit::start(EmbeddingServerConfig {
        dims: DIMS,
        ..EmbeddingServerConfig::default()
    })
    .await?;
    let embedder = OpenAiEmbedder::new(openai_config(&server), Arc::new(Limiter::unlimited()))?;
    let started = Instant::now();
    for batch in texts.chunks(embedder.max_batch()) {
        embedder
            .embed(batch)
            .await
            .context("embedding through the test server")?;
    }
    Ok(Direct {
        chunks: texts.len(),
        hash: hash_time,
        http: started.elapsed(),
    })
}

fn openai_config(server: &EmbeddingServer) -> OpenAiConfig {
    let mut config = OpenAiConfig::new(server.base_url.clone(), "docket-bench");
    config.dimensions = Some(DIMS as u32);
    config
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    Hash,
    TestServer,
}

impl Provider {
    fn label(self) -> &'static str {
        match self {
            Provider::Hash => "hash embedder",
            Provider::TestServer => "test server",
        }
    }
}

/// docket serving in this process on a fresh scratch database.
struct Docket {
    pool: sqlx::PgPool,
    uploader: Uploader,
    admin_url: String,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Docket {
    async fn start(
        args: &PipelineBench,
        provider: Provider,
        rpm: Option<NonZeroU32>,
        server: Option<&EmbeddingServer>,
    ) -> anyhow::Result<Docket> {
        let url = scratch_url(&args.database_url);
        recreate_scratch(&args.database_url).await?;
        let config = serve_config(&url, provider, rpm, server);
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
        let uploader = Uploader::new(
            &format!("http://{address}"),
            None,
            indicatif::ProgressBar::hidden(),
        )?;
        Ok(Docket {
            pool,
            uploader,
            admin_url: args.database_url.clone(),
            stop,
            serving,
        })
    }

    /// Uploads every document; all must be accepted as new.
    async fn upload(&self, documents: Vec<(String, String)>) -> anyhow::Result<()> {
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
            for outcome in self.uploader.upload(batch).await? {
                anyhow::ensure!(
                    matches!(outcome, crate::ingest::FileOutcome::New { .. }),
                    "a generated document was not stored as new: {outcome:?}"
                );
            }
        }
        Ok(())
    }

    async fn ready(&self) -> anyhow::Result<i64> {
        Ok(self.finished().await?.0)
    }

    /// Documents ready and failed.
    async fn finished(&self) -> anyhow::Result<(i64, i64)> {
        sqlx::query_as(
            "select count(*) filter (where status = 'ready'),
                    count(*) filter (where status = 'failed')
             from documents",
        )
        .fetch_one(&self.pool)
        .await
        .context("counting finished documents")
    }

    async fn chunks_per_ready_document(&self) -> anyhow::Result<f64> {
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
    async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.serving
            .await
            .context("the docket task failed")?
            .context("docket failed")?;
        self.pool.close().await;
        drop_scratch(&self.admin_url).await
    }
}

fn serve_config(
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
            // The nightly schedule has nothing to do with this measurement.
            no_scheduler: true,
            scheduler_tick_secs: 15,
        },
        pipeline: PipelineSettings {
            embedder: Some(match provider {
                Provider::Hash => EmbedderKind::Hash,
                Provider::TestServer => EmbedderKind::Openai,
            }),
            model_dir: None,
            embed_threads: None,
            hash_dims: DIMS,
            openai_base_url: server.map(|s| s.base_url.clone()).unwrap_or_default(),
            openai_api_key: None,
            openai_model: "docket-bench".into(),
            openai_dimensions: Some(DIMS as u32),
            rpm,
            tpm: None,
            chunk_tokens: 200,
            chunk_overlap: 30,
            extract_timeout_secs: 60,
            extract_memory_mb: 1024,
            extract_concurrency: 2,
            embed_concurrency: 4,
            ocr: true,
            ocr_langs: "auto".into(),
            ocr_max_pages: 200,
            ocr_concurrency: 1,
        },
    }
}

/// DATABASE_URL with its database name replaced by the scratch database's.
fn scratch_url(url: &str) -> String {
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

async fn recreate_scratch(admin_url: &str) -> anyhow::Result<()> {
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

async fn drop_scratch(admin_url: &str) -> anyhow::Result<()> {
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
fn documents(count: usize, paragraphs: usize, seed: u64) -> Vec<(String, String)> {
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
fn sentence(rng: &mut StdRng) -> String {
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

/// Three decimals are plenty for comparing runs and keep the JSON line short.
fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
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
