//! `docket-bench` (also reached as `docket bench …`): measurements that compare docket side by
//! side with a reference in one run, print a table, and end with one JSON line that scripts can
//! compare across runs.
//!
//! Why a binary of its own: the benchmarks are a few thousand lines, with their own
//! dependencies and a test embedding server, that no deployment needs. `docket bench …` finds
//! this binary beside `docket` and runs it with the same arguments. Paths (fixtures, scripts,
//! `../shared`) are relative to the working directory: run it from the repository root, as
//! `make bench` does.
#![forbid(unsafe_code)]

mod embed;
mod evidence;
mod extract;
mod formats;
mod interference;
mod ocr;
mod pipeline;
mod quality;
mod queue;
mod search;
mod webhooks;

use std::path::{Path, PathBuf};

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

/// The benchmarks.
// Parsed once per process from the command line: the size of the largest variant (the
// search-quality bench carries every pipeline setting) costs nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The job queue: enqueue rate, drain rate against the raw SQL ceiling, pickup latency,
    /// and graphile-worker on the same server.
    Queue(queue::QueueBench),
    /// PDF extraction: our extract step against poppler's pdftotext on the same files, in
    /// pages/s and MB/s, with the failures of each; then OCR against ocrmypdf --sidecar
    /// (pages/s and character agreement). With --formats: the office, e-mail and Hangul
    /// readers against pandoc / pyhwp / xlrd / Python's email, per format.
    Extract(extract::ExtractBench),
    /// Chunk boundaries: the share of the evaluation set's evidence sentences that lie inside
    /// one chunk, with paragraphs rebuilt against the extractors' raw line output.
    Evidence(evidence::EvidenceBench),
    /// The embedding path: documents/min through upload → ready against the test embedding
    /// server at an RPM limit (achieved share of the limit), and the pipeline's own overhead
    /// per chunk with no limit; with `--processes 1,2,4`, that limit shared by N real
    /// `docket worker` processes (share used, requests over it) and the limiter's own cost.
    Pipeline(pipeline::PipelineBench),
    /// Fair share: one document uploaded into collection B behind 2,000 queued in A, against
    /// the same upload on an idle queue, and A's throughput with and without B's trickle.
    Fairness(pipeline::fairness::FairnessBench),
    /// Search: p50/p95 latency of vector, text and hybrid search through the HTTP API over
    /// 100,000 chunks, and recall@10 of the HNSW index against an exact scan.
    Search(search::SearchBench),
    /// What the queue and ingestion cost search on one PostgreSQL: search p50/p95 while the
    /// queue drains at full speed and while documents are ingested, against idle, on the same
    /// server (and, with --replica-url, on a streaming replica while the primary drains).
    Interference(interference::InterferenceBench),
    /// Search quality on an evaluation set: doc@1/3, passage@1/5/10 and MRR per mode, language
    /// and kind, hybrid fusion methods side by side, and BM25 against a reference (bm25s).
    SearchQuality(quality::QualityBench),
    /// The local embedding model against sentence-transformers on torch CPU: texts/s and
    /// tokens/s for short and long texts, batch 1/16/64, 1 and 2 threads.
    Embed(embed::EmbedBench),
    /// Webhooks: deliveries/s to a local receiver with 1 and 50 endpoints, and ingest
    /// throughput with 10 endpoints subscribed against none.
    Webhooks(webhooks::WebhooksBench),
}

#[derive(Debug, Parser)]
#[command(
    name = "docket bench",
    bin_name = "docket bench",
    version,
    about = "docket's benchmarks; each prints a table and, last, one JSON line"
)]
struct Cli {
    #[command(subcommand)]
    command: BenchCommand,
}

fn main() -> ExitCode {
    // The benchmarks run docket's pipeline in this process, and its PDF extraction child is
    // "this very binary" ([`docket::app::extract_settings`]), as in `docket`.
    if std::env::args().nth(1).as_deref() == Some(docket::extract::pdf::CHILD_SUBCOMMAND) {
        return docket::extract::pdf::run_child();
    }
    let cli = Cli::parse();
    docket::cli::init_tracing();
    let runtime = match docket::cli::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    docket::cli::exit_code(runtime.block_on(run(cli.command)))
}

/// The `docket` binary beside this one, which the fleet benchmark starts as `docket worker`
/// processes, as a deployment would.
fn docket_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the docket-bench binary")?;
    let docket = exe.with_file_name("docket");
    if !docket.is_file() {
        bail!(
            "{} is missing: build both binaries (cargo build --release -p docket -p docket-bench)",
            docket.display()
        );
    }
    Ok(docket)
}

/// Runs one benchmark.
async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Queue(args) => queue::run(args).await,
        BenchCommand::Extract(args) => extract::run(args).await,
        BenchCommand::Evidence(args) => evidence::run(args).await,
        BenchCommand::Pipeline(args) => pipeline::run(args).await,
        BenchCommand::Fairness(args) => pipeline::fairness::run(args).await,
        BenchCommand::Search(args) => search::run(args).await,
        BenchCommand::Interference(args) => interference::run(args).await,
        BenchCommand::SearchQuality(args) => quality::run(args).await,
        BenchCommand::Embed(args) => embed::run(args).await,
        BenchCommand::Webhooks(args) => webhooks::run(args).await,
    }
}

/// A pool on the scratch database `name` of the server `url` points at, its connections with
/// the server `settings` given; with `fresh`, the database is dropped and created first. `name`
/// is one of the benches' constants.
async fn scratch_database(
    url: &str,
    name: &str,
    fresh: bool,
    settings: &[(&str, &str)],
) -> anyhow::Result<sqlx::PgPool> {
    let server: PgConnectOptions = url.parse().context("parsing DATABASE_URL")?;
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(server.clone().database("postgres"))
        .await
        .context("connecting to the server's postgres database")?;
    let exists: bool =
        sqlx::query_scalar("select exists (select 1 from pg_database where datname = $1)")
            .bind(name)
            .fetch_one(&admin)
            .await?;
    // The name is a constant identifier: no quoting concerns.
    if fresh && exists {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "drop database {name} with (force)"
        )))
        .execute(&admin)
        .await?;
    }
    if fresh || !exists {
        sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
            .execute(&admin)
            .await?;
    }
    PgPoolOptions::new()
        .max_connections(8)
        .connect_with(server.database(name).options(settings.iter().copied()))
        .await
        .with_context(|| format!("connecting to {name}"))
}

/// Drops the scratch database `name` (made by [`scratch_database`]) on the server `url` points at.
async fn drop_scratch_database(url: &str, name: &str) -> anyhow::Result<()> {
    let admin = scratch_database(url, "postgres", false, &[]).await?;
    // The name is a constant identifier: no quoting concerns.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {name} with (force)"
    )))
    .execute(&admin)
    .await?;
    admin.close().await;
    Ok(())
}

/// The Python of `venv`, after creating it and installing `packages` when one of them is
/// missing (checked with `pip show`, so a second run costs well under a second).
async fn venv_with(venv: &Path, packages: &[&str]) -> anyhow::Result<PathBuf> {
    let python = venv.join("bin/python");
    let names: Vec<&str> = packages
        .iter()
        .map(|p| p.split(['=', '<', '>']).next().unwrap_or(p))
        .collect();
    let ready = tokio::process::Command::new(&python)
        .args(["-m", "pip", "show", "-q"])
        .args(&names)
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if ready {
        return Ok(python);
    }
    create_venv(venv, packages).await
}

/// Creates `venv` (if needed) and pip-installs `packages` into it; answers its python.
pub(crate) async fn create_venv(venv: &Path, packages: &[&str]) -> anyhow::Result<PathBuf> {
    let python = venv.join("bin/python");
    eprintln!(
        "bench: installing {} into {} (once)",
        packages.join(" "),
        venv.display()
    );
    let status = tokio::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(venv)
        .status()
        .await
        .context("python3 -m venv")?;
    if !status.success() {
        bail!(
            "python3 -m venv {} failed (is python3-venv installed?)",
            venv.display()
        );
    }
    let status = tokio::process::Command::new(&python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(packages)
        .status()
        .await
        .context("pip install")?;
    if !status.success() {
        bail!("installing {} failed", packages.join(" "));
    }
    Ok(python)
}
