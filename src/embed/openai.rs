//! The OpenAI-compatible HTTP provider (OpenAI, Ollama, vLLM, text-embeddings-inference,
//! LiteLLM all speak `POST {base_url}/embeddings`).
//!
//! A call is split into batches bounded by input count *and* estimated tokens; each batch waits
//! on the shared [`Limiter`], is sent, and is retried in-call on transient failures with jittered
//! exponential backoff (the `backoff` crate's policy) for at most `max_elapsed` measured from the
//! batch's first failure. A provider-given retry time is a floor on the wait, and a 429 pauses the
//! whole limiter, and through the fleet budget every process, so no other worker knocks early.
//! When the budget would be overrun the last error is returned as it is, so the queue
//! reschedules the job (a 429 without spending an attempt).
//! Every 429 received is counted in `/metrics` (`docket_embedding_429_responses_total`), the
//! retried ones included.
//!
//! Answers are checked before they are trusted: one vector per input (placed by `index`), the
//! expected dimensions, only finite values. Any mismatch is a permanent error that names it.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use backoff::ExponentialBackoffBuilder;
use backoff::backoff::Backoff;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::error::{EmbedError, Failure, classify};
use super::estimate_tokens;
use super::limiter::Limiter;
use super::secret::Secret;

/// Models whose vector size is known without asking, and whether they accept `dimensions`.
const KNOWN_MODELS: &[(&str, usize, bool)] = &[
    ("text-embedding-3-small", 1536, true),
    ("text-embedding-3-large", 3072, true),
    ("text-embedding-ada-002", 1536, false),
];

/// Settings of an [`OpenAiEmbedder`]. `Debug` shows the key as `[redacted]`.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// API root including the version, e.g. `http://127.0.0.1:11434/v1`; `/embeddings` is appended.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<Secret>,
    /// The model name the provider knows.
    pub model: String,
    /// Requested vector size. Required for models not in the built-in table (their size is
    /// otherwise unknown); sent to the provider except for models that reject it.
    pub dimensions: Option<u32>,
    /// Limit on one HTTP exchange, connect to last byte.
    pub request_timeout: Duration,
    /// Most inputs in one request.
    pub max_batch: usize,
    /// Most estimated tokens in one request (one larger input still goes, alone).
    pub max_batch_tokens: u32,
    /// In-call retry budget for one batch, from its first failure.
    pub max_elapsed: Duration,
    /// First backoff delay; later ones grow ×2 with ±50 % jitter.
    pub initial_backoff: Duration,
    /// Largest backoff delay.
    pub max_backoff: Duration,
}

impl OpenAiConfig {
    /// Defaults: no key, 60 s request timeout, 64 inputs / 8 000 tokens a batch, a 60 s retry
    /// budget, backoff from 500 ms up to 10 s.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dimensions: None,
            request_timeout: Duration::from_secs(60),
            max_batch: 64,
            max_batch_tokens: 8000,
            max_elapsed: Duration::from_secs(60),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(10),
        }
    }
}

/// Embeds through an OpenAI-compatible `/embeddings` endpoint, under the shared [`Limiter`].
/// Clones share everything (one `Arc`), so handing one to each worker is cheap.
#[derive(Debug, Clone)]
pub struct OpenAiEmbedder {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: OpenAiConfig,
    endpoint: reqwest::Url,
    dims: usize,
    send_dimensions: bool,
    client: reqwest::Client,
    limiter: Arc<Limiter>,
}

#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    input: &'a [String],
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// Builds the provider. `limiter` is the process's one limiter: pass the same `Arc` to every
    /// embedder built in this process.
    pub fn new(config: OpenAiConfig, limiter: Arc<Limiter>) -> Result<Self, EmbedError> {
        let config_error = |message: String| EmbedError::Config { message };
        let base = config.base_url.trim_end_matches('/');
        let endpoint = reqwest::Url::parse(&format!("{base}/embeddings"))
            .map_err(|e| config_error(format!("base URL {:?}: {e}", config.base_url)))?;
        let known = KNOWN_MODELS.iter().find(|(name, ..)| *name == config.model);
        let dims = match (config.dimensions, known) {
            (Some(0), _) => return Err(config_error("dimensions must be positive".into())),
            (Some(d), _) => d as usize,
            (None, Some((_, d, _))) => *d,
            (None, None) => {
                return Err(config_error(format!(
                    "the vector size of model {:?} is unknown: set its dimensions",
                    config.model
                )));
            }
        };
        let send_dimensions =
            config.dimensions.is_some() && known.is_none_or(|(_, _, accepts)| *accepts);
        if config.max_batch == 0 || config.max_batch_tokens == 0 {
            return Err(config_error("batch limits must be positive".into()));
        }
        let client = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.request_timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| config_error(format!("HTTP client: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                endpoint,
                dims,
                send_dimensions,
                client,
                limiter,
            }),
        })
    }

    /// `openai:<model>:<dims>`.
    pub fn model_id(&self) -> String {
        self.inner.model_id()
    }

    /// The vector length every answer is checked against.
    pub fn dims(&self) -> usize {
        self.inner.dims
    }

    /// Most inputs per request.
    pub fn max_batch(&self) -> usize {
        self.inner.config.max_batch
    }

    /// The key of this provider's fleet rate budget: a hash of base URL, model and API key.
    pub fn budget_key(&self) -> String {
        let config = &self.inner.config;
        super::budget::budget_key(
            &config.base_url,
            &config.model,
            config.api_key.as_ref().map(Secret::expose),
        )
    }

    /// The shared limiter this provider waits on.
    pub fn limiter(&self) -> &Arc<Limiter> {
        &self.inner.limiter
    }

    /// Embeds `texts`, returning one vector per text in the same order.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.inner.embed(texts).await
    }
}

impl Inner {
    fn model_id(&self) -> String {
        format!("openai:{}:{}", self.config.model, self.dims)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for range in plan_batches(texts, self.config.max_batch, self.config.max_batch_tokens) {
            let batch = &texts[range];
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }

    /// One batch with in-call retries; see the module docs for the policy.
    async fn embed_batch(&self, batch: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let tokens = batch.iter().map(|t| estimate_tokens(t)).sum::<u32>();
        let mut backoff = ExponentialBackoffBuilder::new()
            .with_initial_interval(self.config.initial_backoff)
            .with_max_interval(self.config.max_backoff)
            .with_multiplier(2.0)
            .with_randomization_factor(0.5)
            .with_max_elapsed_time(None) // the budget is kept below, where retry-after counts too
            .build();
        let mut first_failure = None;
        loop {
            self.limiter.acquire(tokens).await;
            let error = match self.send(batch).await {
                Ok(vectors) => return Ok(vectors),
                Err(error) if error.is_permanent() => return Err(error),
                Err(error) => error,
            };
            if error.is_rate_limited() {
                // Every 429, also those waited out here: the caller only sees the last one.
                crate::metrics::global().provider_rate_limited(&self.model_id());
            }
            let failed_at = Instant::now();
            let started = *first_failure.get_or_insert(failed_at);
            let server_says = error.retry_after().unwrap_or_default();
            if error.is_rate_limited() && !server_says.is_zero() {
                self.limiter.pause_until(failed_at + server_says).await;
            }
            let computed = backoff.next_backoff().unwrap_or(self.config.max_backoff);
            let delay = computed.max(server_says);
            if failed_at.duration_since(started) + delay > self.config.max_elapsed {
                tracing::warn!(code = error.code(), %error, "embedding retry budget spent");
                return Err(error);
            }
            tracing::debug!(code = error.code(), %error, ?delay, "retrying embedding batch");
            tokio::time::sleep(delay).await;
        }
    }

    /// One HTTP exchange, classified.
    async fn send(&self, batch: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let secret = self.config.api_key.as_ref();
        let body = EmbeddingRequest {
            input: batch,
            model: &self.config.model,
            dimensions: self.config.dimensions.filter(|_| self.send_dimensions),
            encoding_format: "float",
        };
        let mut request = self.client.post(self.endpoint.clone()).json(&body);
        if let Some(key) = secret {
            // reqwest marks this header sensitive, so it is not printed by its Debug either.
            request = request.bearer_auth(key.expose());
        }
        let transport = |e: reqwest::Error| classify(Failure::Transport(&e)).redact(secret);
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.map_err(transport)?;
        if !status.is_success() {
            let body = String::from_utf8_lossy(&bytes);
            let failure = Failure::Status {
                status,
                headers: &headers,
                body: &body,
            };
            return Err(classify(failure).redact(secret));
        }
        check_response(&bytes, batch.len(), self.dims).map_err(|e| e.redact(secret))
    }
}

/// Splits `texts` into consecutive ranges of at most `max_batch` inputs and `max_tokens`
/// estimated tokens; an input that alone exceeds `max_tokens` gets a range of its own.
pub fn plan_batches(texts: &[String], max_batch: usize, max_tokens: u32) -> Vec<Range<usize>> {
    let mut batches = Vec::new();
    let mut start = 0;
    let mut tokens = 0u32;
    for (i, text) in texts.iter().enumerate() {
        let cost = estimate_tokens(text);
        let full = i - start >= max_batch.max(1) || tokens.saturating_add(cost) > max_tokens;
        if i > start && full {
            batches.push(start..i);
            start = i;
            tokens = 0;
        }
        tokens = tokens.saturating_add(cost);
    }
    if start < texts.len() {
        batches.push(start..texts.len());
    }
    batches
}

/// Parses a success body and checks it: one vector per input by `index`, `dims` values each,
/// all finite. Returns the vectors in input order.
fn check_response(body: &[u8], inputs: usize, dims: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    let response: EmbeddingResponse = serde_json::from_slice(body).map_err(|e| {
        EmbedError::permanent(format!("provider answer is not an embeddings list: {e}"))
    })?;
    if response.data.len() != inputs {
        return Err(EmbedError::permanent(format!(
            "provider returned {} embeddings for {inputs} inputs",
            response.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for item in response.data {
        let index = item.index;
        let slot = slots.get_mut(index).ok_or_else(|| {
            EmbedError::permanent(format!(
                "provider returned index {index} for {inputs} inputs"
            ))
        })?;
        if slot.is_some() {
            return Err(EmbedError::permanent(format!(
                "provider returned index {index} twice"
            )));
        }
        if item.embedding.len() != dims {
            return Err(EmbedError::permanent(format!(
                "embedding {index} has {} dimensions, expected {dims}",
                item.embedding.len()
            )));
        }
        if let Some(position) = item.embedding.iter().position(|v| !v.is_finite()) {
            return Err(EmbedError::permanent(format!(
                "embedding {index} has a non-finite value at position {position}"
            )));
        }
        *slot = Some(item.embedding);
    }
    // Count matched and no index repeated or out of range, so every slot is filled.
    Ok(slots.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn batches_are_bounded_by_count() {
        let input = texts(&["a", "b", "c", "d", "e"]);
        assert_eq!(plan_batches(&input, 2, 1000), vec![0..2, 2..4, 4..5]);
        assert_eq!(plan_batches(&[], 2, 1000), Vec::<Range<usize>>::new());
    }

    #[test]
    fn batches_are_bounded_by_tokens_and_oversized_inputs_go_alone() {
        let long = "x".repeat(400); // 100 estimated tokens
        let input = vec!["a".to_owned(), long.clone(), "b".to_owned(), "c".to_owned()];
        assert_eq!(plan_batches(&input, 10, 50), vec![0..1, 1..2, 2..4]);
        let two = vec![long.clone(), long];
        assert_eq!(plan_batches(&two, 10, 200), vec![0..2]);
    }

    #[test]
    fn answers_are_placed_by_index() {
        let body =
            br#"{"data":[{"index":1,"embedding":[0.0,1.0]},{"index":0,"embedding":[1.0,0.0]}]}"#;
        let vectors = check_response(body, 2, 2).expect("valid answer");
        assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    }

    #[test]
    fn duplicate_or_out_of_range_indexes_are_permanent_errors() {
        let twice = br#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[1.0]}]}"#;
        let error = check_response(twice, 2, 1).expect_err("duplicate index");
        assert!(error.is_permanent() && error.to_string().contains("index 0 twice"));
        let outside = br#"{"data":[{"index":5,"embedding":[1.0]}]}"#;
        let error = check_response(outside, 1, 1).expect_err("index out of range");
        assert!(error.to_string().contains("index 5"), "{error}");
    }

    #[test]
    fn unknown_model_without_dimensions_is_a_config_error() {
        let limiter = Arc::new(Limiter::unlimited());
        let config = OpenAiConfig::new("http://127.0.0.1:9/v1", "nomic-embed-text");
        let error = OpenAiEmbedder::new(config, limiter.clone()).expect_err("unknown size");
        assert_eq!(error.code(), "embedding_misconfigured");
        let known = OpenAiConfig::new("http://127.0.0.1:9/v1", "text-embedding-3-small");
        let embedder = OpenAiEmbedder::new(known, limiter).expect("known model");
        assert_eq!(embedder.model_id(), "openai:text-embedding-3-small:1536");
    }
}
