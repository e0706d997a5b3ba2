//! The one integration test binary: each module tests one part of docket end to end with real
//! files, processes and servers. One binary links once, which matters on two cores.
//! Database tests need DATABASE_URL (a server where databases can be created); each gets a
//! fresh migrated database from `#[sqlx::test]`.

mod access;
mod cache;
mod collections;
mod documents;
mod embed;
mod extract;
mod extraction;
mod fairness;
mod fleet_limit;
mod formats;
mod hostile;
mod ingest;
mod int8;
mod jobs_api;
mod keyword;
mod kinds;
mod layers;
mod listing;
mod local;
mod metrics;
mod models;
mod multilingual;
mod ocr;
mod openapi;
mod pipeline;
mod queue;
mod reader;
mod relevance;
mod replica;
mod retry;
mod schedule;
mod search;
mod security;
mod settle;
mod support;
mod webhooks;
mod worker;
