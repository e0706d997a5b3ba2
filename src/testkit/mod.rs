//! Test doubles that are real servers, kept in the library because both the integration tests
//! and `docket bench` drive them.
//!
//! | part | role |
//! | --- | --- |
//! | [`embedding_server`] | an OpenAI-compatible embeddings API on loopback with rate limits and injectable faults |

pub mod embedding_server;

pub use embedding_server::{
    Corruption, EmbeddingServer, EmbeddingServerConfig, StatsSnapshot, start,
};
