//! `docket bench search-quality`: how often search puts the answer on the page, measured on an
//! evaluation set (a corpus, questions, and for each the passage that answers it).
//!
//! A scratch database ingests the corpus through the real pipeline (extraction in the isolated
//! child, chunking, keyword indexing, the configured embedder: the same settings and flags as
//! `docket serve`). Every question then runs in each mode, and hybrid under each fusion method
//! asked for, straight through [`Searcher`] with k = 10. The hits go to
//! `scripts/bench-quality.py`, which scores them with the evaluation's own passage matcher
//! (`check.py` beside the questions; reimplementing it would measure something else) and prints
//! doc@1, doc@3, passage@1/5/10 and MRR per mode, per language and per kind, ending with one
//! JSON line.
//!
//! Beside it, a reference BM25 (the PyPI package `bm25s`, in the bench's own venv) ranks the
//! same chunks, tokenised by docket's analysis, for the same query terms: the top-10 overlap
//! says whether our SQL computes BM25 as the textbook does.

mod centring;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use serde_json::json;

use docket::config::PipelineSettings;
use docket::documents::NewDocument;
use docket::search::{self, Fusion, Mode, SearchRequest, Searcher};
use docket::worker::{Worker, WorkerConfig};

/// Options of `docket bench search-quality`.
#[derive(Debug, clap::Args)]
pub struct QualityBench {
    /// Server URL; a scratch database (`--scratch-db`) is (re)created on it.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// The corpus: its pdf/, html/ and text/ folders are ingested.
    #[arg(long, default_value = "../shared/corpus")]
    pub corpus: PathBuf,
    /// The questions (TSV: query, expected_file, page, evidence, also_in, lang, kind); the
    /// evaluation's check.py must stand beside it.
    #[arg(long, default_value = "../shared/eval/queries.tsv")]
    pub queries: PathBuf,
    /// Hybrid fusion methods to compare besides the default (`rrf:K`, `minmax:W`, `zscore:W`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "rrf:60,rrf:10,minmax:0.2,minmax:0.3,minmax:0.4,minmax:0.5,minmax:0.6,minmax:0.8,zscore:0.3,zscore:0.5"
    )]
    pub fusions: Vec<String>,
    /// The scratch database's name (two runs at once need two).
    #[arg(long, default_value = "docket_bench_quality")]
    pub scratch_db: String,
    /// Search an already ingested scratch database again instead of ingesting anew.
    #[arg(long)]
    pub reuse: bool,
    /// Skip the reference BM25 (and its venv).
    #[arg(long)]
    pub no_reference: bool,
    /// Questions no document of the corpus answers (TSV: query, lang): the share that get no
    /// hit with relevance 0.5 or more is measured.
    #[arg(long, default_value = "crates/bench/data/unanswerable.tsv")]
    pub no_answer: PathBuf,
    /// Also fit the relevance models on this run's hits and print them as Rust constants
    /// (`src/search/relevance.rs`), with how well the fitted probabilities match.
    #[arg(long)]
    pub fit: bool,
    /// Also average the chunk vectors per script and write them to this file as the centring
    /// table of `docket::search::centring` (`src/search/centring/fitted.rs`); the searches of
    /// this run still use the table the binary was built with.
    #[arg(long)]
    pub fit_centring: Option<PathBuf>,
    /// Centring shares to compare in vector and hybrid mode besides the default (0: the
    /// vectors as stored); each needs the centring table built in.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub centring_shares: Vec<f32>,
    /// The part of the model id the fitted centring applies to.
    #[arg(long, default_value = "multilingual-e5-small")]
    pub centring_key: String,
    /// Keep the hits file the scoring script reads at this path.
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// The venv of the reference BM25 (created when missing).
    #[arg(long, default_value = ".docket/bench-quality-venv")]
    pub venv: PathBuf,
    #[command(flatten)]
    pub pipeline: PipelineSettings,
}

const K: i64 = 10;
/// What the reference side needs: bm25s and the numpy/scipy it computes with.
const REFERENCE_PACKAGES: &[&str] = &["bm25s==0.3.16", "numpy", "scipy"];

/// One question of the evaluation set, as the scoring script needs it.
#[derive(Debug, Serialize)]
struct Question {
    query: String,
    expected_file: String,
    page: String,
    evidence: String,
    also_in: String,
    lang: String,
    kind: String,
}

/// One hit as the scoring script needs it, with what its relevance was computed from.
#[derive(Debug, Serialize)]
struct Scored {
    filename: String,
    page: i32,
    text: String,
    relevance: f64,
    cosine: Option<f64>,
    keyword: Option<f64>,
    other_language: bool,
    cosine_gap: f64,
    keyword_gap: f64,
}

/// A search of the bench, with k = [`K`].
async fn search(
    searcher: &Searcher,
    query: &str,
    mode: Mode,
    min_relevance: Option<f64>,
    name: &str,
) -> anyhow::Result<search::SearchResults> {
    searcher
        .search(&SearchRequest {
            query: query.to_owned(),
            k: K,
            mode,
            document: None,
            collections: docket::collections::Reach::everything(),
            model_version: None,
            group: false,
            min_relevance,
        })
        .await
        .with_context(|| format!("searching {query:?} ({name})"))
}

/// The hits of `results` as the scoring script reads them.
fn scored(results: search::SearchResults) -> Vec<Scored> {
    results
        .hits
        .into_iter()
        .map(|h| Scored {
            filename: h.filename,
            page: h.page,
            text: h.text,
            relevance: h.relevance,
            cosine: h.signals.cosine,
            keyword: h.signals.keyword,
            other_language: h.signals.other_language,
            cosine_gap: h.signals.cosine_gap,
            keyword_gap: h.signals.keyword_gap,
        })
        .collect()
}

/// Reads the unanswerable questions (query, lang), skipping the header.
fn read_unanswerable(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut questions = Vec::new();
    for (number, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let (query, lang) = line.split_once('\t').with_context(|| {
            format!("{}:{}: expected query<TAB>lang", path.display(), number + 1)
        })?;
        questions.push((query.to_owned(), lang.to_owned()));
    }
    Ok(questions)
}

/// Runs the benchmark.
pub async fn run(args: QualityBench) -> anyhow::Result<()> {
    let questions = read_questions(&args.queries)?;
    let check = args
        .queries
        .parent()
        .unwrap_or(Path::new("."))
        .join("check.py");
    anyhow::ensure!(
        check.is_file(),
        "{} not found: the passage matcher of the evaluation set is needed",
        check.display()
    );
    let pool =
        super::scratch_database(&args.database_url, &args.scratch_db, !args.reuse, &[]).await?;
    docket::db::MIGRATOR.run(&pool).await?;
    let pipeline = docket::app::pipeline(&pool, &args.pipeline).await?;
    let ingest = if args.reuse {
        json!({ "reused": true })
    } else {
        ingest(&pool, &pipeline, &args.corpus).await?
    };
    // Chunks are indexed in the extract step; anything left behind is indexed now.
    while search::index::index_pending(&pool, 1000).await? > 0 {}
    let centring = match &args.fit_centring {
        Some(path) => {
            let fitted = centring::fit(
                &pool,
                &pipeline.model.model_version,
                &args.centring_key,
                path,
            )
            .await?;
            eprintln!(
                "bench search-quality: centring means written to {}: {fitted:?}",
                path.display()
            );
            json!(
                fitted
                    .iter()
                    .map(|(s, n)| (format!("{s:?}"), n))
                    .collect::<Vec<_>>()
            )
        }
        None => json!(null),
    };
    let centred = search::centring::Centring::for_model(
        &pipeline.embedder.model_id(),
        search::centring::SHARE,
    )
    .is_some();

    let searcher = Searcher::new(
        pool.clone(),
        pipeline.embedder.clone(),
        pipeline.model.clone(),
    );
    let mut runs = serde_json::Map::new();
    let mut latency = serde_json::Map::new();
    let mut text_top: Vec<Vec<(i64, i32)>> = Vec::new();
    // Each mode as the page asks (the searcher's default threshold), then with every hit
    // (`:all`: the ranking itself, and what the relevance fit learns from).
    let mut variants: Vec<(String, Mode, Searcher, Option<f64>)> = Vec::new();
    for (name, mode) in [
        ("vector", Mode::Vector),
        ("text", Mode::Text),
        ("hybrid", Mode::Hybrid),
    ] {
        variants.push((name.into(), mode, searcher.clone(), None));
        variants.push((format!("{name}:all"), mode, searcher.clone(), Some(0.0)));
    }
    for name in &args.fusions {
        let fusion = Fusion::parse(name).with_context(|| format!("unknown fusion {name:?}"))?;
        variants.push((
            format!("hybrid:{}", fusion.name()),
            Mode::Hybrid,
            searcher.clone().with_fusion(fusion),
            Some(0.0),
        ));
    }
    for share in &args.centring_shares {
        for (name, mode) in [("vector", Mode::Vector), ("hybrid", Mode::Hybrid)] {
            variants.push((
                format!("{name}:share{share}"),
                mode,
                searcher.clone().with_centring_share(*share),
                Some(0.0),
            ));
        }
    }
    let unanswerable = read_unanswerable(&args.no_answer)?;
    let mut silent = serde_json::Map::new();
    for (name, mode, searcher, min_relevance) in &variants {
        eprintln!("bench search-quality: {name}");
        let started = Instant::now();
        let mut per_query = Vec::new();
        for question in &questions {
            let results = search(searcher, &question.query, *mode, *min_relevance, name).await?;
            if name == "text:all" {
                text_top.push(
                    results
                        .hits
                        .iter()
                        .map(|h| (h.document_id, h.chunk_index))
                        .collect(),
                );
            }
            per_query.push(scored(results));
        }
        let ms = started.elapsed().as_secs_f64() * 1000.0 / questions.len().max(1) as f64;
        latency.insert(name.clone(), json!((ms * 100.0).round() / 100.0));
        runs.insert(name.clone(), serde_json::to_value(per_query)?);
        if min_relevance.is_none() {
            let mut answers = Vec::new();
            for (query, lang) in &unanswerable {
                let results = search(searcher, query, *mode, None, name).await?;
                answers.push(json!({ "query": query, "lang": lang,
                    "no_good_match": results.no_good_match, "hits": scored(results) }));
            }
            silent.insert(name.clone(), json!(answers));
        }
    }

    // For studying the vectors outside the bench (`--keep`): every question's query vector.
    let mut query_vectors = Vec::new();
    if args.keep.is_some() {
        let texts: Vec<String> = questions
            .iter()
            .map(|q| q.query.clone())
            .chain(unanswerable.iter().map(|(q, _)| q.clone()))
            .collect();
        for text in texts {
            let mut vectors = pipeline
                .embedder
                .embed_as(&[text], docket::embed::Purpose::Query)
                .await?;
            query_vectors.push(vectors.pop().unwrap_or_default());
        }
    }
    let reference = if args.no_reference {
        None
    } else {
        Some(reference_input(&pool, &questions, &text_top).await?)
    };
    let input = json!({
        "model_version": pipeline.model.model_version,
        "semantic": pipeline.embedder.is_semantic(),
        "default_fusion": searcher.fusion().name(),
        "ingest": ingest,
        "mean_ms_per_query": latency,
        "questions": questions,
        "runs": runs,
        "unanswerable": silent,
        "reference": reference,
        "fit": args.fit,
        "centring": { "searched_centred": centred, "share": search::centring::SHARE,
                      "fitted_now": centring },
        "query_vectors": query_vectors,
    });
    let scratch = args.keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("docket-bench-quality-{}.json", std::process::id()))
    });
    std::fs::write(&scratch, serde_json::to_vec(&input)?).context("writing the hits")?;
    let python = if args.no_reference && !args.fit {
        PathBuf::from("python3")
    } else {
        super::venv_with(&args.venv, REFERENCE_PACKAGES).await?
    };
    let script = Path::new("scripts/bench-quality.py");
    let status = tokio::process::Command::new(&python)
        .arg(script)
        .arg(&scratch)
        .arg(&check)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .status()
        .await
        .with_context(|| format!("running {} (from the repository root)", script.display()))?;
    if args.keep.is_none() {
        let _ = std::fs::remove_file(&scratch);
    }
    anyhow::ensure!(status.success(), "the scoring script failed: {status}");
    Ok(())
}

/// Reads the questions, skipping the header.
fn read_questions(path: &Path) -> anyhow::Result<Vec<Question>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut questions = Vec::new();
    for (number, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        anyhow::ensure!(
            fields.len() == 7,
            "{}:{}: expected 7 tab-separated fields, found {}",
            path.display(),
            number + 1,
            fields.len()
        );
        questions.push(Question {
            query: fields[0].into(),
            expected_file: fields[1].into(),
            page: fields[2].into(),
            evidence: fields[3].into(),
            also_in: fields[4].into(),
            lang: fields[5].into(),
            kind: fields[6].into(),
        });
    }
    Ok(questions)
}

/// Uploads every file of the corpus' pdf/, html/ and text/ folders and runs the pipeline until
/// no job is left.
async fn ingest(
    pool: &sqlx::PgPool,
    pipeline: &std::sync::Arc<docket::pipeline::Pipeline>,
    corpus: &Path,
) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let mut files = Vec::new();
    for folder in ["pdf", "html", "text"] {
        let dir = corpus.join(folder);
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_file() {
                files.push(path);
            }
        }
    }
    files.sort();
    for path in &files {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let filename = path
            .file_name()
            .and_then(|n| n.to_str())
            .context("a file name that is not UTF-8")?;
        docket::pipeline::create_with_extract_job(
            pool,
            &NewDocument {
                collection: docket::collections::DEFAULT,
                filename,
                content_type: "application/octet-stream",
                bytes: &bytes,
                upload: None,
            },
        )
        .await?;
    }
    let mut registry = docket::worker::Registry::new();
    pipeline.register(&mut registry);
    registry
        .set_concurrency("extract", 2)
        .set_concurrency("embed", 2);
    let lease = std::time::Duration::from_secs(120);
    let worker = Worker::new(
        docket::queue::Queue::new(pool.clone(), lease),
        registry,
        WorkerConfig::for_lease(lease),
    );
    loop {
        worker.run_until_idle().await?;
        let pending: i64 =
            sqlx::query_scalar("select count(*) from jobs where status in ('ready', 'running')")
                .fetch_one(pool)
                .await?;
        if pending == 0 {
            break;
        }
        // Retries wait for their backoff: let them run now.
        sqlx::query("update jobs set run_at = now() where status = 'ready'")
            .execute(pool)
            .await?;
    }
    let (ready, failed, chunks): (i64, i64, i64) = sqlx::query_as(
        "select count(*) filter (where status = 'ready'),
                count(*) filter (where status = 'failed'),
                (select count(*) from chunks)
         from documents",
    )
    .fetch_one(pool)
    .await?;
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "bench search-quality: ingested {} files in {seconds:.0} s: {ready} ready, {failed} failed, {chunks} chunks",
        files.len()
    );
    Ok(
        json!({ "files": files.len(), "ready": ready, "failed": failed, "chunks": chunks,
               "seconds": (seconds * 10.0).round() / 10.0 }),
    )
}

/// What the reference BM25 needs: every chunk as docket's analysis tokenised it, each
/// question's query terms, and docket's own text-mode top 10 to compare with.
async fn reference_input(
    pool: &sqlx::PgPool,
    questions: &[Question],
    text_top: &[Vec<(i64, i32)>],
) -> anyhow::Result<serde_json::Value> {
    let rows: Vec<(i64, i32, Vec<String>, Vec<i16>)> = sqlx::query_as(
        "select document_id, chunk_index, array_agg(term order by term), array_agg(tf order by term)
         from chunk_terms
         group by document_id, chunk_index
         order by document_id, chunk_index",
    )
    .fetch_all(pool)
    .await?;
    // Chunks whose every word is a stop word have no postings but still count in N.
    let empty: Vec<(i64, i32)> = sqlx::query_as(
        "select document_id, chunk_index from chunks c
         where not exists (select 1 from chunk_terms t
                           where t.document_id = c.document_id and t.chunk_index = c.chunk_index)",
    )
    .fetch_all(pool)
    .await?;
    let mut ids = Vec::new();
    let mut tokens = Vec::new();
    for (document_id, chunk_index, terms, tfs) in rows {
        ids.push(format!("{document_id}:{chunk_index}"));
        let mut chunk = Vec::new();
        for (term, tf) in terms.into_iter().zip(tfs) {
            for _ in 0..tf {
                chunk.push(term.clone());
            }
        }
        tokens.push(chunk);
    }
    for (document_id, chunk_index) in empty {
        ids.push(format!("{document_id}:{chunk_index}"));
        tokens.push(Vec::new());
    }
    let queries: Vec<Vec<String>> = questions
        .iter()
        .map(|q| {
            let parsed = docket::analysis::query::parse(&q.query);
            parsed.all_terms().into_iter().map(str::to_owned).collect()
        })
        .collect();
    let ours: Vec<Vec<String>> = text_top
        .iter()
        .map(|top| top.iter().map(|(d, c)| format!("{d}:{c}")).collect())
        .collect();
    Ok(json!({ "ids": ids, "tokens": tokens, "queries": queries, "ours": ours }))
}
