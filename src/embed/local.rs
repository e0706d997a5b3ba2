//! The local embedder: a BERT-family sentence-embedding model (all-MiniLM-L6-v2 by default) run
//! inside docket with candle, so semantic search works with no API key and no network service.
//!
//! It reproduces what sentence-transformers computes for such a model: WordPiece tokens from the
//! model's own `tokenizer.json`, truncated at the model's max sequence length (256 for
//! all-MiniLM-L6-v2, from `sentence_bert_config.json`, *not* the 128 the shipped tokenizer file
//! asks for), the BERT encoder, mean pooling over the attention mask, and L2 normalisation.
//!
//! Speed: texts are tokenized first and sorted by length, so each forward pass pads only to the
//! longest text of its own micro-batch instead of a fixed width; micro-batches run in parallel,
//! one per thread. Inference is CPU-bound and
//! blocking: it runs on tokio's blocking pool, one call at a time per process (a semaphore),
//! inside a dedicated rayon pool of a bounded number of threads, so the HTTP server and the queue
//! keep their cores. gemm (candle's matmul) splits work by `RAYON_NUM_THREADS` (else the physical
//! core count) and picks its AVX-512 kernels at run time where the CPU has them.
//!
//! Load failures (missing or malformed files) are [`EmbedError::Config`]; a failure during
//! inference is [`EmbedError::Permanent`], since the same input would fail again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use rayon::prelude::*;
use tokenizers::{Tokenizer, TruncationParams};

use super::EmbedError;
use crate::pipeline::chunk::TokenCounter;

/// Texts per forward pass: large enough to keep the matmuls efficient, small enough that
/// length-sorted micro-batches stay homogeneous and memory stays modest.
const MICRO_BATCH: usize = 32;

/// Where the model is and how much CPU it may use.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// A Hugging Face model directory: `config.json`, `tokenizer.json`, `model.safetensors`
    /// (and optionally `sentence_bert_config.json` for the max sequence length).
    pub model_dir: PathBuf,
    /// Threads of the inference pool (at least 1).
    pub threads: usize,
}

/// The in-process BERT embedder. Cloning is cheap; clones share the model and the pool.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
}

struct Inner {
    model: BertModel,
    /// The tokenizer with truncation at `max_tokens` and no padding: for embedding.
    tokenizer: Tokenizer,
    /// The same tokenizer without truncation: for counting whole chunks.
    counter: Tokenizer,
    /// The directory's name, standing for the model in `model_id`.
    name: String,
    dims: usize,
    /// Most tokens per text, special tokens included.
    max_tokens: usize,
    pad_id: u32,
    threads: usize,
    pool: rayon::ThreadPool,
    /// One inference at a time: two would only fight over the same cores.
    running: tokio::sync::Semaphore,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model", &self.inner.name)
            .field("dims", &self.inner.dims)
            .field("max_tokens", &self.inner.max_tokens)
            .field("threads", &self.inner.threads)
            .finish()
    }
}

/// The part of `sentence_bert_config.json` that matters here.
#[derive(serde::Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
}

impl LocalEmbedder {
    /// Loads the model in `config.model_dir` (reads about 90 MB for all-MiniLM-L6-v2).
    pub fn load(config: &LocalConfig) -> Result<Self, EmbedError> {
        let dir = &config.model_dir;
        let bert: BertConfig = serde_json::from_slice(&read(dir, "config.json")?)
            .map_err(|err| config_error(dir, format!("config.json is not a BERT config: {err}")))?;
        let max_tokens = max_sequence_length(dir, &bert)?;

        let mut counter = Tokenizer::from_bytes(read(dir, "tokenizer.json")?)
            .map_err(|err| config_error(dir, format!("tokenizer.json: {err}")))?;
        // The shipped file pads every input to a fixed width and may truncate shorter than the
        // model's sequence length; both are replaced here (padding is done per micro-batch).
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
        let pad_id = u32::try_from(bert.pad_token_id).unwrap_or(0);

        let device = Device::Cpu;
        let weights = read(dir, "model.safetensors")?;
        let vars = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|err| config_error(dir, format!("model.safetensors: {err}")))?;
        let model = BertModel::load(vars, &bert)
            .map_err(|err| config_error(dir, format!("loading the BERT weights: {err}")))?;

        let threads = config.threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("docket-embed-{i}"))
            .build()
            .map_err(|err| config_error(dir, format!("starting {threads} threads: {err}")))?;
        let name = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.clone())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_owned());
        Ok(Self {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                counter,
                name,
                dims: bert.hidden_size,
                max_tokens,
                pad_id,
                threads,
                pool,
                running: tokio::sync::Semaphore::new(1),
            }),
        })
    }

    /// `local:<model>-<max tokens>:<dims>`, e.g. `local:all-MiniLM-L6-v2-256:384`: the max
    /// length is part of the name because it changes the vectors of long texts.
    pub fn model_id(&self) -> String {
        format!(
            "local:{}-{}:{}",
            self.inner.name, self.inner.max_tokens, self.inner.dims
        )
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

    /// A token counter that counts exactly as this model's tokenizer (without special tokens),
    /// for the chunker.
    pub fn token_counter(&self) -> LocalTokens {
        LocalTokens {
            inner: self.inner.clone(),
        }
    }

    /// Embeds `texts` on the blocking pool, one call at a time per process.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let _permit = self
            .inner
            .running
            .acquire()
            .await
            .map_err(|err| EmbedError::permanent(format!("local embedder closed: {err}")))?;
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|err| EmbedError::permanent(format!("local embedder task failed: {err}")))?
    }

    /// Embeds `texts` on the calling thread (inside the inference pool); for benchmarks and
    /// callers that are already off the async runtime.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inner = &self.inner;
        inner.pool.install(|| inner.embed_sorted(texts))
    }
}

impl Inner {
    fn embed_sorted(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut encoded = Vec::with_capacity(texts.len());
        for text in texts {
            let encoding = self
                .tokenizer
                .encode_fast(text.as_str(), true)
                .map_err(|err| EmbedError::permanent(format!("tokenizing: {err}")))?;
            encoded.push(encoding.get_ids().to_vec());
        }
        // Longest first, so the first (slowest) pass shows any memory problem at once and each
        // micro-batch pads to a length close to all of its members'.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encoded[i].len()));

        // Micro-batches run side by side, one per thread: only candle's matrix products are
        // multi-threaded, its element-wise steps (GELU, layer norm, additions) are not, so
        // splitting the batch is what keeps every thread busy. Batches too small to split
        // still use every thread inside the matrix products.
        let size = texts.len().div_ceil(self.threads).clamp(1, MICRO_BATCH);
        let groups: Vec<&[usize]> = order.chunks(size).collect();
        let pooled: Vec<candle_core::Result<Vec<Vec<f32>>>> = groups
            .par_iter()
            .map(|group| {
                let batch: Vec<&[u32]> = group.iter().map(|&i| encoded[i].as_slice()).collect();
                self.forward(&batch)
            })
            .collect();
        let mut vectors = vec![Vec::new(); texts.len()];
        for (group, result) in groups.iter().zip(pooled) {
            let result = result
                .map_err(|err| EmbedError::permanent(format!("local model inference: {err}")))?;
            for (&i, vector) in group.iter().zip(result) {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    /// One forward pass over token ids padded to the longest of `batch`; returns the pooled,
    /// normalised vectors in `batch` order.
    fn forward(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let rows = batch.len();
        let width = batch.iter().map(|ids| ids.len()).max().unwrap_or(0).max(1);
        let mut ids = Vec::with_capacity(rows * width);
        let mut mask = Vec::with_capacity(rows * width);
        for row in batch {
            ids.extend_from_slice(row);
            ids.extend(std::iter::repeat_n(self.pad_id, width - row.len()));
            mask.extend(std::iter::repeat_n(1f32, row.len()));
            mask.extend(std::iter::repeat_n(0f32, width - row.len()));
        }
        let device = &self.model.device;
        let input_ids = Tensor::from_vec(ids, (rows, width), device)?;
        let type_ids = input_ids.zeros_like()?;
        let attention = Tensor::from_vec(mask.clone(), (rows, width), device)?;
        let hidden = self
            .model
            .forward(&input_ids, &type_ids, Some(&attention))?;
        let hidden = hidden.to_vec3::<f32>()?;

        let mut out = Vec::with_capacity(rows);
        for (r, tokens) in hidden.iter().enumerate() {
            let row_mask = &mask[r * width..(r + 1) * width];
            let mut sum = vec![0f32; self.dims];
            let mut count = 0f32;
            for (token, &m) in tokens.iter().zip(row_mask) {
                if m > 0.0 {
                    count += 1.0;
                    for (s, v) in sum.iter_mut().zip(token) {
                        *s += v;
                    }
                }
            }
            let count = count.max(1e-9);
            sum.iter_mut().for_each(|s| *s /= count);
            // sentence-transformers' Normalize: x / max(‖x‖, 1e-12).
            let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            sum.iter_mut().for_each(|s| *s /= norm);
            out.push(sum);
        }
        Ok(out)
    }
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
            Err(_) => crate::pipeline::chunk::ApproxTokens.count(text),
        }
    }
}

/// The model's max sequence length: sentence-transformers' `max_seq_length` when the directory
/// has one, else the position-embedding count; never more than the latter.
fn max_sequence_length(dir: &Path, bert: &BertConfig) -> Result<usize, EmbedError> {
    let path = dir.join("sentence_bert_config.json");
    let configured = match std::fs::read(&path) {
        Ok(bytes) => {
            serde_json::from_slice::<SentenceBertConfig>(&bytes)
                .map_err(|err| config_error(dir, format!("sentence_bert_config.json: {err}")))?
                .max_seq_length
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => {
            return Err(config_error(
                dir,
                format!("sentence_bert_config.json: {err}"),
            ));
        }
    };
    let limit = bert.max_position_embeddings;
    Ok(configured.unwrap_or(limit).clamp(2, limit.max(2)))
}

fn read(dir: &Path, file: &str) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(dir.join(file)).map_err(|err| config_error(dir, format!("reading {file}: {err}")))
}

fn config_error(dir: &Path, message: String) -> EmbedError {
    EmbedError::Config {
        message: format!(
            "local model in {}: {message} (scripts/get-model.sh installs the default model)",
            dir.display()
        ),
    }
}
