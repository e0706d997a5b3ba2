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
    /// Upload files and folders through the HTTP API, with a progress bar and a summary.
    #[command(after_help = crate::ingest::EXIT_STATUS_HELP)]
    Ingest(crate::ingest::IngestArgs),
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

#[derive(Debug, Subcommand)]
enum ScheduleCommand {
    /// Every schedule with its last and next firing.
    List,
    /// Create a schedule.
    Add {
        name: String,
        /// Five cron fields, quoted: "0 2 * * *".
        cron: String,
        /// The job kind each firing enqueues.
        kind: String,
        /// IANA time zone the cron fields are read in.
        #[arg(long, default_value = "UTC")]
        timezone: String,
        /// JSON object payload of the job.
        #[arg(long, default_value = "{}")]
        payload: String,
        /// Missed firings younger than this many seconds are enqueued after downtime.
        #[arg(long, default_value_t = 86_400)]
        backfill_secs: i64,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
    },
    /// Delete a schedule.
    Remove { name: String },
    /// Turn a schedule on.
    Enable { name: String },
    /// Turn a schedule off.
    Disable { name: String },
    /// Enqueue a schedule's job now, outside its timetable.
    RunNow { name: String },
    /// One schedule as JSON; for nightly-reembed, what its next run will send.
    Show { name: String },
    /// Register the schedule's firing as a pg_cron job (UTC schedules; pg_cron 1.4+).
    InstallPgCron { name: String },
    /// Remove the schedule's pg_cron job.
    UninstallPgCron { name: String },
}

#[derive(Debug, Subcommand)]
enum ModelsCommand {
    /// Every version, with the progress of its embedding sets.
    List,
    /// Register a version (not active until `activate`).
    Add {
        /// hash or openai.
        provider: String,
        /// v1 for hash; the API's model name for openai.
        model: String,
        dims: i32,
        #[arg(long, default_value_t = 200)]
        chunk_tokens: i32,
        #[arg(long, default_value_t = 30)]
        chunk_overlap: i32,
    },
    /// Make a version the active one; the nightly reembed fills its sets.
    Activate { version: String },
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
        Command::Schedule { database, command } => {
            let pool = crate::app::connect(&database).await?;
            schedule(&pool, &database.database_url, command).await
        }
        Command::Models { database, command } => {
            let pool = crate::app::connect(&database).await?;
            models(&pool, command).await
        }
        Command::Search(args) => search(args).await,
        Command::Bench { command } => crate::bench::run(command).await,
        Command::Ingest(args) => {
            // Handled in `main`, which returns its exit code; kept here so the match is total.
            crate::ingest::run(args).await;
            Ok(())
        }
    }
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).context("rendering JSON")?
    );
    Ok(())
}

async fn schedule(
    pool: &sqlx::PgPool,
    database_url: &str,
    command: ScheduleCommand,
) -> anyhow::Result<()> {
    use crate::schedule::{self, store};
    let now = chrono::Utc::now();
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map_or_else(
            || "-".to_owned(),
            |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
        )
    };
    match command {
        ScheduleCommand::List => {
            println!(
                "{:<24} {:<14} {:<18} {:<12} {:<8} {:<21} next",
                "name", "cron", "zone", "kind", "enabled", "last"
            );
            for s in store::list(pool).await? {
                println!(
                    "{:<24} {:<14} {:<18} {:<12} {:<8} {:<21} {}",
                    s.name,
                    s.cron,
                    s.timezone,
                    s.kind,
                    s.enabled,
                    time(s.last_fired_for),
                    time(s.next_firing(now))
                );
            }
        }
        ScheduleCommand::Add {
            name,
            cron,
            kind,
            timezone,
            payload,
            backfill_secs,
            disabled,
        } => {
            let payload = serde_json::from_str(&payload).context("--payload is not JSON")?;
            let new = store::NewSchedule {
                name,
                cron,
                timezone,
                kind,
                payload,
                enabled: !disabled,
                backfill_secs,
            };
            let created = store::create(pool, &new, now).await?;
            println!(
                "schedule {} created; next firing {}",
                created.name,
                time(created.next_firing(now))
            );
        }
        ScheduleCommand::Remove { name } => {
            store::remove(pool, &name).await?;
            println!("schedule {name} removed");
        }
        ScheduleCommand::Enable { name } => {
            let s = store::set_enabled(pool, &name, true).await?;
            println!(
                "schedule {} enabled; next firing {}",
                s.name,
                time(s.next_firing(now))
            );
        }
        ScheduleCommand::Disable { name } => {
            store::set_enabled(pool, &name, false).await?;
            println!("schedule {name} disabled");
        }
        ScheduleCommand::RunNow { name } => {
            let enqueued = schedule::run_now(pool, &name, now).await?;
            println!("schedule {name}: job {} enqueued", enqueued.id);
        }
        ScheduleCommand::Show { name } => {
            let s = store::get(pool, &name).await?;
            let sends = crate::pipeline::reembed::next_run_sends(pool, &s).await?;
            print_json(&schedule::view(s, now, sends))?;
        }
        ScheduleCommand::InstallPgCron { name } => {
            let job = schedule::pg_cron::install(pool, database_url, &name).await?;
            println!(
                "pg_cron job {} ({}) in database {} runs `{}` at \"{}\" (GMT) in database {}",
                job.jobid,
                job.jobname,
                job.cron_database,
                job.command,
                job.schedule,
                job.target_database
            );
        }
        ScheduleCommand::UninstallPgCron { name } => {
            if schedule::pg_cron::uninstall(pool, database_url, &name).await? {
                println!("pg_cron job of {name} removed");
            } else {
                println!("schedule {name} had no pg_cron job");
            }
        }
    }
    Ok(())
}

async fn models(pool: &sqlx::PgPool, command: ModelsCommand) -> anyhow::Result<()> {
    use crate::models;
    match command {
        ModelsCommand::List => {
            println!(
                "{:<40} {:<7} {:>9} {:>9} {:>11}",
                "model version", "active", "complete", "of", "searchable"
            );
            for m in models::list(pool).await? {
                println!(
                    "{:<40} {:<7} {:>9} {:>9} {:>11}",
                    m.version.model_version,
                    m.active,
                    m.documents_complete,
                    m.documents_total,
                    m.documents_searchable
                );
            }
        }
        ModelsCommand::Add {
            provider,
            model,
            dims,
            chunk_tokens,
            chunk_overlap,
        } => {
            let version = models::add(
                pool,
                &models::NewModelVersion {
                    provider,
                    model,
                    dims,
                    chunk_tokens,
                    chunk_overlap,
                },
            )
            .await?;
            println!(
                "model version {} registered (not active)",
                version.model_version
            );
        }
        ModelsCommand::Activate { version } => {
            let version = models::switch_to(pool, &version).await?;
            println!(
                "model version {} is active; documents move over as their sets complete (nightly-reembed, or `docket schedule run-now nightly-reembed`)",
                version.model_version
            );
        }
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
            group: false,
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
    // During a model switch: which older versions answered, and which could not.
    for other in results.versions.iter().skip(1) {
        match (&other.reason, other.documents) {
            (Some(reason), _) => println!("     {} not searched: {reason}", other.model_version),
            (None, Some(n)) => println!("     {n} documents read under {}", other.model_version),
            (None, None) => {}
        }
    }
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
