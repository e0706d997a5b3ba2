//! The local embedder: a BERT- or XLM-RoBERTa-family sentence-embedding model (all-MiniLM-L6-v2,
//! multilingual-e5-small, or any such Hugging Face directory) run inside docket with candle, so
//! semantic search works with no API key and no network service.
//!
//! It reproduces what sentence-transformers computes for such a model: the model's prompt for
//! the text's [`Purpose`] put in front (`query: ` / `passage: ` for E5 models, nothing for
//! MiniLM; see [`settings`]), tokens from the model's own `tokenizer.json` (WordPiece or
//! SentencePiece Unigram), truncated at the model's max sequence length (256 for
//! all-MiniLM-L6-v2, from `sentence_bert_config.json`, *not* the 128 the shipped tokenizer file
//! asks for; 512 for multilingual-e5-small), the encoder, mean pooling, and L2 normalisation.
//!
//! Speed: the encoder ([`bert`]) packs the texts of a batch end to end, with no padding, so every
//! linear layer is one large matrix product over all their tokens; attention runs per text over
//! strided views, and the element-wise steps are fused, threaded, vectorised kernels
//! ([`docket_kernels`]). The linear layers run in f32 or, by choice, int8 ([`linear`]). Batches are cut into forward passes of at most
//! [`TOKENS_PER_PASS`] tokens, which bounds memory whatever the batch size. Inference is CPU-bound and blocking: it runs on
//! tokio's blocking pool, inside a dedicated rayon pool of a bounded number of threads, so the
//! HTTP server and the queue keep their cores.
//! gemm (candle's matmul) splits its work by `RAYON_NUM_THREADS` (else the core count) and,
//! like the kernels, picks AVX-512 code at run time where the CPU has it.
//!
//! **Two lanes.** Passages and queries each have their own pool and run one call at a time per
//! lane (a semaphore each). `docket serve` embeds a search's query with the same embedder its
//! in-process workers embed documents with, and a worker's call of 64 chunks runs for seconds:
//! with one lane, a search during ingestion waited for the batch in progress (BENCHMARKS.md,
//! "Search while documents are embedded"). A query is a few dozen tokens, so letting it share
//! the cores with a batch costs the batch little.
//!
//! Load failures (missing or malformed files) are [`EmbedError::Config`]; a failure during
//! inference is [`EmbedError::Permanent`], since the same input would fail again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::Device;
use tokenizers::{Tokenizer, TruncationParams};

use super::{EmbedError, Purpose};
use crate::chunk::TokenCounter;

mod bert;
mod linear;
mod settings;

use bert::{BertConfig, Encoder};
pub use linear::Precision;
pub use settings::Prompts;

/// Most tokens in one forward pass. Large enough that the products stay efficient, small
/// enough that the widest intermediate (`TOKENS_PER_PASS × intermediate size` floats: 12 MB
/// for multilingual-e5-small) stays a buffer an allocator keeps for reuse. At 16,000 tokens
/// every layer's buffers were fresh mappings the kernel faulted in page by page on each
/// product: half of an int8 product's time in isolation (`cargo run --release -p
/// docket-kernels --example int8-bench`, BENCHMARKS.md "Issue 24"). Which allocator keeps
/// them matters as much: see the crate root's `ALLOCATOR`.
pub const TOKENS_PER_PASS: usize = 2048;

/// Where the model is and how much CPU it may use.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// A Hugging Face model directory: `config.json`, `tokenizer.json`, `model.safetensors`
    /// (and optionally `sentence_bert_config.json` for the max sequence length).
    pub model_dir: PathBuf,
    /// Threads of the inference pool (at least 1).
    pub threads: usize,
    /// The number format of the linear layers (part of the model version).
    pub precision: Precision,
}

/// The in-process embedder. Cloning is cheap; clones share the model and the pool.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
    /// The model this one replaced as docket's default, when it is installed: loaded beside it
    /// so that the vectors it made stay searchable (and its sets can still be filled) while an
    /// upgraded installation moves to the new model. `None` for most processes.
    previous: Option<Arc<LocalEmbedder>>,
}

struct Inner {
    model: Encoder,
    /// The tokenizer with truncation at `max_tokens` and no padding: for embedding.
    tokenizer: Tokenizer,
    /// The same tokenizer without truncation: for counting whole chunks.
    counter: Tokenizer,
    /// The directory's name, standing for the model in `model_id`.
    name: String,
    /// What goes in front of queries and of passages.
    prompts: Prompts,
    dims: usize,
    /// Most tokens per text, special tokens included.
    max_tokens: usize,
    threads: usize,
    precision: Precision,
    /// Where passages are embedded.
    passages: Lane,
    /// Where queries are embedded, so a search never waits behind a document's batch.
    queries: Lane,
}

/// A pool of inference threads that runs one call at a time: two calls in one lane would only
/// fight over the same cores.
struct Lane {
    pool: rayon::ThreadPool,
    running: tokio::sync::Semaphore,
}

impl Lane {
    fn start(threads: usize, name: &'static str) -> Result<Self, rayon::ThreadPoolBuildError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("docket-{name}-{i}"))
            .build()?;
        Ok(Self {
            pool,
            running: tokio::sync::Semaphore::new(1),
        })
    }
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &self.inner.name)
            .field("dims", &self.inner.dims)
            .field("max_tokens", &self.inner.max_tokens)
            .field("threads", &self.inner.threads)
            .field("precision", &self.inner.precision)
            .field("prompts", &self.inner.prompts)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads the model in `config.model_dir` (reads about 90 MB for all-MiniLM-L6-v2, 470 MB
    /// for multilingual-e5-small, most of it its 250,037-row word table).
    pub fn load(config: &LocalConfig) -> Result<Self, EmbedError> {
        let dir = &config.model_dir;
        let bert: BertConfig = serde_json::from_slice(&read(dir, "config.json")?)
            .map_err(|err| config_error(dir, format!("config.json is not a BERT config: {err}")))?;
        bert.family().map_err(|err| config_error(dir, err))?;
        let max_tokens = settings::max_sequence_length(dir, &bert)?;
        let prompts = settings::prompts(dir)?;
        settings::check_pooling(dir)?;

        let mut counter = Tokenizer::from_bytes(read(dir, "tokenizer.json")?)
            .map_err(|err| config_error(dir, format!("tokenizer.json: {err}")))?;
        // The shipped file pads every input to a fixed width and may truncate shorter than the
        // model's sequence length; both are replaced here (the encoder packs texts unpadded).
        counter.with_padding(None);
        counter
            .with_truncation(None)
            .map_err(|err| config_error(dir, format!("tokenizer.json: {err}")))?;
        let mut tokenizer = counter.clone();
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|err| config_error(dir, format!("tokenizer.json: {err}")))?;

        let weights =
            candle_core::safetensors::load_buffer(&read(dir, "model.safetensors")?, &Device::Cpu)
                .map_err(|err| config_error(dir, format!("model.safetensors: {err}")))?;
        let model = Encoder::load(&weights, &bert, config.precision)
            .map_err(|err| config_error(dir, format!("loading the weights: {err}")))?;
        drop(weights);

        let threads = config.threads.max(1);
        let lane = |name| {
            Lane::start(threads, name)
                .map_err(|err| config_error(dir, format!("starting {threads} threads: {err}")))
        };
        let (passages, queries) = (lane("embed")?, lane("query")?);
        Ok(Self {
            previous: None,
            inner: Arc::new(Inner {
                model,
                tokenizer,
                counter,
                name: settings::directory_name(dir),
                prompts,
                dims: bert.hidden_size,
                max_tokens,
                threads,
                precision: config.precision,
                passages,
                queries,
            }),
        })
    }

    /// `local:<model>-<max tokens>[-prompts-<tag>][-int8]:<dims>`, e.g.
    /// `local:all-MiniLM-L6-v2-256:384` or `local:multilingual-e5-small-512-prompts-<tag>:384`:
    /// the max length, the prompts and the precision are part of the name because they change
    /// the vectors ([`Prompts::tag`] hashes both prompts; a model without prompts, in f32, keeps
    /// the name it always had).
    pub fn model_id(&self) -> String {
        let prompts = if self.inner.prompts.is_empty() {
            String::new()
        } else {
            format!("-prompts-{}", self.inner.prompts.tag())
        };
        format!(
            "local:{}-{}{prompts}{}:{}",
            self.inner.name,
            self.inner.max_tokens,
            self.inner.precision.version_suffix(),
            self.inner.dims
        )
    }

    /// This embedder with `previous` beside it (see [`LocalEmbedder::previous`]).
    pub fn with_previous(mut self, previous: LocalEmbedder) -> Self {
        self.previous = Some(Arc::new(previous));
        self
    }

    /// The model this one replaced as the default, if it was loaded beside it:
    /// [`crate::models::embedder_for`] hands it out for versions it made.
    pub fn previous(&self) -> Option<&LocalEmbedder> {
        self.previous.as_deref()
    }

    /// The prompts put in front of queries and passages (empty for most models).
    pub fn prompts(&self) -> &Prompts {
        &self.inner.prompts
    }

    /// Length of every vector.
    pub fn dims(&self) -> usize {
        self.inner.dims
    }

    /// Most tokens of one text that reach the model (special tokens included); the rest is cut.
    pub fn max_tokens(&self) -> usize {
        self.inner.max_tokens
    }

    /// Threads of the inference pool.
    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// The number format of the linear layers.
    pub fn precision(&self) -> Precision {
        self.inner.precision
    }

    /// A token counter that counts exactly as this model's tokenizer (without special tokens),
    /// for the chunker.
    pub fn token_counter(&self) -> LocalTokens {
        LocalTokens {
            inner: self.inner.clone(),
        }
    }

    /// Embeds `texts` as `purpose` on the blocking pool, one call at a time per process and
    /// purpose (see the module docs: a query never waits for passages).
    pub async fn embed(
        &self,
        texts: &[String],
        purpose: Purpose,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let _permit = self
            .inner
            .lane(purpose)
            .running
            .acquire()
            .await
            .map_err(|err| EmbedError::permanent(format!("local embedder closed: {err}")))?;
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts, purpose))
            .await
            .map_err(|err| EmbedError::permanent(format!("local embedder task failed: {err}")))?
    }

    /// Embeds `texts` as `purpose` on the calling thread (inside the purpose's inference pool);
    /// for benchmarks and callers that are already off the async runtime.
    pub fn embed_blocking(
        &self,
        texts: &[String],
        purpose: Purpose,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inner = &self.inner;
        inner
            .lane(purpose)
            .pool
            .install(|| inner.embed_packed(texts, purpose))
    }

    /// Whether a call embedding `purpose` texts is running now.
    pub fn busy(&self, purpose: Purpose) -> bool {
        self.inner.lane(purpose).running.available_permits() == 0
    }

    /// The token ids the model reads for `text` as `purpose`: prompt, special tokens and
    /// truncation included (for checking against a reference tokenizer).
    pub fn token_ids(&self, text: &str, purpose: Purpose) -> Result<Vec<u32>, EmbedError> {
        self.inner.encode(text, purpose)
    }
}

impl Inner {
    fn lane(&self, purpose: Purpose) -> &Lane {
        match purpose {
            Purpose::Query => &self.queries,
            Purpose::Passage => &self.passages,
        }
    }

    fn encode(&self, text: &str, purpose: Purpose) -> Result<Vec<u32>, EmbedError> {
        let prompt = self.prompts.for_purpose(purpose);
        let encoding = if prompt.is_empty() {
            self.tokenizer.encode_fast(text, true)
        } else {
            self.tokenizer.encode_fast(format!("{prompt}{text}"), true)
        }
        .map_err(|err| EmbedError::permanent(format!("tokenizing: {err}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    fn embed_packed(
        &self,
        texts: &[String],
        purpose: Purpose,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encoded = Vec::with_capacity(texts.len());
        for text in texts {
            encoded.push(self.encode(text, purpose)?);
        }
        let mut vectors = Vec::with_capacity(texts.len());
        for pass in passes(&encoded, TOKENS_PER_PASS) {
            let batch: Vec<&[u32]> = pass.iter().map(Vec::as_slice).collect();
            let pooled = self
                .model
                .embed_packed(&batch)
                .map_err(|err| EmbedError::permanent(format!("local model inference: {err}")))?;
            vectors.extend(pooled);
        }
        Ok(vectors)
    }
}

/// Consecutive runs of `texts` of at most `budget` tokens each (a longer text makes a run of
/// its own), in order.
fn passes(texts: &[Vec<u32>], budget: usize) -> impl Iterator<Item = &[Vec<u32>]> {
    let mut rest = texts;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut tokens = 0;
        let mut end = 0;
        while end < rest.len() && (end == 0 || tokens + rest[end].len() <= budget) {
            tokens += rest[end].len();
            end += 1;
        }
        let (pass, tail) = rest.split_at(end);
        rest = tail;
        Some(pass)
    })
}

/// Counts tokens with the local model's tokenizer, special tokens excluded, nothing truncated.
#[derive(Clone)]
pub struct LocalTokens {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalTokens")
            .field("model", &self.inner.name)
            .finish()
    }
}

impl TokenCounter for LocalTokens {
    fn count(&self, text: &str) -> usize {
        match self.inner.counter.encode_fast(text, false) {
            Ok(encoding) => encoding.get_ids().len(),
            // The tokenizer fails on no UTF-8 input we know of; the estimate keeps chunking going.
            Err(_) => crate::chunk::ApproxTokens.count(text),
        }
    }
}

fn read(dir: &Path, file: &str) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(dir.join(file)).map_err(|err| config_error(dir, format!("reading {file}: {err}")))
}

pub(super) fn config_error(dir: &Path, message: String) -> EmbedError {
    EmbedError::Config {
        message: format!(
            "local model in {}: {message} (scripts/get-model.sh installs the default model)",
            dir.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::passes;

    #[test]
    fn passes_keep_order_and_stay_within_the_budget_unless_one_text_is_longer() {
        let texts: Vec<Vec<u32>> = [3, 4, 2, 9, 1, 1].iter().map(|&n| vec![0; n]).collect();
        let lengths: Vec<Vec<usize>> = passes(&texts, 7)
            .map(|pass| pass.iter().map(Vec::len).collect())
            .collect();
        assert_eq!(lengths, vec![vec![3, 4], vec![2], vec![9], vec![1, 1]]);
        assert_eq!(passes(&[], 7).count(), 0);
    }
}
