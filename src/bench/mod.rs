//! `docket bench …`: measurements that compare docket side by side with a reference in one
//! run, print a table, and end with one JSON line that scripts can compare across runs.

mod queue;

use clap::Subcommand;

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The job queue: enqueue rate, drain rate against the raw SQL ceiling, pickup latency,
    /// and graphile-worker on the same server.
    Queue(queue::QueueBench),
}

/// Runs one benchmark.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Queue(args) => queue::run(args).await,
    }
}
