//! `docket bench pipeline --corpus DIR`: a real corpus through docket with the local model,
//! and where each second of a document's life goes.
//!
//! docket serves in this process ([`Docket`], a scratch database) with the local model (the
//! default one, in `--precision`); every file under DIR is uploaded over HTTP and the workers run
//! until no job is left. Then:
//! - **steps**: the time each step spent (`docket_step_microseconds_total`: extraction, OCR,
//!   chunking, keyword analysis, embedding, database writes), summed over documents, against
//!   the documents' summed lives (upload to ready); the rest of a life is queue wait and the
//!   steps' own bookkeeping;
//! - **end to end**: chunks per second from the first upload to the last job, against the
//!   encoder's isolated throughput on the very same chunk texts, measured in the same run
//!   (batches of 64, as the embed step sends them);
//! - **cache**: the documents are deleted (their vectors go with them; the embedding cache
//!   stays) and the same corpus uploaded again: that pass's embedding time as a fraction of the
//!   first's.
//!
//! The last line is JSON with every figure.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::PipelineBench;
use super::docket::{Docket, Provider};
use ::docket::embed::{LocalEmbedder, Precision, Purpose};

/// Steps of the breakdown, as the pipeline labels them.
const STEPS: [&str; 6] = [
    "extraction",
    "ocr",
    "chunking",
    "keyword_indexing",
    "embedding",
    "writes",
];

/// The longest a pass may take before the run is abandoned.
const PASS_LIMIT: Duration = Duration::from_secs(4 * 3600);

/// What one pass over the corpus measured.
struct Pass {
    wall: Duration,
    ready: i64,
    failed: i64,
    chunks: i64,
    /// Seconds per step (deltas of the step counters over the pass).
    steps: Vec<(&'static str, f64)>,
    /// Summed seconds from upload to ready of the ready documents.
    lives: f64,
}

impl Pass {
    fn step(&self, name: &str) -> f64 {
        self.steps
            .iter()
            .find(|(s, _)| *s == name)
            .map_or(0.0, |(_, v)| *v)
    }
}

pub async fn run(args: &PipelineBench, corpus: &Path) -> anyhow::Result<()> {
    let precision = args.precision;
    let files = corpus_files(corpus, args.limit)?;
    anyhow::ensure!(!files.is_empty(), "no files under {}", corpus.display());
    eprintln!(
        "bench pipeline: {} files from {}, local model in {precision:?}",
        files.len(),
        corpus.display()
    );
    let docket = Docket::start(
        &args.database_url,
        Provider::Local(precision),
        None,
        None,
        true,
    )
    .await?;
    let first = pass(&docket, &files).await?;

    // The encoder alone, on the same texts, in this run.
    let texts: Vec<String> = sqlx::query_scalar(
        "select c.text from chunks c join documents d on d.id = c.document_id
         where d.status = 'ready' order by c.document_id, c.chunk_index",
    )
    .fetch_all(&docket.pool)
    .await
    .context("reading the chunk texts")?;
    let encoder = encoder_seconds(texts.clone(), precision).await?;

    // Again, with every vector in the cache: delete the documents (the cache is not theirs).
    sqlx::query("delete from documents")
        .execute(&docket.pool)
        .await
        .context("deleting the first pass's documents")?;
    let second = pass(&docket, &files).await?;
    docket.stop().await?;

    report(&first, &second, texts.len(), encoder, precision);
    Ok(())
}

/// Every file under `dir` (sorted, the corpus's own README and manifest left out), at most
/// `limit` of them.
fn corpus_files(dir: &Path, limit: Option<usize>) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in
            std::fs::read_dir(&next).with_context(|| format!("reading {}", next.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if next != dir
                || !matches!(
                    path.file_name().and_then(|n| n.to_str()),
                    Some("README.md" | "MANIFEST.tsv")
                )
            {
                files.push(path);
            }
        }
    }
    files.sort();
    files.truncate(limit.unwrap_or(usize::MAX));
    Ok(files)
}

/// Uploads `files`, runs until no job is left, and measures.
async fn pass(docket: &Docket, files: &[PathBuf]) -> anyhow::Result<Pass> {
    let metrics = ::docket::metrics::global();
    let counter = |step: &str| metrics.counter("docket_step_microseconds_total", &[("step", step)]);
    let before: Vec<u64> = STEPS.iter().map(|s| counter(s)).collect();
    let started = Instant::now();
    let mut documents = Vec::with_capacity(files.len());
    for path in files {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let name = path
            .file_name()
            .map_or_else(|| "file".to_owned(), |n| n.to_string_lossy().into_owned());
        documents.push((name, bytes));
    }
    docket.upload_files(documents).await?;
    loop {
        let pending: i64 =
            sqlx::query_scalar("select count(*) from jobs where status in ('ready', 'running')")
                .fetch_one(&docket.pool)
                .await
                .context("counting pending jobs")?;
        if pending == 0 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < PASS_LIMIT,
            "the pass did not end in {PASS_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let wall = started.elapsed();
    let steps = STEPS
        .iter()
        .zip(&before)
        .map(|(s, b)| (*s, counter(s).saturating_sub(*b) as f64 / 1e6))
        .collect();
    let (ready, failed) = docket.finished().await?;
    let (chunks, lives): (i64, Option<f64>) = sqlx::query_as(
        "select (select count(*) from chunks c join documents d on d.id = c.document_id
                 where d.status = 'ready'),
                (select sum(extract(epoch from s.completed_at - d.created_at))::float8
                 from documents d join embedding_sets s on s.document_id = d.id
                 where d.status = 'ready')",
    )
    .fetch_one(&docket.pool)
    .await
    .context("counting chunks")?;
    Ok(Pass {
        wall,
        ready,
        failed,
        chunks,
        steps,
        lives: lives.unwrap_or(0.0),
    })
}

/// Seconds the local model takes alone for `texts` as passages, in batches of 64.
async fn encoder_seconds(texts: Vec<String>, precision: Precision) -> anyhow::Result<f64> {
    tokio::task::spawn_blocking(move || -> anyhow::Result<f64> {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let model = LocalEmbedder::load(&::docket::embed::LocalConfig {
            model_dir: ::docket::config::default_model_dir(),
            threads: cores,
            precision,
        })?;
        let started = Instant::now();
        for batch in texts.chunks(64) {
            model.embed_blocking(batch, Purpose::Passage)?;
        }
        Ok(started.elapsed().as_secs_f64())
    })
    .await
    .context("the encoder thread")?
}

fn report(first: &Pass, second: &Pass, texts: usize, encoder: f64, precision: Precision) {
    let e2e = first.chunks as f64 / first.wall.as_secs_f64().max(1e-9);
    let isolated = texts as f64 / encoder.max(1e-9);
    println!(
        "first pass: {} ready, {} failed, {} chunks in {:.1} s: {e2e:.1} chunks/s end to end; \
         the encoder alone {isolated:.1} chunks/s on the same texts ({:.2}×)",
        first.ready,
        first.failed,
        first.chunks,
        first.wall.as_secs_f64(),
        e2e / isolated.max(1e-9)
    );
    println!("{:<18} {:>10} {:>14}", "step", "seconds", "share of lives");
    let mut accounted = 0.0;
    for (step, seconds) in &first.steps {
        accounted += seconds;
        println!(
            "{step:<18} {seconds:>10.1} {:>13.1} %",
            seconds / first.lives.max(1e-9) * 100.0
        );
    }
    let rest = (first.lives - accounted).max(0.0);
    println!(
        "{:<18} {rest:>10.1} {:>13.1} %",
        "queue wait, other",
        rest / first.lives.max(1e-9) * 100.0
    );
    let fraction = second.step("embedding") / first.step("embedding").max(1e-9);
    println!(
        "second pass (same corpus, vectors cached): {:.1} s, embedding {:.2} s = {:.1} % of the first's",
        second.wall.as_secs_f64(),
        second.step("embedding"),
        fraction * 100.0
    );
    let steps = |pass: &Pass| -> serde_json::Value {
        pass.steps
            .iter()
            .map(|(s, v)| ((*s).to_owned(), serde_json::json!(super::round(*v))))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    println!(
        "{}",
        serde_json::json!({
            "bench": "pipeline-corpus",
            "precision": format!("{precision:?}").to_lowercase(),
            "documents_ready": first.ready,
            "documents_failed": first.failed,
            "chunks": first.chunks,
            "wall_s": super::round(first.wall.as_secs_f64()),
            "chunks_per_s": super::round(e2e),
            "encoder_chunks_per_s": super::round(isolated),
            "end_to_end_vs_encoder": super::round(e2e / isolated.max(1e-9)),
            "steps_s": steps(first),
            "document_lives_s": super::round(first.lives),
            "second_wall_s": super::round(second.wall.as_secs_f64()),
            "second_steps_s": steps(second),
            "second_embedding_fraction": super::round(fraction),
        })
    );
}
