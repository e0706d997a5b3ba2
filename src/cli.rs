//! The `docket` command line: thin wrappers over the library, one subcommand per surface.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::config::{DatabaseConfig, ServeConfig, WorkerConfigArgs};
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
    /// Upload files and folders through the HTTP API, with a progress bar and a summary.
    #[command(after_help = crate::ingest::EXIT_STATUS_HELP)]
    Ingest(crate::ingest::IngestArgs),
    /// Benchmarks; each prints a table and, last, one JSON line.
    Bench {
        #[command(subcommand)]
        command: crate::bench::BenchCommand,
    },
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
    if let Command::Ingest(args) = cli.command {
        // Ingest has exit codes of its own (rejected files vs. a run that could not finish).
        return runtime.block_on(crate::ingest::run(args));
    }
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
        Command::Bench { command } => crate::bench::run(command).await,
        Command::Ingest(args) => {
            // Handled in `main`, which returns its exit code; kept here so the match is total.
            crate::ingest::run(args).await;
            Ok(())
        }
    }
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
