//! `docket bench search`: search latency through the HTTP API and HNSW recall, in one run.
//!
//! A scratch database gets `--chunks` chunks of one model version (the hashing embedder, 384
//! dimensions): real text from fixtures/ (extracted and chunked by docket's own code), repeated
//! with variation (each copy gains a few words drawn from the corpus vocabulary, so no two
//! vectors are equal). Rows go in with bulk SQL, and the HNSW index is built afterwards, as one
//! would load a corpus. Then the real router serves on 127.0.0.1 and the same queries run
//! through `GET /api/search` in each mode, one at a time, for p50/p95 latency: short phrases in
//! every mode, and question-length queries (8 to 14 words) in text and hybrid mode, which read
//! many more keyword postings. Keyword postings are written with the chunks, as the extract
//! step writes them. Recall@10
//! compares the HNSW answer (the exact query src/search/ sends, same `ef_search`) with an exact
//! scan of the same vectors (`enable_indexscan = off`: a sequential scan and a sort).
//!
//! Every hundredth document is then put in a collection of its own (1% of the chunks), and the
//! same phrases are timed with `collection=` that collection in each mode, beside the
//! unfiltered figures; its recall@10 compares the filtered HNSW query (iterative scan, as the
//! API runs it) with an exact scan of that collection.
//!
//! With `--semantic`, vector phrases and hybrid questions are timed once more while the same
//! embedder embeds batches of documents' passages, as `docket serve` does during ingestion
//! ([`busy`]).

mod bm25;
mod busy;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use pgvector::Vector;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use tokio_util::sync::CancellationToken;

use docket::chunk::{ApproxTokens, ChunkConfig, chunk_pages};
use docket::embed::{Embedder, HashEmbedder};
use docket::extract;
use docket::models::{self, ModelVersion};
use docket::search::{self, Searcher};

/// Options of `docket bench search`.
#[derive(Debug, clap::Args)]
pub struct SearchBench {
    /// Server URL; a scratch database `docket_bench_search` is (re)created on it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Chunks to store.
    #[arg(long, default_value_t = 100_000)]
    pub chunks: usize,
    /// Timed queries per mode (after a warm-up).
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Queries whose HNSW answer is checked against an exact scan.
    #[arg(long, default_value_t = 100)]
    pub recall_queries: usize,
    /// Keep the scratch database afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Questions whose text-mode top 10 is compared with exact BM25 over every posting (0:
    /// none).
    #[arg(long, default_value_t = 50)]
    pub exact_questions: usize,
    /// Search the scratch database a run with `--keep` left, if it holds `--chunks` chunks,
    /// instead of loading it again (a million chunks take the best part of an hour to load).
    #[arg(long)]
    pub reuse: bool,
    /// Embed queries with the local model (from DOCKET_MODEL_DIR or the default directory)
    /// instead of the hashing embedder, so latency includes a real query embedding. The stored
    /// vectors stay hashing vectors filed under the local version (the index cost is the same
    /// for any vectors of that dimension; embedding 100,000 chunks would take hours here).
    #[arg(long)]
    pub semantic: bool,
    #[arg(long, env = "DOCKET_MODEL_DIR", default_value_os_t = docket::config::default_model_dir())]
    pub model_dir: PathBuf,
    /// Threads the local model embeds each query on (`--semantic`).
    #[arg(long, default_value_t = 2)]
    pub embed_threads: usize,
    /// With `--semantic`: vector phrases and hybrid questions timed while the same embedder
    /// embeds documents, as under `docket serve` during ingestion (0: not measured).
    #[arg(long, default_value_t = 30)]
    pub busy_queries: usize,
}

const DATABASE: &str = "docket_bench_search";
pub(super) const DIMS: usize = 384;
const K: usize = 10;
pub(super) const CHUNKS_PER_DOCUMENT: usize = 1000;

/// Runs the benchmark.
pub async fn run(args: SearchBench) -> anyhow::Result<()> {
    // The HNSW graph must fit in memory or the build slows down badly: 100,000 vectors take
    // about 200 MB, a million about 2 GB. It is a ceiling, not an allocation.
    let settings = [("maintenance_work_mem", "4GB")];
    let pool =
        crate::scratch_database(&args.database_url, DATABASE, !args.reuse, &settings).await?;
    docket::db::migrate(&pool).await?;
    let result = measure(&pool, &args).await;
    pool.close().await;
    if !args.keep {
        crate::drop_scratch_database(&args.database_url, DATABASE).await?;
    }
    result
}

async fn measure(pool: &sqlx::PgPool, args: &SearchBench) -> anyhow::Result<()> {
    let embedder = query_embedder(args)?;
    let model = ModelVersion::of(&embedder, &ChunkConfig::default());
    let corpus = corpus()?;
    let words = Words::of(&corpus)?;
    let stored: i64 = sqlx::query_scalar("select count(*) from chunks")
        .fetch_one(pool)
        .await?;
    let (load_s, build_s, small) = if args.reuse && stored == args.chunks as i64 {
        eprintln!("bench search: reusing the {stored} chunks of {DATABASE}");
        let small = docket::collections::find(pool, SMALL)
            .await?
            .context("the kept database has no 1% collection: load it again")?;
        (f64::NAN, f64::NAN, small.0)
    } else {
        anyhow::ensure!(
            stored == 0,
            "{DATABASE} holds {stored} chunks, not {}: run without --reuse",
            args.chunks
        );
        load_all(pool, &model, &corpus, &words, args.chunks).await?
    };

    // The queries have their own seed, so a reused database is searched with the same ones.
    let mut rng = StdRng::seed_from_u64(6);
    let queries = phrases(
        &corpus,
        &words,
        args.queries.max(args.recall_queries) + 20,
        &mut rng,
    );
    let questions = questions(&corpus, args.queries + 20, &mut rng);
    let searcher = Arc::new(Searcher::new(pool.clone(), embedder.clone(), model.clone()));
    let modes = every_mode(&queries, &questions);
    let (table, breakdown) = time_modes(pool, searcher.clone(), &modes, args.queries).await?;
    // With the default model's queries, vector search is centred by script (a deeper candidate
    // list, rescored): the same queries without it say what that costs.
    let uncentred = if args.semantic {
        let plain =
            Searcher::new(pool.clone(), embedder.clone(), model.clone()).with_centring_share(0.0);
        time_modes(pool, Arc::new(plain), &modes, args.queries)
            .await?
            .0
    } else {
        Vec::new()
    };
    // With the local model, searches while the same embedder embeds documents, as under
    // `docket serve` during ingestion.
    let busy = if args.semantic && args.busy_queries > 0 {
        let timed = args.busy_queries;
        let busy = busy::measure(
            pool, searcher, &embedder, &words, &queries, &questions, timed,
        );
        Some(busy.await?)
    } else {
        None
    };

    // Recall is measured for two kinds of query: the short phrases timed above, and passages
    // drawn like the stored chunks but not stored (the held-out queries ANN benchmarks use).
    let hash = HashEmbedder::new(DIMS);
    let phrases = &queries[20..20 + args.recall_queries];
    let passages: Vec<String> = (0..args.recall_queries)
        .map(|_| words.window(&mut rng, 40..120))
        .collect();
    let recalls = Recalls {
        phrases: recall(pool, &model, &hash, phrases).await?,
        passages: recall(pool, &model, &hash, &passages).await?,
        filtered: recall_in(pool, &model, &hash, &passages, small).await?,
    };
    let agreement = if args.exact_questions > 0 {
        let stop = CancellationToken::new();
        let base = serve(
            pool,
            Arc::new(Searcher::new(pool.clone(), embedder.clone(), model.clone())),
            &stop,
        )
        .await?;
        let asked = &questions[20..(20 + args.exact_questions).min(questions.len())];
        let agreement = bm25::agreement(pool, &reqwest::Client::new(), &base, asked).await;
        stop.cancel();
        Some(agreement?)
    } else {
        None
    };
    let sizes = Sizes::of(pool, &model).await?;
    let findings = Findings {
        table,
        breakdown,
        uncentred,
        busy,
        recalls,
        agreement,
        sizes,
        load_s,
        build_s,
    };
    report(args, &model, &findings);
    Ok(())
}

/// Everything one run measured, for [`report`].
struct Findings {
    table: Vec<Row>,
    breakdown: Breakdown,
    /// The same queries without centring (with `--semantic` only).
    uncentred: Vec<Row>,
    /// Searches while the embedder embeds documents (with `--semantic` only).
    busy: Option<busy::Busy>,
    recalls: Recalls,
    agreement: Option<bm25::Agreement>,
    sizes: Sizes,
    /// Seconds loading and building took (NaN for a reused database).
    load_s: f64,
    build_s: f64,
}

/// What the stored corpus takes on disk, in MB: the chunks table (with its TOAST and indexes),
/// the keyword postings and their document frequencies (with their indexes), and the version's
/// HNSW index.
struct Sizes {
    chunks: f64,
    keyword: f64,
    hnsw: f64,
}

impl Sizes {
    async fn of(pool: &sqlx::PgPool, model: &ModelVersion) -> anyhow::Result<Self> {
        let (chunks, keyword, hnsw): (i64, i64, i64) = sqlx::query_as(
            "select pg_total_relation_size('chunks'),
                    pg_total_relation_size('chunk_terms') + pg_total_relation_size('term_stats'),
                    pg_relation_size($1::regclass)",
        )
        .bind(model.index_name())
        .fetch_one(pool)
        .await?;
        let mb = |bytes: i64| bytes as f64 / 1e6;
        Ok(Self {
            chunks: mb(chunks),
            keyword: mb(keyword),
            hnsw: mb(hnsw),
        })
    }
}

/// Loads `chunks` chunks as one loads a corpus: the version's HNSW index and the keyword
/// postings' ranking index are built after the rows are in, not kept up row by row. Answers the
/// seconds loading and building took, and the 1% collection.
async fn load_all(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
    corpus: &[String],
    words: &Words<'_>,
    chunks: usize,
) -> anyhow::Result<(f64, f64, i64)> {
    prepare_bulk_load(pool, model).await?;
    // The index's own definition, read back, so the bench builds exactly what the migration
    // declares.
    let ranking_index: String =
        sqlx::query_scalar("select pg_get_indexdef('chunk_terms_impact_idx'::regclass)")
            .fetch_one(pool)
            .await?;
    sqlx::query("drop index chunk_terms_impact_idx")
        .execute(pool)
        .await?;
    eprintln!(
        "bench search: {} base chunks from fixtures/, loading {chunks} chunks",
        corpus.len(),
    );
    let mut rng = StdRng::seed_from_u64(5);
    let hash = HashEmbedder::new(DIMS);
    let load_s = load(pool, model, &hash, words, chunks, &mut rng).await?;
    eprintln!("bench search: loaded in {load_s:.1} s; building the indexes");
    let build_started = Instant::now();
    sqlx::query(sqlx::AssertSqlSafe(ranking_index))
        .execute(pool)
        .await?;
    let postings_s = build_started.elapsed().as_secs_f64();
    models::register(pool, model).await?;
    let build_s = build_started.elapsed().as_secs_f64() - postings_s;
    let small = filtered_collection(pool).await?;
    // A steady-state table: visibility map set, so the keyword scans are index-only.
    sqlx::query("vacuum analyze").execute(pool).await?;
    eprintln!("bench search: postings' ranking index {postings_s:.1} s, HNSW {build_s:.1} s");
    Ok((load_s + postings_s, build_s, small))
}

/// What embeds the queries: the local model with `--semantic`, else the hashing embedder.
fn query_embedder(args: &SearchBench) -> anyhow::Result<Embedder> {
    if !args.semantic {
        return Ok(Embedder::Hash(HashEmbedder::new(DIMS)));
    }
    let local = docket::embed::LocalEmbedder::load(&docket::embed::LocalConfig {
        model_dir: args.model_dir.clone(),
        threads: args.embed_threads,
        precision: Default::default(),
    })?;
    anyhow::ensure!(
        local.dims() == DIMS,
        "the local model must have {DIMS} dimensions"
    );
    Ok(Embedder::Local(local))
}

/// The corpus's words, in order, and its vocabulary (the words of four letters or more).
struct Words<'a> {
    all: Vec<&'a str>,
    vocabulary: Vec<&'a str>,
}

impl<'a> Words<'a> {
    fn of(corpus: &'a [String]) -> anyhow::Result<Self> {
        let all: Vec<&str> = corpus.iter().flat_map(|c| c.split_whitespace()).collect();
        let vocabulary: Vec<&str> = all
            .iter()
            .copied()
            .filter(|w| w.chars().count() >= 4 && w.chars().all(char::is_alphanumeric))
            .collect();
        anyhow::ensure!(
            all.len() >= 120 && !vocabulary.is_empty(),
            "no corpus text found under fixtures/"
        );
        Ok(Words { all, vocabulary })
    }

    /// A run of consecutive words at a random place, of a length drawn from `lengths`.
    fn window(&self, rng: &mut StdRng, lengths: std::ops::Range<usize>) -> String {
        let length = rng.random_range(lengths).min(self.all.len());
        let start = rng.random_range(0..=self.all.len() - length);
        self.all[start..start + length].join(" ")
    }
}

/// Stores `chunks` chunks with hashing vectors; answers the seconds it took.
///
/// Each chunk is a window of consecutive words at a random place in the corpus, of a random
/// length, plus a few words from anywhere: overlapping, varied chunks like real documents have,
/// rather than hundreds of near-copies of one chunk (which no ANN index handles well and no real
/// corpus looks like).
async fn load(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
    hash: &HashEmbedder,
    words: &Words<'_>,
    chunks: usize,
    rng: &mut StdRng,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut produced = 0usize;
    // Two documents in flight: one analysed here while the database writes the other.
    let mut writing = tokio::task::JoinSet::new();
    while produced < chunks {
        let count = CHUNKS_PER_DOCUMENT.min(chunks - produced);
        let texts: Vec<String> = (0..count)
            .map(|_| {
                let mut text = words.window(rng, 40..120);
                for _ in 0..4 {
                    if let Some(word) = words.vocabulary.choose(rng) {
                        text.push(' ');
                        text.push_str(word);
                    }
                }
                text
            })
            .collect();
        let vectors: Vec<Vector> = texts
            .iter()
            .map(|t| Vector::from(hash.embed_one(t)))
            .collect();
        if writing.len() >= 2
            && let Some(done) = writing.join_next().await
        {
            done??;
        }
        let (pool, model, number) = (pool.clone(), model.clone(), produced / CHUNKS_PER_DOCUMENT);
        writing.spawn(async move { load_document(&pool, &model, number, &texts, vectors).await });
        produced += count;
    }
    while let Some(done) = writing.join_next().await {
        done??;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// `n` queries of two or three consecutive words of a random base chunk, so text search has
/// hits.
fn phrases(corpus: &[String], words: &Words<'_>, n: usize, rng: &mut StdRng) -> Vec<String> {
    (0..n)
        .map(|_| {
            let base = &corpus[rng.random_range(0..corpus.len())];
            let own: Vec<&str> = base
                .split_whitespace()
                .filter(|w| w.chars().all(char::is_alphanumeric))
                .collect();
            if own.len() < 3 {
                return (*words.vocabulary.choose(rng).unwrap_or(&"search")).to_owned();
            }
            let start = rng.random_range(0..own.len() - 2);
            let take = rng.random_range(2..=3).min(own.len() - start);
            own[start..start + take].join(" ")
        })
        .collect()
}

/// `n` questions: a sentence-long run of 8 to 14 consecutive words (stop words included), as a
/// person types a question; they touch many more postings than a short phrase.
fn questions(corpus: &[String], n: usize, rng: &mut StdRng) -> Vec<String> {
    (0..n)
        .map(|_| {
            let base = &corpus[rng.random_range(0..corpus.len())];
            let words: Vec<&str> = base.split_whitespace().collect();
            let take = rng.random_range(8..=14).min(words.len());
            let start = rng.random_range(0..=words.len() - take);
            words[start..start + take].join(" ")
        })
        .collect()
}

/// One row of the latency table: mode, p50 ms, p95 ms, hits per query.
type Row = (&'static str, f64, f64, f64);

/// Where each mode's time went: per mode, each stage the server timed (`Server-Timing`) with
/// its mean ms over the timed queries.
type Breakdown = Vec<(&'static str, Vec<(String, f64)>)>;

/// Every mode the bench times: phrases in each mode, questions in text and hybrid mode, and
/// phrases in the 1% collection.
fn every_mode<'a>(
    queries: &'a [String],
    questions: &'a [String],
) -> Vec<(&'static str, &'a [String])> {
    vec![
        ("vector", queries),
        ("text", queries),
        ("hybrid", queries),
        ("text/questions", questions),
        ("hybrid/questions", questions),
        ("vector/1% filter", queries),
        ("text/1% filter", queries),
        ("hybrid/1% filter", queries),
    ]
}

/// Times `timed` queries of each of `modes` (a mode and its queries; `/…` after the API mode
/// labels the set, and a label ending in `filter` searches the 1% collection) through the API,
/// after 20 for warm-up.
async fn time_modes(
    pool: &sqlx::PgPool,
    searcher: Arc<Searcher>,
    modes: &[(&'static str, &[String])],
    timed: usize,
) -> anyhow::Result<(Vec<Row>, Breakdown)> {
    let stop = CancellationToken::new();
    let base = serve(pool, searcher, &stop).await?;
    let client = reqwest::Client::new();
    let mut table = Vec::new();
    let mut breakdown = Vec::new();
    for &(mode, set) in modes {
        let api_mode = mode.split('/').next().unwrap_or(mode);
        let collection = mode.ends_with("filter").then_some(SMALL);
        // Warm-up: caches, prepared statements, connections.
        for q in set.iter().take(20) {
            call_in(&client, &base, q, api_mode, collection).await?;
        }
        let mut latencies = Vec::with_capacity(timed);
        let mut hits = 0usize;
        let mut stages: Vec<(String, f64)> = Vec::new();
        for q in set.iter().skip(20).take(timed) {
            let started = Instant::now();
            let answer = search_timed(&client, &base, q, api_mode, collection).await?;
            latencies.push(started.elapsed());
            hits += answer.hits;
            for (stage, ms) in answer.stages {
                match stages.iter_mut().find(|(name, _)| *name == stage) {
                    Some((_, total)) => *total += ms,
                    None => stages.push((stage, ms)),
                }
            }
        }
        let n = latencies.len().max(1) as f64;
        breakdown.push((mode, stages.into_iter().map(|(s, t)| (s, t / n)).collect()));
        latencies.sort();
        table.push((
            mode,
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.95),
            hits as f64 / latencies.len().max(1) as f64,
        ));
    }
    stop.cancel();
    Ok((table, breakdown))
}

/// Recall@10 against an exact scan, per `ef_search`, for each kind of query.
#[derive(Default)]
struct Recalls {
    phrases: Vec<(i64, f64)>,
    passages: Vec<(i64, f64)>,
    /// Passage queries searched in the 1% collection, as the API does (iterative scan).
    filtered: f64,
}

impl Recalls {
    /// The recall at the API's `ef_search`.
    fn at_api(list: &[(i64, f64)]) -> f64 {
        list.iter()
            .find(|(ef, _)| *ef == search::EF_SEARCH)
            .map_or(f64::NAN, |r| r.1)
    }
}

/// Prints the tables, then the JSON line.
fn report(args: &SearchBench, model: &ModelVersion, f: &Findings) {
    println!();
    println!(
        "search over {} chunks ({}), k={K}, ef_search={}",
        args.chunks,
        model.model_version,
        search::EF_SEARCH
    );
    println!(
        "{:<17} {:>10} {:>10} {:>12}",
        "mode", "p50 ms", "p95 ms", "hits/query"
    );
    for row in &f.table {
        println!("{}", row_line(row));
    }
    println!("where the time went (Server-Timing, mean ms; a hybrid search's lists overlap):");
    for (mode, stages) in &f.breakdown {
        let stages: Vec<String> = stages
            .iter()
            .map(|(stage, ms)| format!("{stage} {ms:.1}"))
            .collect();
        println!("  {mode:<17} {}", stages.join(", "));
    }
    if !f.uncentred.is_empty() {
        println!("the same queries without centring by script (share 0):");
        for row in &f.uncentred {
            println!("{}", row_line(row));
        }
    }
    if let Some(busy) = &f.busy {
        busy_report(busy, &f.table);
    }
    println!(
        "recall@{K} of HNSW vs exact scan over {} queries (the API uses ef_search={}):",
        args.recall_queries,
        search::EF_SEARCH
    );
    println!("  ef_search  phrase queries  passage queries");
    for ((ef_search, phrase), (_, passage)) in f.recalls.phrases.iter().zip(&f.recalls.passages) {
        println!("  {ef_search:>9}  {phrase:>14.4}  {passage:>15.4}");
    }
    println!(
        "  filtered to the 1% collection (ef_search={}, iterative scan): passage recall {:.4}",
        search::EF_SEARCH,
        f.recalls.filtered
    );
    if let Some(agreement) = f.agreement {
        println!(
            "text ranking against exact BM25 over every posting, {} questions: top-10 agreement {:.3}, same first hit {:.3}, share of the best score {:.3}",
            agreement.questions, agreement.at_10, agreement.at_1, agreement.score_share
        );
    }
    if f.load_s.is_nan() {
        println!("database reused from an earlier run (--reuse)");
    } else {
        println!("load {:.1} s, HNSW build {:.1} s", f.load_s, f.build_s);
    }
    println!(
        "on disk: chunks {:.0} MB, keyword postings {:.0} MB ({:.2}x the chunks), HNSW {:.0} MB",
        f.sizes.chunks,
        f.sizes.keyword,
        f.sizes.keyword / f.sizes.chunks,
        f.sizes.hnsw
    );
    let mut line = json_line(args, &f.table, &f.recalls, f.build_s);
    line["chunks_mb"] = serde_json::json!(round(f.sizes.chunks));
    line["keyword_mb"] = serde_json::json!(round(f.sizes.keyword));
    line["keyword_to_chunks"] = serde_json::json!(round(f.sizes.keyword / f.sizes.chunks));
    line["hnsw_mb"] = serde_json::json!(round(f.sizes.hnsw));
    if let Some(agreement) = f.agreement {
        line["exact_bm25"] = serde_json::json!({
            "questions": agreement.questions,
            "top10_agreement": round(agreement.at_10 * 100.0) / 100.0,
            "first_hit_agreement": round(agreement.at_1 * 100.0) / 100.0,
            "score_share": round(agreement.score_share * 100.0) / 100.0,
        });
    }
    line["stage_mean_ms"] = f
        .breakdown
        .iter()
        .map(|(mode, stages)| {
            let stages: serde_json::Map<String, serde_json::Value> = stages
                .iter()
                .map(|(stage, ms)| (stage.clone(), serde_json::json!(round(*ms))))
                .collect();
            ((*mode).to_owned(), serde_json::Value::Object(stages))
        })
        .collect::<serde_json::Map<_, _>>()
        .into();
    let p95 = |mode: &str| {
        f.uncentred
            .iter()
            .find(|row| row.0 == mode)
            .map(|row| round(row.2))
    };
    if let Some(busy) = &f.busy {
        line["while_embedding"] = busy_json(busy, &f.table);
    }
    line["uncentred_p95_ms"] = serde_json::json!({
        "vector": p95("vector"),
        "hybrid": p95("hybrid"),
        "hybrid_question": p95("hybrid/questions"),
    });
    println!("{line}");
}

/// One row of a latency table: mode, p50, p95, hits per query.
fn row_line((mode, p50, p95, hits): &Row) -> String {
    format!("{mode:<17} {p50:>10.2} {p95:>10.2} {hits:>12.1}")
}

/// Each busy mode's p50 and p95, and its p95 against the idle run's.
fn busy_rows<'a>(busy: &'a busy::Busy, idle: &'a [Row]) -> impl Iterator<Item = (&'a Row, f64)> {
    busy.table.iter().map(|row| {
        let idle_p95 = idle.iter().find(|r| r.0 == row.0).map_or(f64::NAN, |r| r.2);
        (row, row.2 / idle_p95)
    })
}

fn busy_report(busy: &busy::Busy, idle: &[Row]) {
    println!(
        "while the same embedder embeds documents ({} passages a call, back to back):",
        busy.batch
    );
    for (row, ratio) in busy_rows(busy, idle) {
        println!("{}   p95 {ratio:.2}x idle", row_line(row));
    }
    println!(
        "  passages embedded a second: {:.1} alone, {:.1} while searched",
        busy.alone_per_s, busy.searched_per_s
    );
}

fn busy_json(busy: &busy::Busy, idle: &[Row]) -> serde_json::Value {
    let mut figures = serde_json::Map::new();
    for ((mode, p50, p95, _), ratio) in busy_rows(busy, idle) {
        let name = mode.replace("/questions", "_question");
        figures.insert(format!("{name}_p50_ms"), serde_json::json!(round(*p50)));
        figures.insert(format!("{name}_p95_ms"), serde_json::json!(round(*p95)));
        figures.insert(
            format!("{name}_p95_vs_idle"),
            serde_json::json!(round(ratio)),
        );
    }
    figures.insert(
        "passages_per_s_alone".into(),
        serde_json::json!(round(busy.alone_per_s)),
    );
    figures.insert(
        "passages_per_s_searched".into(),
        serde_json::json!(round(busy.searched_per_s)),
    );
    figures.into()
}

/// The last line: every figure of the run.
fn json_line(
    args: &SearchBench,
    table: &[Row],
    recalls: &Recalls,
    build_s: f64,
) -> serde_json::Value {
    let figure = |mode: &str, which: usize| {
        table
            .iter()
            .find(|row| row.0 == mode)
            .map(|row| if which == 0 { row.1 } else { row.2 })
            .unwrap_or(f64::NAN)
    };
    let four = |r: f64| (r * 10_000.0).round() / 10_000.0;
    let by_ef = |list: &[(i64, f64)]| {
        list.iter()
            .map(|(ef, r)| (ef.to_string(), four(*r)))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    // The headline figure is the held-out passage recall, the usual ANN measure; the phrase
    // figure is printed beside it.
    serde_json::json!({
        "bench": "search",
        "chunks": args.chunks,
        "queries": args.queries,
        "k": K,
        "ef_search": search::EF_SEARCH,
        "vector_p50_ms": round(figure("vector", 0)),
        "vector_p95_ms": round(figure("vector", 1)),
        "text_p50_ms": round(figure("text", 0)),
        "text_p95_ms": round(figure("text", 1)),
        "hybrid_p50_ms": round(figure("hybrid", 0)),
        "hybrid_p95_ms": round(figure("hybrid", 1)),
        "text_question_p50_ms": round(figure("text/questions", 0)),
        "text_question_p95_ms": round(figure("text/questions", 1)),
        "hybrid_question_p50_ms": round(figure("hybrid/questions", 0)),
        "hybrid_question_p95_ms": round(figure("hybrid/questions", 1)),
        "semantic_queries": args.semantic,
        "recall_at_10": four(Recalls::at_api(&recalls.passages)),
        "phrase_recall_at_10": four(Recalls::at_api(&recalls.phrases)),
        "passage_recall_at_10_by_ef_search": by_ef(&recalls.passages),
        "phrase_recall_at_10_by_ef_search": by_ef(&recalls.phrases),
        "filtered_vector_p95_ms": round(figure("vector/1% filter", 1)),
        "filtered_text_p95_ms": round(figure("text/1% filter", 1)),
        "filtered_hybrid_p95_ms": round(figure("hybrid/1% filter", 1)),
        "filtered_p95_ratio_vector": four(figure("vector/1% filter", 1) / figure("vector", 1)),
        "filtered_p95_ratio_text": four(figure("text/1% filter", 1) / figure("text", 1)),
        "filtered_p95_ratio_hybrid": four(figure("hybrid/1% filter", 1) / figure("hybrid", 1)),
        "filtered_recall_at_10": four(recalls.filtered),
        "hnsw_build_s": round(build_s),
    })
}

/// Registers `model` as the active version without its HNSW index: loading into a live index is
/// far slower than building it once at the end (`models::register` again builds it).
pub(super) async fn prepare_bulk_load(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
) -> anyhow::Result<()> {
    models::register(pool, model).await?;
    models::activate(pool, &model.model_version).await?;
    // DDL on a version's own index, whose name is built from the version: runtime SQL.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop index {}",
        model.index_name()
    )))
    .execute(pool)
    .await?;
    Ok(())
}

pub(super) fn round(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// The texts of the readable fixtures, chunked as the pipeline would.
pub(super) fn corpus() -> anyhow::Result<Vec<String>> {
    let root = PathBuf::from("fixtures");
    let mut texts = Vec::new();
    for name in [
        "text/pdfjs-README.md",
        "text/cjk-shift_jis.txt",
        "text/cjk-euc_kr.txt",
        "html/python-tutorial-introduction.html",
        "html/debian-faq-choosing.ko.html",
    ] {
        let path = root.join(name);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let sniffed = extract::sniff(&bytes, name)?;
        let pages = if sniffed.kind == extract::DocKind::Html {
            extract::html::extract_html(&bytes, &sniffed)?
        } else {
            extract::extract_text(&bytes, &sniffed)?
        };
        let chunks = chunk_pages(&pages, &ChunkConfig::default(), &ApproxTokens);
        texts.extend(chunks.into_iter().map(|c| c.text));
    }
    Ok(texts)
}

pub(super) async fn load_document(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
    number: usize,
    texts: &[String],
    vectors: Vec<Vector>,
) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    let filename = format!("corpus-{number:04}.txt");
    let id: i64 = sqlx::query_scalar(
        "insert into documents (filename, content_type, byte_size, sha256, status)
         values ($1, 'text/plain', 0, sha256(convert_to($1, 'UTF8')), 'ready')
         returning id",
    )
    .bind(&filename)
    .fetch_one(&mut *tx)
    .await?;
    let indexes: Vec<i32> = (0..texts.len() as i32).collect();
    // Analysed as the extract step does, and stored with the chunks as it stores them.
    let terms: Vec<_> = indexes
        .iter()
        .zip(texts)
        .map(|(i, t)| docket::search::index::analyze_chunk(*i, t))
        .collect();
    let languages: Vec<&str> = terms.iter().map(|t| t.language.code()).collect();
    let term_counts: Vec<i32> = terms.iter().map(|t| t.term_count).collect();
    sqlx::query(
        "insert into chunks (document_id, chunk_index, page, text, token_count, content_hash,
                             language, term_count, analyzer)
         select $1, i, i / 50 + 1, t, 1, sha256(convert_to(t, 'UTF8')), l, n, $6
         from unnest($2::int[], $3::text[], $4::text[], $5::int[]) as u(i, t, l, n)",
    )
    .bind(id)
    .bind(&indexes)
    .bind(texts)
    .bind(&languages)
    .bind(&term_counts)
    .bind(docket::analysis::ANALYZER_VERSION)
    .execute(&mut *tx)
    .await?;
    docket::search::index::write(&mut tx, id, &terms).await?;
    sqlx::query(
        "insert into embeddings (document_id, model_version, chunk_index, embedding)
         select $1, $2, * from unnest($3::int[], $4::vector[])",
    )
    .bind(id)
    .bind(&model.model_version)
    .bind(&indexes)
    .bind(&vectors)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "insert into embedding_sets (document_id, model_version, chunk_count, completed_at)
         values ($1, $2, $3, now())",
    )
    .bind(id)
    .bind(&model.model_version)
    .bind(texts.len() as i32)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Serves the real router on a loopback port until `stop`.
pub(super) async fn serve(
    pool: &sqlx::PgPool,
    searcher: Arc<Searcher>,
    stop: &CancellationToken,
) -> anyhow::Result<String> {
    let state = docket::http::AppState::builder(pool.clone(), searcher)
        .job_kinds([])
        .max_upload_bytes(1024)
        .start(stop.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(docket::http::serve(
        listener,
        docket::http::router(state),
        stop.clone().cancelled_owned(),
    ));
    Ok(base)
}

/// One search through the API; returns the number of hits.
pub(super) async fn call(
    client: &reqwest::Client,
    base: &str,
    q: &str,
    mode: &str,
) -> anyhow::Result<usize> {
    call_in(client, base, q, mode, None).await
}

/// [`call`], only in `collection` when given.
async fn call_in(
    client: &reqwest::Client,
    base: &str,
    q: &str,
    mode: &str,
    collection: Option<&str>,
) -> anyhow::Result<usize> {
    Ok(search_timed(client, base, q, mode, collection).await?.hits)
}

/// What one search through the API answered: its hits, and the stages its `Server-Timing`
/// header named with their ms.
struct Answer {
    hits: usize,
    stages: Vec<(String, f64)>,
}

async fn search_timed(
    client: &reqwest::Client,
    base: &str,
    q: &str,
    mode: &str,
    collection: Option<&str>,
) -> anyhow::Result<Answer> {
    let mut params = vec![("q", q), ("mode", mode), ("k", "10")];
    params.extend(collection.map(|c| ("collection", c)));
    let response = client
        .get(format!("{base}/api/search"))
        .query(&params)
        .send()
        .await?;
    let status = response.status();
    let timing = response
        .headers()
        .get("server-timing")
        .and_then(|v| v.to_str().ok())
        .and_then(docket::search::parse_server_timing)
        .unwrap_or_default();
    let body: serde_json::Value = response.json().await?;
    anyhow::ensure!(status.is_success(), "search {mode} {q:?}: {status} {body}");
    Ok(Answer {
        hits: body["hits"].as_array().map_or(0, Vec::len),
        stages: timing,
    })
}

pub(super) fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[at].as_secs_f64() * 1000.0
}

/// Mean recall@K of the HNSW query against the exact one, per `ef_search` in
/// [`RECALL_EF_SEARCH`]. A hit counts when it is at least as near as the exact K-th neighbour, so
/// ties between equally distant chunks are not misses. Each query's exact answer (a scan of
/// every vector) is computed once.
async fn recall(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
    hash: &HashEmbedder,
    queries: &[String],
) -> anyhow::Result<Vec<(i64, f64)>> {
    let sql = search::vector_sql(model.dims, &model.model_version, search::Scope::All, false);
    let mut totals = [0.0; RECALL_EF_SEARCH.len()];
    for q in queries {
        let vector = Vector::from(hash.embed_one(q));
        let exact = nearest(pool, &sql, &vector, None).await?;
        let Some(&kth) = exact.last() else { continue };
        for (total, ef_search) in totals.iter_mut().zip(RECALL_EF_SEARCH) {
            let approximate = nearest(pool, &sql, &vector, Some(ef_search)).await?;
            let found = approximate.iter().filter(|&&d| d <= kth + 1e-9).count();
            *total += found.min(K) as f64 / exact.len() as f64;
        }
    }
    let n = queries.len().max(1) as f64;
    Ok(RECALL_EF_SEARCH
        .iter()
        .zip(totals)
        .map(|(&ef, total)| (ef, total / n))
        .collect())
}

/// The `ef_search` values recall is measured at; the API's is among them.
const RECALL_EF_SEARCH: [i64; 4] = [40, search::EF_SEARCH, 200, 400];

/// The collection holding 1% of the chunks, for the filtered figures.
const SMALL: &str = "small";

/// Moves every hundredth document into a new collection [`SMALL`]; its id.
async fn filtered_collection(pool: &sqlx::PgPool) -> anyhow::Result<i64> {
    let id = docket::collections::create(pool, SMALL).await?.0;
    let moved = sqlx::query("update documents set collection_id = $1 where id % 100 = 50")
        .bind(id)
        .execute(pool)
        .await?
        .rows_affected();
    anyhow::ensure!(
        moved > 0,
        "no document moved into the 1% collection: load more chunks"
    );
    Ok(id)
}

/// Mean recall@K of the filtered HNSW query (the API's ef_search, iterative scan) against an
/// exact scan of the collection's vectors.
async fn recall_in(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
    hash: &HashEmbedder,
    queries: &[String],
    collection: i64,
) -> anyhow::Result<f64> {
    let sql = search::vector_sql(model.dims, &model.model_version, search::Scope::All, true);
    let mut total = 0.0;
    for q in queries {
        let vector = Vector::from(hash.embed_one(q));
        let mut found = Vec::new();
        for exact in [false, true] {
            let mut tx = pool.begin().await?;
            let setting = if exact {
                "set local enable_indexscan = off".to_owned()
            } else {
                format!(
                    "set local hnsw.ef_search = {}; set local hnsw.iterative_scan = relaxed_order",
                    search::EF_SEARCH
                )
            };
            sqlx::raw_sql(sqlx::AssertSqlSafe(setting))
                .execute(&mut *tx)
                .await?;
            let rows: Vec<(i64, i32, f64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(&vector)
                .bind(K as i64)
                .bind(None::<Vec<i64>>)
                .bind(Some(vec![collection]))
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            found.push(rows.into_iter().map(|r| r.2).collect::<Vec<f64>>());
        }
        let (approximate, exact) = (&found[0], &found[1]);
        let Some(&kth) = exact.last() else { continue };
        let hits = approximate.iter().filter(|&&d| d <= kth + 1e-9).count();
        total += hits.min(K) as f64 / exact.len() as f64;
    }
    Ok(total / queries.len().max(1) as f64)
}

/// The distances of the K nearest chunks, through the index (with this `ef_search`) or, for
/// `None`, by an exact scan.
async fn nearest(
    pool: &sqlx::PgPool,
    sql: &str,
    vector: &Vector,
    ef_search: Option<i64>,
) -> anyhow::Result<Vec<f64>> {
    let mut tx = pool.begin().await?;
    if let Some(ef_search) = ef_search {
        sqlx::query("select set_config('hnsw.ef_search', $1, true)")
            .bind(ef_search.to_string())
            .execute(&mut *tx)
            .await?;
    } else {
        sqlx::query("set local enable_indexscan = off")
            .execute(&mut *tx)
            .await?;
    }
    let rows: Vec<(i64, i32, f64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(vector)
        .bind(K as i64)
        .bind(None::<Vec<i64>>)
        .bind(None::<Vec<i64>>)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(|r| r.2).collect())
}
