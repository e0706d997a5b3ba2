//! `docket bench interference`: what the rest of docket costs search on one PostgreSQL server.
//!
//! One scratch database holds a search corpus (built as `docket bench search` builds it, with
//! its code: real fixture text, hashing vectors, an HNSW index) *and* the job queue, as one
//! docket database does. Search p50/p95 through `GET /api/search` (vector, text, hybrid, one
//! query at a time) is measured in three phases on the same server, minutes apart:
//!
//! 1. **idle**: nothing else runs;
//! 2. **queue**: the queue drains no-op jobs at full speed ([`super::queue`]'s worker round,
//!    4 claim streams × batch 10, its headline setting), round after round, enqueue included;
//! 3. **ingest**: documents are uploaded as fast as the pipeline takes them (the upload's own
//!    transaction, [`docket::pipeline::create_with_extract_job`]) and the real pipeline's
//!    handlers extract, chunk, index and embed them (with the hashing embedder, so the load is
//!    the database's share of ingestion, not a model's CPU).
//!
//! The number is the ratio of each loaded phase's latency to idle's; idle is measured again at
//! the end, so drift of the shared machine shows. Each background load is
//! also run alone for the same time, so its own slowdown under search shows too. With
//! `--replica-url` (a streaming replica of the same server), the queue phase is repeated with
//! searches on the replica ([`docket::search::Replicas`]) while the queue drains on the primary.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use load::{drain, ingest, pipeline, sleep, with_load};
use report::{ReplicaFigures, Report, replicas};

use super::queue::report::Setting;
use super::search::{CHUNKS_PER_DOCUMENT, DIMS, call, corpus, load_document, percentile};
use docket::chunk::ChunkConfig;
use docket::embed::{Embedder, HashEmbedder};
use docket::models::{self, ModelVersion};
use docket::search::Searcher;

/// Options of `docket bench interference`.
#[derive(Debug, clap::Args)]
pub struct InterferenceBench {
    /// Server URL; a scratch database `docket_bench_interference` is (re)created on it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Chunks in the search corpus.
    #[arg(long, default_value_t = 20_000)]
    pub chunks: usize,
    /// Timed queries per mode and phase (after a warm-up).
    #[arg(long, default_value_t = 150)]
    pub queries: usize,
    /// Jobs per queue drain round.
    #[arg(long, default_value_t = 2000)]
    pub round_jobs: usize,
    /// Seconds each background load runs alone, for its own reference rate.
    #[arg(long, default_value_t = 10)]
    pub alone_secs: u64,
    /// A streaming replica of the same server (any database name: the scratch one is used).
    #[arg(long, hide_env_values = true)]
    pub replica_url: Option<String>,
    /// Keep the scratch database afterwards.
    #[arg(long)]
    pub keep: bool,
}

mod load;
mod report;

pub(super) const DATABASE: &str = "docket_bench_interference";
pub(super) const MODES: [&str; 3] = ["vector", "text", "hybrid"];
/// The queue bench's headline setting.
pub(super) const DRAIN: Setting = Setting {
    handlers: 4,
    claim_batch: 10,
};
/// Documents waiting in the pipeline that the ingest producer keeps topped up.
pub(super) const INGEST_BACKLOG: i64 = 40;
const WARM_UP: usize = 20;

/// p50 and p95 per mode, in ms.
pub(super) type Latencies = BTreeMap<&'static str, (f64, f64)>;

/// Runs the benchmark.
pub async fn run(args: InterferenceBench) -> anyhow::Result<()> {
    let pool = super::scratch_database(&args.database_url, DATABASE, true, &[]).await?;
    // The HNSW graph must fit in memory while it is built, or the build crawls.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "alter database {DATABASE} set maintenance_work_mem = '512MB'"
    )))
    .execute(&pool)
    .await?;
    pool.close().await;
    let pool = super::scratch_database(&args.database_url, DATABASE, false, &[]).await?;
    docket::db::migrate(&pool).await?;
    let result = measure(&pool, &args).await;
    pool.close().await;
    if !args.keep {
        super::drop_scratch_database(&args.database_url, DATABASE).await?;
    }
    result
}

async fn measure(pool: &sqlx::PgPool, args: &InterferenceBench) -> anyhow::Result<()> {
    let embedder = Embedder::Hash(HashEmbedder::new(DIMS));
    let model = ModelVersion::of(&embedder, &ChunkConfig::default());
    let corpus = corpus()?;
    let words: Vec<String> = corpus
        .iter()
        .flat_map(|c| c.split_whitespace())
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(words.len() >= 200, "no corpus text found under fixtures/");
    load_corpus(pool, &model, &words, args.chunks).await?;
    let mut rng = StdRng::seed_from_u64(14);
    let queries: Vec<String> = (0..args.queries + WARM_UP)
        .map(|_| window(&words, &mut rng, 2, 4))
        .collect();

    let searcher = Arc::new(Searcher::new(pool.clone(), embedder.clone(), model.clone()));
    let stop = CancellationToken::new();
    let base = super::search::serve(pool, searcher, &stop).await?;
    let client = reqwest::Client::new();
    let search = |base: String| {
        let (client, queries) = (client.clone(), queries.clone());
        async move { searches(&client, &base, &queries).await }
    };

    eprintln!("bench interference: idle");
    let idle = search(base.clone()).await?;
    eprintln!("bench interference: queue alone, then with searches");
    let alone_for = Duration::from_secs(args.alone_secs.max(1));
    let (queue_alone, _) = with_load(drain(pool, args.round_jobs), sleep(alone_for)).await?;
    let (queue_busy, queue) = with_load(drain(pool, args.round_jobs), search(base.clone())).await?;
    eprintln!("bench interference: ingestion alone, then with searches");
    let pipeline = pipeline(pool, embedder.clone()).await?;
    let (ingest_alone, _) = with_load(ingest(pool, &pipeline, &words), sleep(alone_for)).await?;
    let (ingest_busy, ingest) =
        with_load(ingest(pool, &pipeline, &words), search(base.clone())).await?;
    let replica = match &args.replica_url {
        Some(url) => {
            let replicas = replicas(pool, url).await?;
            let searcher = Searcher::new(pool.clone(), embedder.clone(), model.clone())
                .with_replicas(replicas.clone());
            let base = super::search::serve(pool, Arc::new(searcher), &stop).await?;
            eprintln!("bench interference: searches on the replica, idle then with the queue");
            let idle = search(base.clone()).await?;
            let (rate, busy) = with_load(drain(pool, args.round_jobs), search(base)).await?;
            let served = replicas.status().iter().map(|s| s.searches).sum::<u64>();
            let fallbacks = replicas.all_fallbacks().iter().map(|f| f.1).sum::<u64>();
            Some(ReplicaFigures {
                idle,
                busy,
                rate,
                served,
                fallbacks,
            })
        }
        None => None,
    };
    eprintln!("bench interference: idle again (drift check)");
    let idle_after = search(base.clone()).await?;
    stop.cancel();

    let report = Report {
        args,
        idle,
        idle_after,
        queue,
        queue_rates: (queue_alone, queue_busy),
        ingest,
        ingest_rates: (ingest_alone, ingest_busy),
        replica,
    };
    report.print();
    Ok(())
}

/// The corpus of `docket bench search`: windows of fixture text, hashing vectors, HNSW built last.
async fn load_corpus(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
    words: &[String],
    chunks: usize,
) -> anyhow::Result<()> {
    crate::search::prepare_bulk_load(pool, model).await?;
    let hash = HashEmbedder::new(DIMS);
    let mut rng = StdRng::seed_from_u64(5);
    let started = Instant::now();
    let mut produced = 0;
    while produced < chunks {
        let count = CHUNKS_PER_DOCUMENT.min(chunks - produced);
        let texts: Vec<String> = (0..count)
            .map(|_| window(words, &mut rng, 40, 120))
            .collect();
        let vectors = texts
            .iter()
            .map(|t| pgvector::Vector::from(hash.embed_one(t)))
            .collect();
        load_document(pool, model, produced / CHUNKS_PER_DOCUMENT, &texts, vectors).await?;
        produced += count;
    }
    models::register(pool, model).await?;
    sqlx::query("vacuum analyze").execute(pool).await?;
    eprintln!(
        "bench interference: {chunks} chunks loaded and indexed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `min..max` consecutive words at a random place.
pub(super) fn window(words: &[String], rng: &mut StdRng, min: usize, max: usize) -> String {
    let length = rng.random_range(min..max).min(words.len());
    let start = rng.random_range(0..=words.len() - length);
    words[start..start + length].join(" ")
}

/// Every mode's p50/p95 over `queries` (the first [`WARM_UP`] untimed), one at a time.
async fn searches(
    client: &reqwest::Client,
    base: &str,
    queries: &[String],
) -> anyhow::Result<Latencies> {
    let mut figures = Latencies::new();
    for mode in MODES {
        for q in queries.iter().take(WARM_UP) {
            call(client, base, q, mode).await?;
        }
        let mut latencies = Vec::with_capacity(queries.len());
        for q in queries.iter().skip(WARM_UP) {
            let started = Instant::now();
            call(client, base, q, mode).await?;
            latencies.push(started.elapsed());
        }
        latencies.sort();
        figures.insert(
            mode,
            (percentile(&latencies, 0.5), percentile(&latencies, 0.95)),
        );
    }
    Ok(figures)
}
