//! `docket bench …`: measurements that compare docket side by side with a reference in one
//! run, print a table, and end with one JSON line that scripts can compare across runs.

mod queue;
mod search;

use clap::Subcommand;

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The job queue: enqueue rate, drain rate against the raw SQL ceiling, pickup latency,
    /// and graphile-worker on the same server.
    Queue(queue::QueueBench),
    /// Search: p50/p95 latency of vector, text and hybrid search through the HTTP API over
    /// 100,000 chunks, and recall@10 of the HNSW index against an exact scan.
    Search(search::SearchBench),
}

/// Runs one benchmark.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Queue(args) => queue::run(args).await,
        BenchCommand::Search(args) => search::run(args).await,
    }
}
