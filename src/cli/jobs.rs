//! `docket jobs …`: look at jobs and act on them, through the queue's admin calls.

use anyhow::Context;
use clap::Subcommand;

use crate::queue::{JobFilter, JobId, JobStatus, Queue};

#[derive(Debug, Subcommand)]
pub(super) enum JobsCommand {
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

/// Runs one `docket jobs` subcommand.
pub(super) async fn run(queue: Queue, command: JobsCommand) -> anyhow::Result<()> {
    match command {
        JobsCommand::List {
            status,
            kind,
            limit,
        } => list(&queue, status, kind, limit).await?,
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

/// `docket jobs list`: a table of the newest jobs.
async fn list(
    queue: &Queue,
    status: Option<String>,
    kind: Option<String>,
    limit: i64,
) -> anyhow::Result<()> {
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
    Ok(())
}
