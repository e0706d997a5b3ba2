//! Test doubles that are real servers, for docket's integration tests and its benchmarks.
//!
//! Why a crate of its own: the product binary must not carry its test rigs. docket depends on
//! this crate only as a dev-dependency; this crate depends on docket for what the double must
//! share with the real thing (the hash embeddings, the Retry-After format).
//!
//! | part | role |
//! | --- | --- |
//! | [`embedding_server`] | an OpenAI-compatible embeddings API on loopback with rate limits and injectable faults |

pub mod embedding_server;

pub use embedding_server::{
    Corruption, EmbeddingServer, EmbeddingServerConfig, StatsSnapshot, start,
};
