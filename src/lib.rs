//! # docket
//!
//! Turns uploaded documents into searchable embeddings, durably, with PostgreSQL as the only
//! piece of infrastructure.
//!
//! ## Layout
//!
//! Modules from the bottom up: each uses only modules above it in this table (the arrows run
//! down; `tests/api/layers.rs` checks it). docs/ARCHITECTURE.md has the long version: the
//! layers, the owner of each table, the contracts.
//!
//! | module | role |
//! | --- | --- |
//! | [`analysis`] | text → index terms: language detection, stemming and stop words, CJK bigrams (pure) |
//! | [`extract`] | bytes → pages of text; synchronous, and isolated in a child process for PDFs |
//! | [`chunk`] | text → chunks of a target token count, and the token counting itself (pure) |
//! | [`db`] | the connection pool and the migrations |
//! | [`queue`] | the job queue in PostgreSQL, the only reader and writer of `jobs`: enqueue, claim, complete/retry/dead, rescue, prune. Knows no job kinds |
//! | [`listen`] | one LISTEN connection that reconnects with backoff (worker wake-ups, page events) |
//! | [`metrics`] | `/metrics`: per-process counters the others push into, database gauges, the Prometheus text format |
//! | [`worker`] | the pool: claims within free capacity, heartbeats leases, runs handlers, shuts down gracefully |
//! | [`embed`] | text → vectors: a closed enum of providers, the fleet-wide rate limit (one budget in PostgreSQL), in-call retries |
//! | [`models`] | model versions: which embedder and chunking made a set of vectors; one is active |
//! | [`collections`] | the spaces documents live in, and a request's [`collections::Reach`]: the collection ids every query filters by |
//! | [`access`] | a caller's role and collections, and the API tokens (stored as hashes) |
//! | [`documents`] | the document lifecycle, the only writer of `documents.status`; an upload, its bytes and its first job commit together |
//! | [`webhooks`] | endpoints, signed deliveries as jobs of the queue (`webhook.deliver`), events enqueued with the state change; SSRF-checked targets |
//! | [`search`] | vector (HNSW), ranked keyword (BM25) and hybrid search over the chunks; the keyword index |
//! | [`maintenance`] | the rescuer (expired leases), retention (old finished jobs) and keyword indexing left behind, in every process |
//! | [`schedule`] | cron schedules in PostgreSQL: one leader (advisory lock) fires, missed firings backfilled; pg_cron alternative |
//! | [`pipeline`] | the job handlers and their payload types: extract (bytes → chunks), OCR, embed (chunks → vectors), reembed; each a checkpoint |
//! | [`http`] | the axum API, server-sent events, health, and the static page |
//! | [`ingest`] | `docket ingest`: a client of the upload API that sends files and folders in batches |
//! | [`config`] | the only place that reads the environment: plain settings, validated at start-up |
//! | [`app`] | builds a process from one configuration ([`config::ServeConfig`]): embedder, pipeline, HTTP, workers, maintenance |
//! | [`cli`] | the `docket` command line |
//!
//! Beside this crate, in the workspace: `docket-kernels` (the local encoder's SIMD kernels),
//! `docket-testkit` (a real OpenAI-compatible test server, for the tests and benchmarks only)
//! and `docket-bench` (the benchmarks, run as `docket bench …`); the product binary carries
//! neither of the last two.
//!
//! ## Guarantees
//!
//! - **At-least-once execution.** A claimed job carries a lease; a worker that dies loses its lease
//!   and the job is handed out again. Handlers therefore write through idempotent upserts keyed by
//!   what they produce, never by trusting that they run once.
//! - **Fenced writes.** Every state change after a claim names the job id *and* the lease token; a
//!   worker whose lease was lost learns so and its result is discarded.
//! - **Transactional enqueue.** A job commits with the rows that caused it, or not at all.
#![forbid(unsafe_code)]

/// The allocator of every process that links docket (the `docket` binary, `docket-bench` and
/// the test binaries), declared once here, beside the code that needs it.
///
/// Why not the system's: each forward pass of the local encoder allocates buffers of several
/// megabytes (activations, their int8 packing, the products' outputs). glibc's malloc gave
/// them back to the kernel when freed, so every pass page-faulted its working set in again:
/// under int8, 29 % of the encoder's samples were in the kernel (page faults, zeroing, cgroup
/// accounting), and int8 ran at 1.1–1.6× f32 instead of about 2×. Raising glibc's mmap and
/// trim thresholds removed the faults as well; mimalloc, which keeps freed pages for the next
/// pass, was a little faster still (BENCHMARKS.md, issue 24, third pass).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod access;
pub mod analysis;
pub mod app;
pub mod chunk;
pub mod cli;
pub mod collections;
pub mod config;
pub mod db;
pub mod documents;
pub mod embed;
pub mod extract;
pub mod http;
pub mod ingest;
pub mod listen;
pub mod maintenance;
pub mod metrics;
pub mod models;
pub mod pipeline;
pub mod queue;
pub mod schedule;
pub mod search;
pub mod webhooks;
pub mod worker;
