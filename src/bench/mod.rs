//! `docket bench …`: measurements that compare docket side by side with a reference in one
//! run, print a table, and end with one JSON line that scripts can compare across runs.

mod embed;
mod extract;
mod pipeline;
mod queue;
mod search;

use clap::Subcommand;

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The job queue: enqueue rate, drain rate against the raw SQL ceiling, pickup latency,
    /// and graphile-worker on the same server.
    Queue(queue::QueueBench),
    /// PDF extraction: our extract step against poppler's pdftotext on the same files, in
    /// pages/s and MB/s, with the failures of each.
    Extract(extract::ExtractBench),
    /// The embedding path: documents/min through upload → ready against the test embedding
    /// server at an RPM limit (achieved share of the limit), and the pipeline's own overhead
    /// per chunk with no limit.
    Pipeline(pipeline::PipelineBench),
    /// Search: p50/p95 latency of vector, text and hybrid search through the HTTP API over
    /// 100,000 chunks, and recall@10 of the HNSW index against an exact scan.
    Search(search::SearchBench),
    /// The local embedding model against sentence-transformers on torch CPU: texts/s and
    /// tokens/s for short and long texts, batch 1/16/64, 1 and 2 threads.
    Embed(embed::EmbedBench),
}

/// Runs one benchmark.
pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Queue(args) => queue::run(args).await,
        BenchCommand::Extract(args) => extract::run(args).await,
        BenchCommand::Pipeline(args) => pipeline::run(args).await,
        BenchCommand::Search(args) => search::run(args).await,
        BenchCommand::Embed(args) => embed::run(args).await,
    }
}
