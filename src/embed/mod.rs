//! Text → vectors.
//!
//! [`Embedder`] is a closed enum of providers rather than a trait object: the set is known, a
//! `match` shows every provider's behaviour side by side, and adding one (the local in-process
//! model is one) is one variant plus one arm per method.
//!
//! | part | role |
//! | --- | --- |
//! | [`hash`] | deterministic feature hashing, for tests and machines without a model |
//! | [`openai`] | any OpenAI-compatible `/embeddings` endpoint, batched, retried in-call |
//! | [`local`] | a BERT or XLM-R sentence-embedding model in-process (candle): the offline default |
//! | [`limiter`] | the requests/tokens limiter held inside the HTTP provider: one per process, drawing on the fleet's budget |
//! | [`budget`] | the fleet-wide rate budget in PostgreSQL (GCRA per provider key, one statement a slice) |
//! | [`cache`] | the embedding cache in PostgreSQL: vectors by model version and text, bounded, least recently used out |
//! | [`error`] | [`EmbedError`] and the single status → strategy classification |
//! | [`secret`] | the API key wrapper that never prints itself |
//!
//! Token counts for batching and the tokens-per-minute limit are *estimates*
//! ([`estimate_tokens`]); only the local model counts exactly, with its own tokenizer
//! ([`Embedder::local_token_counter`]), because its truncation makes the chunker's counts matter.
//!
//! Every text is embedded for a [`Purpose`]: as a query (what a person searches with) or as a
//! passage (what is stored). Models such as E5 are trained with a different prefix for each and
//! need it; the others ignore the purpose. [`Embedder::embed`] is the passage case, which is
//! what the pipeline stores; search embeds with [`Embedder::embed_as`] and [`Purpose::Query`].

pub mod budget;
pub mod cache;
pub mod error;
pub mod hash;
pub mod limiter;
pub mod local;
pub mod openai;
pub mod secret;

pub use budget::{FleetBudget, budget_key};
pub use error::EmbedError;
pub use hash::HashEmbedder;
pub use limiter::{Limiter, RateLimits};
pub use local::{LocalConfig, LocalEmbedder, LocalTokens, Precision, Prompts};
pub use openai::{OpenAiConfig, OpenAiEmbedder};
pub use secret::Secret;

use std::sync::Arc;

/// What a text is embedded as: asymmetric models (E5) put a different prompt in front of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A search query.
    Query,
    /// A stored passage (a chunk of a document).
    Passage,
}

/// An embedding provider. Cloning is cheap; clones share the HTTP client and the limiter.
#[derive(Debug, Clone)]
pub enum Embedder {
    /// Feature hashing: lexical, deterministic, offline.
    Hash(HashEmbedder),
    /// An OpenAI-compatible HTTP endpoint.
    OpenAi(OpenAiEmbedder),
    /// A BERT or XLM-R sentence-embedding model run in this process.
    Local(LocalEmbedder),
}

impl Embedder {
    /// Provider, model and dimensions, e.g. `hash:v1:384`, `openai:text-embedding-3-small:1536`
    /// or `local:all-MiniLM-L6-v2-256:384`.
    /// Anything that changes the vectors must change this string.
    pub fn model_id(&self) -> String {
        match self {
            Self::Hash(h) => format!("hash:v1:{}", h.dims()),
            Self::OpenAi(o) => o.model_id(),
            Self::Local(l) => l.model_id(),
        }
    }

    /// Length of every vector this embedder returns.
    pub fn dims(&self) -> usize {
        match self {
            Self::Hash(h) => h.dims(),
            Self::OpenAi(o) => o.dims(),
            Self::Local(l) => l.dims(),
        }
    }

    /// How many texts a caller should hand to one [`Embedder::embed`] call at most. Larger calls
    /// still work (the HTTP provider splits them), but a caller checkpointing per call should use
    /// this size.
    pub fn max_batch(&self) -> usize {
        match self {
            Self::Hash(_) => 256,
            Self::OpenAi(o) => o.max_batch(),
            // Enough tokens to fill a forward pass (64 chunks of 200 tokens ≈ 12,800 > 8,192),
            // few enough texts to checkpoint often.
            Self::Local(_) => 64,
        }
    }

    /// A short label for metrics and logs: `hash`, `openai` or `local`.
    pub fn provider_label(&self) -> &'static str {
        match self {
            Self::Hash(_) => "hash",
            Self::OpenAi(_) => "openai",
            Self::Local(_) => "local",
        }
    }

    /// Whether nearness means similar meaning (false for hashing, which only sees spellings).
    pub fn is_semantic(&self) -> bool {
        match self {
            Self::Hash(_) => false,
            Self::OpenAi(_) | Self::Local(_) => true,
        }
    }

    /// The shared rate limiter, for providers that have one (for metrics such as time waited).
    pub fn limiter(&self) -> Option<&Arc<Limiter>> {
        match self {
            Self::Hash(_) => None,
            Self::OpenAi(o) => Some(o.limiter()),
            Self::Local(_) => None,
        }
    }

    /// Makes the provider's rate limits fleet-wide: its limiter books every slice on the
    /// `rate_budgets` row of this provider (base URL, model, API key) in `pool`'s database.
    /// Providers without a limiter are left as they are. Returns whether a budget was attached.
    pub fn share_rate_budget(&self, pool: &sqlx::PgPool) -> bool {
        match self {
            Self::OpenAi(o) => o
                .limiter()
                .share(FleetBudget::new(pool.clone(), o.budget_key())),
            Self::Hash(_) | Self::Local(_) => false,
        }
    }

    /// Embeds `texts` as passages (what is stored), returning one vector of
    /// [`Embedder::dims`] values per text, in order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.embed_as(texts, Purpose::Passage).await
    }

    /// Embeds `texts` as `purpose`. Only the local model's prompts depend on it: hashing is
    /// symmetric, and an OpenAI-compatible endpoint takes its texts as they are.
    pub async fn embed_as(
        &self,
        texts: &[String],
        purpose: Purpose,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self {
            Self::Hash(h) => Ok(h.embed_all(texts)),
            Self::OpenAi(o) => o.embed(texts).await,
            Self::Local(l) => l.embed(texts, purpose).await,
        }
    }

    /// The local model's exact token counter, for the chunker; `None` for the other providers,
    /// whose chunks are sized by estimate.
    pub fn local_token_counter(&self) -> Option<LocalTokens> {
        match self {
            Self::Local(l) => Some(l.token_counter()),
            Self::Hash(_) | Self::OpenAi(_) => None,
        }
    }
}

/// Estimated token count of `text`, for batching and tokens-per-minute limits.
///
/// BPE tokenizers give English about four bytes per token, while CJK and other non-ASCII scripts
/// cost about one token per character or more; so this counts ASCII bytes / 4 (rounded up) plus
/// one per non-ASCII character, at least 1. It errs high on accented Latin text and low on long
/// digit runs; limits should keep some headroom.
pub fn estimate_tokens(text: &str) -> u32 {
    let (ascii, other) = text.chars().fold((0u32, 0u32), |(a, o), c| {
        if c.is_ascii() {
            (a.saturating_add(1), o)
        } else {
            (a, o.saturating_add(1))
        }
    });
    ascii.div_ceil(4).saturating_add(other).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_estimate_counts_ascii_by_fours_and_other_characters_singly() {
        assert_eq!(estimate_tokens(""), 1);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("東京"), 2);
        assert_eq!(estimate_tokens("ab東京"), 3);
    }

    #[tokio::test]
    async fn hash_embedder_returns_one_vector_per_text_in_order() {
        let embedder = Embedder::Hash(HashEmbedder::new(16));
        let texts = vec!["alpha".to_owned(), "beta".to_owned()];
        let vectors = embedder.embed(&texts).await.expect("hashing cannot fail");
        let hash = HashEmbedder::new(16);
        assert_eq!(
            vectors,
            vec![hash.embed_one("alpha"), hash.embed_one("beta")]
        );
        assert_eq!(embedder.model_id(), "hash:v1:16");
        assert!(!embedder.is_semantic());
    }
}
