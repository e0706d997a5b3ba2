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

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use pgvector::Vector;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use crate::chunk::{ApproxTokens, ChunkConfig, chunk_pages};
use crate::embed::{Embedder, HashEmbedder};
use crate::extract;
use crate::models::{self, ModelVersion};
use crate::search::{self, Searcher};

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
    /// Embed queries with the local model (from DOCKET_MODEL_DIR or the default directory)
    /// instead of the hashing embedder, so latency includes a real query embedding. The stored
    /// vectors stay hashing vectors filed under the local version (the index cost is the same
    /// for any vectors of that dimension; embedding 100,000 chunks would take hours here).
    #[arg(long)]
    pub semantic: bool,
    #[arg(long, env = "DOCKET_MODEL_DIR", default_value_os_t = crate::config::default_model_dir())]
    pub model_dir: PathBuf,
}

const DATABASE: &str = "docket_bench_search";
pub(super) const DIMS: usize = 384;
const K: usize = 10;
pub(super) const CHUNKS_PER_DOCUMENT: usize = 1000;

/// Runs the benchmark.
pub async fn run(args: SearchBench) -> anyhow::Result<()> {
    let server: PgConnectOptions = args.database_url.parse().context("parsing DATABASE_URL")?;
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(server.clone().database("postgres"))
        .await
        .context("connecting to the server's postgres database")?;
    // The name is a constant identifier: no quoting concerns.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {DATABASE} with (force)"
    )))
    .execute(&admin)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("create database {DATABASE}")))
        .execute(&admin)
        .await?;
    let options = server
        .clone()
        .database(DATABASE)
        // The graph of 100,000 vectors must fit in memory or the build slows down badly.
        .options([("maintenance_work_mem", "1GB")]);
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options)
        .await
        .context("connecting to the scratch database")?;
    crate::app::migrate(&pool).await?;

    let result = measure(&pool, &args).await;
    pool.close().await;
    if !args.keep {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "drop database if exists {DATABASE} with (force)"
        )))
        .execute(&admin)
        .await?;
    }
    result
}

async fn measure(pool: &sqlx::PgPool, args: &SearchBench) -> anyhow::Result<()> {
    let embedder = if args.semantic {
        let local = crate::embed::LocalEmbedder::load(&crate::embed::LocalConfig {
            model_dir: args.model_dir.clone(),
            threads: 2,
        })?;
        anyhow::ensure!(
            local.dims() == DIMS,
            "the local model must have {DIMS} dimensions"
        );
        Embedder::Local(local)
    } else {
        Embedder::Hash(HashEmbedder::new(DIMS))
    };
    let model = ModelVersion::of(&embedder, &ChunkConfig::default());
    models::register(pool, &model).await?;
    models::activate(pool, &model.model_version).await?;
    // Loading into a live HNSW index is far slower than building it once at the end.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop index {}",
        model.index_name()
    )))
    .execute(pool)
    .await?;

    let corpus = corpus()?;
    let vocabulary: Vec<&str> = corpus
        .iter()
        .flat_map(|c| c.split_whitespace())
        .filter(|w| w.chars().count() >= 4 && w.chars().all(char::is_alphanumeric))
        .collect();
    let words: Vec<&str> = corpus.iter().flat_map(|c| c.split_whitespace()).collect();
    anyhow::ensure!(
        words.len() >= 120 && !vocabulary.is_empty(),
        "no corpus text found under fixtures/"
    );
    eprintln!(
        "bench search: {} base chunks from fixtures/, loading {} chunks",
        corpus.len(),
        args.chunks
    );
    let mut rng = StdRng::seed_from_u64(5);
    let load_started = Instant::now();
    let hash = HashEmbedder::new(DIMS);
    let mut produced = 0usize;
    while produced < args.chunks {
        let count = CHUNKS_PER_DOCUMENT.min(args.chunks - produced);
        // A window of consecutive words at a random place in the corpus, of a random length,
        // plus a few words from anywhere: overlapping, varied chunks like real documents have,
        // rather than hundreds of near-copies of one chunk (which no ANN index handles well and
        // no real corpus looks like).
        let texts: Vec<String> = (0..count)
            .map(|_| {
                let length = rng.random_range(40..120).min(words.len());
                let start = rng.random_range(0..=words.len() - length);
                let mut text = words[start..start + length].join(" ");
                for _ in 0..4 {
                    if let Some(word) = vocabulary.choose(&mut rng) {
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
        load_document(
            pool,
            &model,
            produced / CHUNKS_PER_DOCUMENT,
            &texts,
            vectors,
        )
        .await?;
        produced += count;
    }
    let load_s = load_started.elapsed().as_secs_f64();
    eprintln!("bench search: loaded in {load_s:.1} s; building the HNSW index");
    let build_started = Instant::now();
    models::register(pool, &model).await?;
    let build_s = build_started.elapsed().as_secs_f64();
    // A steady-state table: visibility map set, so the keyword scans are index-only.
    sqlx::query("vacuum analyze").execute(pool).await?;
    eprintln!("bench search: index built in {build_s:.1} s");

    // Queries: two or three consecutive words of a random base chunk, so text search has hits.
    let queries: Vec<String> = (0..args.queries.max(args.recall_queries) + 20)
        .map(|_| {
            let base = &corpus[rng.random_range(0..corpus.len())];
            let words: Vec<&str> = base
                .split_whitespace()
                .filter(|w| w.chars().all(char::is_alphanumeric))
                .collect();
            if words.len() < 3 {
                return (*vocabulary.choose(&mut rng).unwrap_or(&"search")).to_owned();
            }
            let start = rng.random_range(0..words.len() - 2);
            let take = rng.random_range(2..=3).min(words.len() - start);
            words[start..start + take].join(" ")
        })
        .collect();

    // Questions: a sentence-long run of 8 to 14 consecutive words (stop words included), as a
    // person types a question; they touch many more postings than a short phrase.
    let questions: Vec<String> = (0..args.queries + 20)
        .map(|_| {
            let base = &corpus[rng.random_range(0..corpus.len())];
            let words: Vec<&str> = base.split_whitespace().collect();
            let take = rng.random_range(8..=14).min(words.len());
            let start = rng.random_range(0..=words.len() - take);
            words[start..start + take].join(" ")
        })
        .collect();

    let searcher = Arc::new(Searcher::new(pool.clone(), embedder.clone(), model.clone()));
    let stop = CancellationToken::new();
    let base = serve(pool, searcher, &stop).await?;
    let client = reqwest::Client::new();
    let mut table = Vec::new();
    for (mode, set) in [
        ("vector", &queries),
        ("text", &queries),
        ("hybrid", &queries),
        ("text/questions", &questions),
        ("hybrid/questions", &questions),
    ] {
        let api_mode = mode.split('/').next().unwrap_or(mode);
        // Warm-up: caches, prepared statements, connections.
        for q in set.iter().take(20) {
            call(&client, &base, q, api_mode).await?;
        }
        let mut latencies = Vec::with_capacity(args.queries);
        let mut hits = 0usize;
        for q in set.iter().skip(20).take(args.queries) {
            let started = Instant::now();
            hits += call(&client, &base, q, api_mode).await?;
            latencies.push(started.elapsed());
        }
        latencies.sort();
        table.push((
            mode,
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.95),
            hits as f64 / latencies.len().max(1) as f64,
        ));
    }
    stop.cancel();

    // Recall is measured for two kinds of query: the short phrases timed above, and passages
    // drawn like the stored chunks but not stored (the held-out queries ANN benchmarks use).
    let phrases = &queries[20..20 + args.recall_queries];
    let passages: Vec<String> = (0..args.recall_queries)
        .map(|_| {
            let length = rng.random_range(40..120).min(words.len());
            let start = rng.random_range(0..=words.len() - length);
            words[start..start + length].join(" ")
        })
        .collect();
    let mut recalls = Vec::new();
    let mut passage_recalls = Vec::new();
    for ef_search in [40, search::EF_SEARCH, 200, 400] {
        recalls.push((
            ef_search,
            recall(pool, &model, &hash, phrases, ef_search).await?,
        ));
        passage_recalls.push((
            ef_search,
            recall(pool, &model, &hash, &passages, ef_search).await?,
        ));
    }
    let at_ef = |list: &[(i64, f64)]| {
        list.iter()
            .find(|(ef, _)| *ef == search::EF_SEARCH)
            .map_or(f64::NAN, |r| r.1)
    };
    // The headline figure is the held-out passage recall, the usual ANN measure; the phrase
    // figure is printed beside it.
    let recall = at_ef(&passage_recalls);
    let phrase_recall = at_ef(&recalls);

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
    for (mode, p50, p95, hits) in &table {
        println!("{mode:<17} {p50:>10.2} {p95:>10.2} {hits:>12.1}");
    }
    println!(
        "recall@{K} of HNSW vs exact scan over {} queries (the API uses ef_search={}):",
        args.recall_queries,
        search::EF_SEARCH
    );
    println!("  ef_search  phrase queries  passage queries");
    for ((ef_search, phrase), (_, passage)) in recalls.iter().zip(&passage_recalls) {
        println!("  {ef_search:>9}  {phrase:>14.4}  {passage:>15.4}");
    }
    println!("load {load_s:.1} s, HNSW build {build_s:.1} s");
    let figure = |mode: &str, which: usize| {
        table
            .iter()
            .find(|row| row.0 == mode)
            .map(|row| if which == 0 { row.1 } else { row.2 })
            .unwrap_or(f64::NAN)
    };
    println!(
        "{}",
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
            "recall_at_10": (recall * 10_000.0).round() / 10_000.0,
            "phrase_recall_at_10": (phrase_recall * 10_000.0).round() / 10_000.0,
            "passage_recall_at_10_by_ef_search": passage_recalls
                .iter()
                .map(|(ef, r)| (ef.to_string(), (r * 10_000.0).round() / 10_000.0))
                .collect::<std::collections::BTreeMap<_, _>>(),
            "phrase_recall_at_10_by_ef_search": recalls
                .iter()
                .map(|(ef, r)| (ef.to_string(), (r * 10_000.0).round() / 10_000.0))
                .collect::<std::collections::BTreeMap<_, _>>(),
            "hnsw_build_s": round(build_s),
        })
    );
    Ok(())
}

pub(super) fn round(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// The texts of the readable fixtures, chunked as the pipeline would.
pub(super) fn corpus() -> anyhow::Result<Vec<String>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures");
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
        .map(|(i, t)| crate::search::index::analyze_chunk(*i, t))
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
    .bind(crate::analysis::ANALYZER_VERSION)
    .execute(&mut *tx)
    .await?;
    crate::search::index::write(&mut tx, id, &terms).await?;
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
    let state = crate::http::AppState {
        pool: pool.clone(),
        queue: crate::queue::Queue::new(pool.clone(), Duration::from_secs(60)),
        job_kinds: Arc::new(Vec::new()),
        api_token: None,
        max_upload_bytes: 1024,
        searcher,
        events: crate::http::EventHub::start(pool.clone(), stop.clone()),
        embedder_warning: None,
        guard: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(crate::http::serve(
        listener,
        crate::http::router(state),
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
    let response = client
        .get(format!("{base}/api/search"))
        .query(&[("q", q), ("mode", mode), ("k", "10")])
        .send()
        .await?;
    let status = response.status();
    let body: serde_json::Value = response.json().await?;
    anyhow::ensure!(status.is_success(), "search {mode} {q:?}: {status} {body}");
    Ok(body["hits"].as_array().map_or(0, Vec::len))
}

pub(super) fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[at].as_secs_f64() * 1000.0
}

/// Mean recall@K of the HNSW query against the exact one. A hit counts when it is at least as
/// near as the exact K-th neighbour, so ties between equally distant chunks are not misses.
async fn recall(
    pool: &sqlx::PgPool,
    model: &ModelVersion,
    hash: &HashEmbedder,
    queries: &[String],
    ef_search: i64,
) -> anyhow::Result<f64> {
    let sql = search::vector_sql(model.dims, &model.model_version, search::Scope::All);
    let mut total = 0.0;
    for q in queries {
        let vector = Vector::from(hash.embed_one(q));
        let approximate = nearest(pool, &sql, &vector, Some(ef_search)).await?;
        let exact = nearest(pool, &sql, &vector, None).await?;
        let Some(&kth) = exact.last() else { continue };
        let found = approximate.iter().filter(|&&d| d <= kth + 1e-9).count();
        total += found.min(K) as f64 / exact.len() as f64;
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
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows.into_iter().map(|r| r.2).collect())
}
