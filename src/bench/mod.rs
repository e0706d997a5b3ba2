//! `docket bench …`: measurements that compare docket side by side with a reference in one
//! run, print a table, and end with one JSON line that scripts can compare across runs.

mod embed;
mod queue;

use clap::Subcommand;

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The job queue: enqueue rate, drain rate against the raw SQL ceiling, pickup latency,
    /// and graphile-worker on the same server.
    Queue(queue::QueueBench),
    /// The local embedding model against sentence-transformers on torch CPU: texts/s and
    /// tokens/s for short and long texts, batch 1/16/64, 1 and 2 threads.
    Embed(embed::EmbedBench),
}

/// Runs one benchmark.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Queue(args) => queue::run(args).await,
        BenchCommand::Embed(args) => embed::run(args).await,
    }
}
