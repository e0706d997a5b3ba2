//! The `docket` command line: thin wrappers over the library, one subcommand per surface.
//!
//! This file holds the top-level definitions, the entry point and the dispatch; each group of
//! subcommands that acts on one part of the library has its own file (its clap enum next to its
//! handlers): `jobs.rs`, `schedule.rs`, `models.rs`, `search.rs`; `docket ingest` is the
//! [`crate::ingest`] client's own.

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::config::{DatabaseConfig, ServeConfig, WorkerConfigArgs};
use crate::queue::Queue;

mod access;
mod jobs;
mod models;
mod schedule;
mod search;

use jobs::JobsCommand;
use models::ModelsCommand;
use schedule::ScheduleCommand;
use search::SearchArgs;

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
    /// Recurring schedules: list, add, remove, enable, disable, run now, show, pg_cron.
    Schedule {
        #[command(flatten)]
        database: DatabaseConfig,
        #[command(subcommand)]
        command: ScheduleCommand,
    },
    /// Embedding model versions: list, add, activate.
    Models {
        #[command(flatten)]
        database: DatabaseConfig,
        #[command(subcommand)]
        command: ModelsCommand,
    },
    /// API tokens with roles: create (the secret is printed once), list, revoke.
    Tokens {
        #[command(flatten)]
        database: DatabaseConfig,
        #[command(subcommand)]
        command: access::TokensCommand,
    },
    /// Collections: list (with usage), create, delete (with their documents).
    Collections {
        #[command(flatten)]
        database: DatabaseConfig,
        #[command(subcommand)]
        command: access::CollectionsCommand,
    },
    /// Upload files and folders through the HTTP API, with a progress bar and a summary.
    #[command(after_help = crate::ingest::EXIT_STATUS_HELP)]
    Ingest(crate::ingest::IngestArgs),
    /// Search the stored chunks (embeds the query with the configured embedder).
    Search(SearchArgs),
    /// Benchmarks; each prints a table and, last, one JSON line. They are the `docket-bench`
    /// binary beside this one (`cargo build --release -p docket-bench`), run with these
    /// arguments: the product binary does not carry them.
    #[command(disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Bench { args } = cli.command {
        // Before the runtime starts: the process is replaced, threads and all.
        eprintln!("error: {:#}", run_bench(args));
        return ExitCode::FAILURE;
    }
    init_tracing();
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    if let Command::Ingest(args) = cli.command {
        // Ingest has exit codes of its own (rejected files vs. a run that could not finish).
        return runtime.block_on(crate::ingest::run(args));
    }
    exit_code(runtime.block_on(run(cli.command)))
}

/// The multi-threaded runtime docket's binaries run on (`docket-bench` too); on failure, says
/// why on stderr and answers the exit code.
pub fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|err| {
            eprintln!("error: cannot start the async runtime: {err}");
            ExitCode::FAILURE
        })
}

/// The exit code of a command's result, printing the error and its causes on stderr.
pub fn exit_code(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Replaces this process with `docket-bench args…` from this binary's directory; returns only
/// the reason when that fails.
fn run_bench(args: Vec<std::ffi::OsString>) -> anyhow::Error {
    use std::os::unix::process::CommandExt as _;
    let bench = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("docket-bench"),
        Err(err) => return anyhow::Error::new(err).context("finding this binary's directory"),
    };
    let err = std::process::Command::new(&bench).args(args).exec();
    anyhow::Error::new(err).context(format!(
        "running {} (build it with `cargo build --release -p docket-bench`)",
        bench.display()
    ))
}

/// Logs to stderr, filtered by `RUST_LOG` (info by default); `docket-bench` logs the same way.
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn,tower_http=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Runs one subcommand (`ingest` runs from [`main`], for its exit codes).
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
            let pool = crate::db::connect(&database.database_url, database.db_pool).await?;
            crate::db::migrate(&pool).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Jobs { database, command } => {
            let pool = crate::db::connect(&database.database_url, database.db_pool).await?;
            jobs::run(
                // A person's cancel here settles the job's document as the API's does.
                Queue::new(pool, std::time::Duration::from_secs(60))
                    .with_ends(std::sync::Arc::new(crate::pipeline::kinds())),
                command,
            )
            .await
        }
        Command::Schedule { database, command } => {
            let pool = crate::db::connect(&database.database_url, database.db_pool).await?;
            schedule::run(&pool, &database.database_url, command).await
        }
        Command::Models { database, command } => {
            let pool = crate::db::connect(&database.database_url, database.db_pool).await?;
            models::run(&pool, command).await
        }
        Command::Tokens { database, command } => {
            let pool = crate::db::connect(&database.database_url, database.db_pool).await?;
            access::tokens(&pool, command).await
        }
        Command::Collections { database, command } => {
            let pool = crate::db::connect(&database.database_url, database.db_pool).await?;
            access::collections(&pool, command).await
        }
        Command::Search(args) => search::run(args).await,
        Command::Bench { args } => Err(run_bench(args)),
        Command::Ingest(args) => {
            // Handled in `main`, which returns its exit code; kept here so the match is total.
            crate::ingest::run(args).await;
            Ok(())
        }
    }
}

/// Prints `value` as pretty JSON on stdout.
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).context("rendering JSON")?
    );
    Ok(())
}
