//! # docket
//!
//! Turns uploaded documents into searchable embeddings, durably, with PostgreSQL as the only
//! piece of infrastructure.
//!
//! ## Layout
//!
//! | module | role |
//! | --- | --- |
//! | [`config`] | the only place that reads the environment; validated at start-up |
//! | [`queue`] | the job queue in PostgreSQL: enqueue, claim, complete/retry/dead, rescue, prune. Knows no job kinds |
//! | [`worker`] | the pool: claims within free capacity, heartbeats leases, runs handlers, shuts down gracefully |
//! | [`documents`] | document rows and their SQL; an upload, its bytes and its first job commit together |
//! | [`pipeline`] | the job handlers: extract (bytes → chunks) and embed (chunks → vectors), each a checkpoint |
//! | [`models`] | model versions: which embedder and chunking made a set of vectors; one is active |
//! | [`search`] | vector (HNSW), ranked keyword (BM25) and hybrid search over the chunks; the keyword index |
//! | [`analysis`] | text → index terms: language detection, stemming and stop words, CJK bigrams (pure) |
//! | [`extract`] | bytes → pages of text; synchronous, and isolated in a child process for PDFs |
//! | [`embed`] | text → vectors: a closed enum of providers, the fleet-wide rate limit (one budget in PostgreSQL), in-call retries |
//! | [`testkit`] | real test doubles (an OpenAI-compatible embeddings server) for tests and benchmarks |
//! | [`http`] | the axum API, server-sent events, health, and the static page |
//! | [`schedule`] | cron schedules in PostgreSQL: one leader (advisory lock) fires, missed firings backfilled; pg_cron alternative |
//! | [`metrics`] | `/metrics`: per-process counters and database gauges in the Prometheus text format |
//! | [`ingest`] | `docket ingest`: a client of the upload API that sends files and folders in batches |
//! | [`listen`] | one LISTEN connection that reconnects with backoff (worker wake-ups, page events) |
//! | [`maintenance`] | the rescuer (expired leases) and retention (old finished jobs), in every process |
//! | [`bench`] | `docket bench …`: side-by-side measurements ending in one JSON line |
//! | [`app`] | wires HTTP, workers and maintenance loops from one configuration ([`config::ServeConfig`]) |
//! | [`cli`] | the `docket` command line |
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

pub mod analysis;
pub mod app;
pub mod bench;
pub mod chunk;
pub mod cli;
pub mod config;
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
pub mod testkit;
pub mod worker;
