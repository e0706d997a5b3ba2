//! The `docket` command line: thin wrappers over the library, one subcommand per surface.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::config::{DatabaseConfig, PipelineSettings, ServeConfig, WorkerConfigArgs};
use crate::queue::{JobFilter, JobId, JobStatus, Queue};

#[derive(Debug, Parser)]
#[command(
    name = "docket",
    version,
    about = "Durable document ingestion and semantic search on PostgreSQL"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// HTTP API and page, workers, and maintenance loops.
    Serve(ServeConfig),
    /// Workers and maintenance loops only (scale out by starting more).
    Worker(WorkerConfigArgs),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseConfig),
    /// Look at and act on jobs.
    Jobs {
        #[command(flatten)]
        database: DatabaseConfig,
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// Search the stored chunks (embeds the query with the configured embedder).
    Search(SearchArgs),
    /// Benchmarks; each prints a table and, last, one JSON line.
    Bench {
        #[command(subcommand)]
        command: crate::bench::BenchCommand,
    },
}

#[derive(Debug, clap::Args)]
struct SearchArgs {
    /// What to look for (web-search syntax: "a phrase", -excluded, or).
    query: String,
    /// How many hits.
    #[arg(short, long, default_value_t = crate::search::DEFAULT_K)]
    k: i64,
    /// hybrid, vector or text.
    #[arg(long, default_value = "hybrid")]
    mode: String,
    /// Only this document.
    #[arg(long)]
    document: Option<i64>,
    /// Search this model version instead of the active one.
    #[arg(long)]
    model_version: Option<String>,
    /// Print the results as JSON (the shape of GET /api/search).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    database: DatabaseConfig,
    #[command(flatten)]
    pipeline: PipelineSettings,
}

#[derive(Debug, Subcommand)]
enum JobsCommand {
    /// Newest jobs first.
    List {
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        kind: Option<String>,
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// One job as JSON, with its error history.
    Show { id: i64 },
    /// Put a dead or cancelled job back to ready.
    Retry { id: i64 },
    /// Cancel a ready or running job.
    Cancel { id: i64 },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,tower_http=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(config) => {
            let bind = config.bind;
            let app = crate::app::App::build(config).await?;
            tracing::info!(address = %app.local_addr().unwrap_or(bind), "listening on http://{}", app.local_addr().unwrap_or(bind));
            app.run_until_stopped(crate::app::shutdown_signal()).await
        }
        Command::Worker(config) => {
            crate::app::run_worker(config, crate::app::shutdown_signal()).await
        }
        Command::Migrate(database) => {
            let pool = crate::app::connect(&database).await?;
            crate::app::migrate(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Jobs { database, command } => {
            let pool = crate::app::connect(&database).await?;
            jobs(
                Queue::new(pool, std::time::Duration::from_secs(60)),
                command,
            )
            .await
        }
        Command::Search(args) => search(args).await,
        Command::Bench { command } => crate::bench::run(command).await,
    }
}

async fn search(args: SearchArgs) -> anyhow::Result<()> {
    let mode = crate::search::Mode::parse(&args.mode).with_context(|| {
        format!(
            "unknown mode {:?}; expected hybrid, vector or text",
            args.mode
        )
    })?;
    let pool = crate::app::connect(&args.database).await?;
    let embedder = args.pipeline.embedder()?;
    let model = crate::models::ModelVersion::of(&embedder, &args.pipeline.chunking());
    let searcher = crate::search::Searcher::new(pool, embedder, model);
    let results = searcher
        .search(&crate::search::SearchRequest {
            query: args.query,
            k: args.k,
            mode,
            document: args.document.map(crate::documents::DocumentId),
            model_version: args.model_version,
        })
        .await?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).context("rendering the results")?
        );
        return Ok(());
    }
    let version = results.model_version.as_deref().unwrap_or("none");
    let note = if results.semantic {
        ""
    } else {
        ", not semantic"
    };
    println!(
        "{} hits ({:?}, model {version}{note})",
        results.hits.len(),
        results.mode
    );
    for (rank, hit) in results.hits.iter().enumerate() {
        println!(
            "{:>3}. {:.4}  {} p.{} #{} (document {})",
            rank + 1,
            hit.score,
            hit.filename,
            hit.page,
            hit.chunk_index,
            hit.document_id
        );
        println!(
            "     {}",
            hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
    Ok(())
}

async fn jobs(queue: Queue, command: JobsCommand) -> anyhow::Result<()> {
    match command {
        JobsCommand::List {
            status,
            kind,
            limit,
        } => {
            let status = status.as_deref().map(str::parse::<JobStatus>).transpose()?;
            let jobs = queue
                .list(&JobFilter {
                    status,
                    kind,
                    before: None,
                    limit,
                })
                .await?;
            println!(
                "{:>10}  {:<16} {:<10} {:>8}  {:<25} last error",
                "id", "kind", "status", "attempts", "run at"
            );
            for job in jobs {
                println!(
                    "{:>10}  {:<16} {:<10} {:>4}/{:<3}  {:<25} {}",
                    job.id,
                    job.kind,
                    job.status,
                    job.attempts,
                    job.max_attempts,
                    job.run_at.format("%Y-%m-%d %H:%M:%S%.3f"),
                    job.last_error.unwrap_or_default()
                );
            }
        }
        JobsCommand::Show { id } => {
            let job = queue.get(JobId(id)).await?;
            println!(
                "{}",
                serde_json::to_string_pretty(&job).context("rendering the job")?
            );
        }
        JobsCommand::Retry { id } => {
            let job = queue.retry_dead(JobId(id)).await?;
            println!("job {} is {} again", job.id, job.status);
        }
        JobsCommand::Cancel { id } => {
            let job = queue.cancel(JobId(id)).await?;
            println!("job {} is {}", job.id, job.status);
        }
    }
    Ok(())
}
