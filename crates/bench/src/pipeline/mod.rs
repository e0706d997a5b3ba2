//! `docket bench pipeline`: the embedding path, upload → extract → chunk → embed → ready.
//!
//! docket runs in this process ([`App`](::docket::app::App) on 127.0.0.1:0, real workers) against a scratch
//! database `docket_bench_pipeline` created on DATABASE_URL's server and dropped afterwards;
//! documents go in over HTTP through the same client as `docket ingest`; vectors come from the
//! test embedding server ([`docket_testkit::embedding_server`]) on loopback.
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
//! With `--processes 1,2,4` it measures the fleet instead ([`fleet`]): the rate-limited phase
//! with N real `docket worker` processes sharing one limit, for each N. With `--corpus DIR` it
//! runs a real corpus with the local model instead ([`corpus`]): where each document's seconds
//! go, end-to-end chunks/s against the encoder alone, and a second, cached upload.
//!
//! Documents are generated: pseudo-English text from a fixed vocabulary and a seeded RNG, so
//! runs are repeatable and every document is distinct (no duplicates). The pieces are in
//! [`docket`].

mod corpus;
mod docket;
pub mod fairness;
mod fleet;

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use ::docket::embed::{HashEmbedder, Limiter, OpenAiEmbedder};
use docket::{DIMS, Docket, Provider, answered, documents, openai_config};
use docket_testkit::EmbeddingServerConfig;

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

    /// Instead of the in-process phases: run the rate-limited phase with this many real
    /// `docket worker` processes sharing the limit, once per number given (e.g. `1,2,4`).
    #[arg(long, value_delimiter = ',')]
    pub processes: Vec<usize>,

    /// Instead: a real corpus (every file under DIR) through docket with the local model: the
    /// time of each step, end-to-end chunks/s against the encoder alone, and a second upload
    /// with the vectors cached ([`corpus`]).
    #[arg(long)]
    pub corpus: Option<std::path::PathBuf>,

    /// With `--corpus`: at most this many files (sorted by path).
    #[arg(long)]
    pub limit: Option<usize>,

    /// With `--corpus`: the local model's precision.
    #[arg(long, value_enum, default_value_t = ::docket::embed::Precision::F32)]
    pub precision: ::docket::embed::Precision,
}

/// Runs the benchmark.
pub async fn run(args: PipelineBench) -> anyhow::Result<()> {
    let rpm = NonZeroU32::new(args.rpm).context("--rpm must be at least 1")?;
    anyhow::ensure!(args.seconds >= 10, "--seconds must be at least 10");
    if !args.processes.is_empty() {
        return fleet::run(&args, rpm).await;
    }
    if let Some(corpus) = &args.corpus {
        return corpus::run(&args, corpus).await;
    }
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
    let server = docket_testkit::start(EmbeddingServerConfig {
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
    let docket = Docket::start(
        &args.database_url,
        Provider::TestServer,
        Some(rpm),
        Some(&server),
        true,
    )
    .await?;
    let upload = docket.upload(documents);
    let measure = docket.measure_window(&server, args.seconds);
    let (uploaded, measured) = tokio::join!(upload, measure);
    uploaded?;
    let docket::Window {
        before,
        after,
        ready: documents,
    } = measured?;
    let chunks_per_document = docket.chunks_per_ready_document().await?;
    docket.stop().await?;
    let requests = answered(&after) - answered(&before);
    let minutes = args.seconds as f64 / 60.0;
    let achieved_rpm = requests as f64 / minutes;
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
    let server = docket_testkit::start(EmbeddingServerConfig {
        dims: DIMS,
        ..EmbeddingServerConfig::default()
    })
    .await?;
    let documents = documents(args.docs, args.paragraphs.max(1), 2);
    let count = documents.len();
    println!("unlimited phase ({}): {count} documents", provider.label());
    let docket = Docket::start(&args.database_url, provider, None, Some(&server), true).await?;
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

    let server = docket_testkit::start(EmbeddingServerConfig {
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

/// Three decimals are plenty for comparing runs and keep the JSON line short.
pub(super) fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}
