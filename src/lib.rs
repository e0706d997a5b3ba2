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
//! | [`extract`] | bytes → pages of text; synchronous, and isolated in a child process for PDFs |
//! | [`pipeline`] | the job steps; for now chunking, pages of text → chunks to embed |
//! | [`embed`] | text → vectors: providers behind one trait, the shared rate limiter, in-call retries |
//! | [`http`] | the axum API, health, and the static page |
//! | [`app`] | wires HTTP, workers and maintenance loops from one [`config::Config`] |
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

pub mod app;
pub mod cli;
pub mod config;
pub mod embed;
pub mod extract;
pub mod http;
pub mod pipeline;
pub mod queue;
pub mod worker;
