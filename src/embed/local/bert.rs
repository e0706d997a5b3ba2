//! A BERT encoder for inference over packed sequences: the texts of a batch are laid end to end
//! as one `[tokens, hidden]` matrix, with no padding and no attention mask.
//!
//! Why not candle-transformers' `BertModel`: it pads every text to the longest of its batch, runs
//! each linear layer as one small product per text, computes Q, K and V in three products,
//! copies every head's queries and keys into new tensors, and runs each element-wise step as a
//! separate single-threaded pass. Here:
//! - every linear layer is one matrix product over all tokens of the batch (large products are
//!   what gemm is fast at), and Q, K, V are one fused product;
//! - attention is per text, through strided views of that product (no copies), with the
//!   texts of a batch spread over the pool's threads;
//! - biases, GELU, softmax, residual additions and layer norms run in place, fused, threaded
//!   and vectorised ([`docket_kernels`]).
//!
//! It computes exactly BERT's function (erf GELU, post-layer-norm residuals, absolute positions,
//! token type 0), checked against sentence-transformers' vectors by the reference test. The
//! XLM-RoBERTa family is the same function with one difference that matters here: its position
//! ids start after the padding index (`pad_token_id + 1`, so 2 for XLM-R), and its position table
//! has that many more rows. [`Family`] is read from `config.json`'s `model_type`. (Note that
//! multilingual-e5-small itself is a BERT model with an XLM-R tokenizer: `model_type` "bert",
//! positions from 0; its larger siblings are XLM-RoBERTa models.) Both families embed single
//! texts, so only token type 0 is ever used.

use std::collections::HashMap;

use candle_core::{CpuStorage, DType, Device, IndexOp, Layout, Storage, Tensor};
use rayon::prelude::*;

use docket_kernels::{self as kernels, EmbeddingTables, Span};

use super::linear::{Linear, Precision};

/// The fields of a Hugging Face BERT or XLM-RoBERTa `config.json` the encoder reads.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct BertConfig {
    /// `bert`, `xlm-roberta`, `roberta`, …: see [`Family`].
    #[serde(default = "default_model_type")]
    pub model_type: String,
    /// The padding token, whose index XLM-R positions start after.
    #[serde(default)]
    pub pad_token_id: Option<u32>,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_attention_heads: usize,
    pub num_hidden_layers: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_activation")]
    pub hidden_act: String,
    #[serde(default = "default_positions")]
    pub position_embedding_type: String,
}

fn default_model_type() -> String {
    "bert".to_owned()
}

/// How a model family numbers positions: the only way the two families' encoders differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// BERT: positions 0, 1, 2, …
    Bert,
    /// RoBERTa and XLM-RoBERTa: positions `pad + 1`, `pad + 2`, … (fairseq's numbering, which
    /// keeps row `pad` for padding tokens).
    Roberta { pad: u32 },
}

impl BertConfig {
    /// The family `model_type` names; an unknown type is refused rather than guessed.
    pub fn family(&self) -> Result<Family, String> {
        match self.model_type.as_str() {
            "bert" => Ok(Family::Bert),
            "roberta" | "xlm-roberta" | "camembert" => Ok(Family::Roberta {
                pad: self.pad_token_id.unwrap_or(1),
            }),
            other => Err(format!(
                "model_type {other:?} is not supported (bert, roberta, xlm-roberta, camembert)"
            )),
        }
    }

    /// The first position id of a text.
    pub fn first_position(&self) -> Result<usize, String> {
        Ok(match self.family()? {
            Family::Bert => 0,
            Family::Roberta { pad } => pad as usize + 1,
        })
    }

    /// Most tokens of one text (special tokens included) that have a position.
    pub fn max_tokens(&self) -> Result<usize, String> {
        Ok(self
            .max_position_embeddings
            .saturating_sub(self.first_position()?))
    }
}

fn default_eps() -> f64 {
    1e-12
}

fn default_activation() -> String {
    "gelu".to_owned()
}

fn default_positions() -> String {
    "absolute".to_owned()
}

/// A layer norm's parameters.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// One transformer layer; its linear weights in the encoder's precision ([`Linear`]).
struct Layer {
    /// `hidden → 3 × hidden`: queries, keys and values in one product.
    qkv: Linear,
    qkv_bias: Vec<f32>,
    attention_out: Linear,
    attention_out_bias: Vec<f32>,
    attention_norm: Norm,
    up: Linear,
    up_bias: Vec<f32>,
    down: Linear,
    down_bias: Vec<f32>,
    output_norm: Norm,
}

/// The loaded encoder.
pub struct Encoder {
    words: Vec<f32>,
    positions: Vec<f32>,
    /// Token type 0's row: docket embeds single texts, never sentence pairs.
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    head_dim: usize,
    hidden: usize,
    eps: f32,
    vocab: usize,
    /// The position id of a text's first token (0 for BERT, `pad + 1` for XLM-R).
    first_position: usize,
    /// Most tokens per text: the positions after `first_position`.
    max_tokens: usize,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("layers", &self.layers.len())
            .field("hidden", &self.hidden)
            .field("heads", &self.heads)
            .finish()
    }
}

/// Finds `name` with or without the `bert.` / `roberta.` prefix some checkpoints use.
fn weight(weights: &HashMap<String, Tensor>, name: &str) -> candle_core::Result<Tensor> {
    weights
        .get(name)
        .or_else(|| weights.get(&format!("bert.{name}")))
        .or_else(|| weights.get(&format!("roberta.{name}")))
        .ok_or_else(|| candle_core::Error::Msg(format!("the weight {name} is missing")))?
        .to_dtype(DType::F32)
}

fn vector(weights: &HashMap<String, Tensor>, name: &str) -> candle_core::Result<Vec<f32>> {
    weight(weights, name)?.flatten_all()?.to_vec1()
}

fn norm(weights: &HashMap<String, Tensor>, prefix: &str) -> candle_core::Result<Norm> {
    // Old checkpoints name layer-norm parameters gamma and beta.
    let either = |new: &str, old: &str| {
        vector(weights, &format!("{prefix}.{new}"))
            .or_else(|_| vector(weights, &format!("{prefix}.{old}")))
    };
    Ok(Norm {
        gamma: either("weight", "gamma")?,
        beta: either("bias", "beta")?,
    })
}

impl Encoder {
    /// Builds the encoder from safetensors weights, its linear layers in `precision` (int8
    /// quantises them here, once); refuses configurations it does not compute.
    pub fn load(
        weights: &HashMap<String, Tensor>,
        config: &BertConfig,
        precision: Precision,
    ) -> candle_core::Result<Self> {
        if config.hidden_act != "gelu" {
            candle_core::bail!(
                "hidden_act {:?} is not supported (only BERT's erf \"gelu\")",
                config.hidden_act
            );
        }
        if config.position_embedding_type != "absolute" {
            candle_core::bail!(
                "position_embedding_type {:?} is not supported (only \"absolute\")",
                config.position_embedding_type
            );
        }
        let first_position = config.first_position().map_err(candle_core::Error::Msg)?;
        let max_tokens = config.max_tokens().map_err(candle_core::Error::Msg)?;
        if max_tokens < 2 {
            candle_core::bail!(
                "max_position_embeddings {} leaves no positions after {first_position}",
                config.max_position_embeddings
            );
        }
        let heads = config.num_attention_heads;
        if heads == 0 || !config.hidden_size.is_multiple_of(heads) {
            candle_core::bail!(
                "hidden_size {} is not a multiple of num_attention_heads {heads}",
                config.hidden_size
            );
        }
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for l in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{l}");
            let part = |name: &str| weight(weights, &format!("{p}.attention.self.{name}.weight"));
            let qkv = Tensor::cat(&[part("query")?, part("key")?, part("value")?], 0)?;
            let mut qkv_bias = Vec::with_capacity(3 * config.hidden_size);
            for name in ["query", "key", "value"] {
                qkv_bias.extend(vector(weights, &format!("{p}.attention.self.{name}.bias"))?);
            }
            let linear = |name: &str| Linear::new(weight(weights, name)?, precision);
            layers.push(Layer {
                qkv: Linear::new(qkv, precision)?,
                qkv_bias,
                attention_out: linear(&format!("{p}.attention.output.dense.weight"))?,
                attention_out_bias: vector(weights, &format!("{p}.attention.output.dense.bias"))?,
                attention_norm: norm(weights, &format!("{p}.attention.output.LayerNorm"))?,
                up: linear(&format!("{p}.intermediate.dense.weight"))?,
                up_bias: vector(weights, &format!("{p}.intermediate.dense.bias"))?,
                down: linear(&format!("{p}.output.dense.weight"))?,
                down_bias: vector(weights, &format!("{p}.output.dense.bias"))?,
                output_norm: norm(weights, &format!("{p}.output.LayerNorm"))?,
            });
        }
        let hidden = config.hidden_size;
        let words = vector(weights, "embeddings.word_embeddings.weight")?;
        let positions = vector(weights, "embeddings.position_embeddings.weight")?;
        if words.len() != config.vocab_size * hidden
            || positions.len() != config.max_position_embeddings * hidden
        {
            candle_core::bail!("the embedding tables do not match config.json's sizes");
        }
        Ok(Self {
            words,
            positions,
            token_type: weight(weights, "embeddings.token_type_embeddings.weight")?
                .get(0)?
                .to_vec1()?,
            embedding_norm: norm(weights, "embeddings.LayerNorm")?,
            layers,
            heads,
            head_dim: hidden / heads,
            hidden,
            eps: config.layer_norm_eps as f32,
            vocab: config.vocab_size,
            first_position,
            max_tokens,
        })
    }

    /// The pooled, normalised vector of each text of `batch` (token ids, special tokens
    /// included), in order, from one forward pass over all of them packed together.
    pub fn embed_packed(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let mut spans = Vec::with_capacity(batch.len());
        let mut ids = Vec::new();
        let mut positions = Vec::new();
        for text in batch {
            if text.len() > self.max_tokens {
                candle_core::bail!(
                    "a text of {} tokens is longer than the model's {} positions",
                    text.len(),
                    self.max_tokens
                );
            }
            if let Some(id) = text.iter().find(|&&id| id as usize >= self.vocab) {
                candle_core::bail!("token id {id} is outside the vocabulary");
            }
            spans.push(Span {
                start: ids.len(),
                len: text.len(),
            });
            ids.extend_from_slice(text);
            let first = self.first_position as u32;
            positions.extend(first..first + text.len() as u32);
        }
        let tokens = ids.len();
        if tokens == 0 {
            return Ok(vec![vec![0.0; self.hidden]; batch.len()]);
        }
        let tables = EmbeddingTables {
            words: &self.words,
            positions: &self.positions,
            token_type: &self.token_type,
            norm: kernels::Norm {
                gamma: &self.embedding_norm.gamma,
                beta: &self.embedding_norm.beta,
                eps: self.eps,
            },
        };
        let x = Tensor::from_vec(
            kernels::embed(tables, &ids, &positions),
            (tokens, self.hidden),
            &Device::Cpu,
        )?;
        let scale = 1.0 / (self.head_dim as f32).sqrt();
        for layer in &self.layers {
            let qkv = layer.qkv.forward(&x)?;
            qkv.inplace_op1(&QkvBias {
                bias: &layer.qkv_bias,
                scale,
            })?;
            let context = self.attention(&qkv, &spans)?;
            let projected = layer.attention_out.forward(&context)?;
            x.inplace_op2(
                &projected,
                &AddNorm {
                    bias: &layer.attention_out_bias,
                    norm: &layer.attention_norm,
                    eps: self.eps,
                },
            )?;
            let inner = layer.up.forward(&x)?;
            inner.inplace_op1(&BiasGelu {
                bias: &layer.up_bias,
            })?;
            let out = layer.down.forward(&inner)?;
            x.inplace_op2(
                &out,
                &AddNorm {
                    bias: &layer.down_bias,
                    norm: &layer.output_norm,
                    eps: self.eps,
                },
            )?;
        }
        let (storage, layout) = x.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            candle_core::bail!("the encoder runs on the CPU only");
        };
        let hidden_states = contiguous_f32(cpu, layout)?;
        Ok(kernels::mean_pool_normalized(
            hidden_states,
            &spans,
            self.hidden,
        ))
    }

    /// Multi-head self-attention of each text with itself, over strided views of the fused
    /// projection `qkv` (`[tokens, 3 × hidden]`, biased, queries scaled). Texts run in
    /// parallel; each is two batched products over its heads and a softmax in between.
    fn attention(&self, qkv: &Tensor, spans: &[Span]) -> candle_core::Result<Tensor> {
        let tokens = qkv.dim(0)?;
        let (heads, dim) = (self.heads, self.head_dim);
        let by_part = qkv.reshape((tokens, 3, heads, dim))?;
        let contexts = spans
            .par_iter()
            .map(|span| {
                let text = by_part.narrow(0, span.start, span.len)?;
                // [heads, len, dim] views; keys as [heads, dim, len]. gemm reads the strides.
                let queries = text.i((.., 0))?.transpose(0, 1)?;
                let keys = text.i((.., 1))?.permute((1, 2, 0))?;
                let values = text.i((.., 2))?.transpose(0, 1)?;
                let weights = queries.matmul(&keys)?;
                weights.inplace_op1(&Softmax)?;
                weights.matmul(&values)?.transpose(0, 1)
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        Tensor::cat(&contexts, 0)?.reshape((tokens, heads * dim))
    }
}

/// The values of a contiguous f32 tensor.
fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> candle_core::Result<&'a [f32]> {
    if !layout.is_contiguous() {
        candle_core::bail!("expected a contiguous tensor");
    }
    let values = storage.as_slice::<f32>()?;
    let start = layout.start_offset();
    values
        .get(start..start + layout.shape().elem_count())
        .ok_or_else(|| candle_core::Error::Msg("tensor layout out of its storage".into()))
}

/// The values of a contiguous f32 tensor, to change in place.
fn contiguous_f32_mut<'a>(
    storage: &'a mut CpuStorage,
    layout: &Layout,
) -> candle_core::Result<&'a mut [f32]> {
    if !layout.is_contiguous() {
        candle_core::bail!("expected a contiguous tensor");
    }
    let CpuStorage::F32(values) = storage else {
        candle_core::bail!("expected an f32 tensor");
    };
    let start = layout.start_offset();
    values
        .get_mut(start..start + layout.shape().elem_count())
        .ok_or_else(|| candle_core::Error::Msg("tensor layout out of its storage".into()))
}

/// candle's hook for [`kernels::qkv_bias`].
struct QkvBias<'a> {
    bias: &'a [f32],
    scale: f32,
}

impl candle_core::InplaceOp1 for QkvBias<'_> {
    fn name(&self) -> &'static str {
        "qkv-bias"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        kernels::qkv_bias(contiguous_f32_mut(storage, layout)?, self.bias, self.scale);
        Ok(())
    }
}

/// candle's hook for [`kernels::softmax_rows`] over the last dimension.
struct Softmax;

impl candle_core::InplaceOp1 for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let width = layout.dims().last().copied().unwrap_or(1).max(1);
        kernels::softmax_rows(contiguous_f32_mut(storage, layout)?, width);
        Ok(())
    }
}

/// candle's hook for [`kernels::bias_gelu`].
struct BiasGelu<'a> {
    bias: &'a [f32],
}

impl candle_core::InplaceOp1 for BiasGelu<'_> {
    fn name(&self) -> &'static str {
        "bias-gelu"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        kernels::bias_gelu(contiguous_f32_mut(storage, layout)?, self.bias);
        Ok(())
    }
}

/// candle's hook for [`kernels::add_layer_norm`]: `x = norm(x + y + bias)`.
struct AddNorm<'a> {
    bias: &'a [f32],
    norm: &'a Norm,
    eps: f32,
}

impl candle_core::InplaceOp2 for AddNorm<'_> {
    fn name(&self) -> &'static str {
        "add-layer-norm"
    }

    fn cpu_fwd(
        &self,
        x: &mut CpuStorage,
        x_layout: &Layout,
        y: &CpuStorage,
        y_layout: &Layout,
    ) -> candle_core::Result<()> {
        let y = contiguous_f32(y, y_layout)?;
        let x = contiguous_f32_mut(x, x_layout)?;
        if x.len() != y.len() {
            candle_core::bail!("add-layer-norm: {} values against {}", x.len(), y.len());
        }
        let norm = kernels::Norm {
            gamma: &self.norm.gamma,
            beta: &self.norm.beta,
            eps: self.eps,
        };
        kernels::add_layer_norm(x, y, self.bias, norm);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HIDDEN: usize = 8;
    const VOCAB: usize = 10;
    const POSITIONS: usize = 6;

    /// Deterministic values in [-0.5, 0.5): a tiny model needs no realism, only fixed weights.
    fn values(seed: u64, n: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    fn tensor(seed: u64, shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_vec(values(seed, n), shape, &Device::Cpu).expect("tensor")
    }

    /// A one-layer BERT-shaped model whose position table has `extra` rows in front.
    fn weights(extra: usize) -> HashMap<String, Tensor> {
        let mut w = HashMap::new();
        let mut put = |name: &str, seed: u64, shape: &[usize]| {
            w.insert(name.to_owned(), tensor(seed, shape));
        };
        put("embeddings.word_embeddings.weight", 1, &[VOCAB, HIDDEN]);
        put("embeddings.token_type_embeddings.weight", 3, &[1, HIDDEN]);
        put("embeddings.LayerNorm.weight", 4, &[HIDDEN]);
        put("embeddings.LayerNorm.bias", 5, &[HIDDEN]);
        let p = "encoder.layer.0";
        for (i, name) in ["query", "key", "value"].iter().enumerate() {
            put(
                &format!("{p}.attention.self.{name}.weight"),
                10 + i as u64,
                &[HIDDEN, HIDDEN],
            );
            put(
                &format!("{p}.attention.self.{name}.bias"),
                20 + i as u64,
                &[HIDDEN],
            );
        }
        put(
            &format!("{p}.attention.output.dense.weight"),
            30,
            &[HIDDEN, HIDDEN],
        );
        put(&format!("{p}.attention.output.dense.bias"), 31, &[HIDDEN]);
        put(
            &format!("{p}.attention.output.LayerNorm.weight"),
            32,
            &[HIDDEN],
        );
        put(
            &format!("{p}.attention.output.LayerNorm.bias"),
            33,
            &[HIDDEN],
        );
        put(
            &format!("{p}.intermediate.dense.weight"),
            40,
            &[2 * HIDDEN, HIDDEN],
        );
        put(&format!("{p}.intermediate.dense.bias"), 41, &[2 * HIDDEN]);
        put(
            &format!("{p}.output.dense.weight"),
            42,
            &[HIDDEN, 2 * HIDDEN],
        );
        put(&format!("{p}.output.dense.bias"), 43, &[HIDDEN]);
        put(&format!("{p}.output.LayerNorm.weight"), 44, &[HIDDEN]);
        put(&format!("{p}.output.LayerNorm.bias"), 45, &[HIDDEN]);
        // The rows BERT reads for positions 0.. are the same in both shapes; XLM-R's leading
        // rows (padding's and one unused) hold other values, as in real checkpoints.
        let front = values(99, extra * HIDDEN);
        let rows = values(2, POSITIONS * HIDDEN);
        let table = [front, rows].concat();
        w.insert(
            "embeddings.position_embeddings.weight".to_owned(),
            Tensor::from_vec(table, (extra + POSITIONS, HIDDEN), &Device::Cpu).expect("table"),
        );
        w
    }

    fn config(model_type: &str, positions: usize) -> BertConfig {
        serde_json::from_value(serde_json::json!({
            "model_type": model_type,
            "pad_token_id": 1,
            "vocab_size": VOCAB,
            "hidden_size": HIDDEN,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "max_position_embeddings": positions,
        }))
        .expect("config")
    }

    #[test]
    fn xlm_roberta_positions_start_after_the_padding_index() {
        let bert =
            Encoder::load(&weights(0), &config("bert", POSITIONS), Precision::F32).expect("bert");
        let xlmr = Encoder::load(
            &weights(2),
            &config("xlm-roberta", POSITIONS + 2),
            Precision::F32,
        )
        .expect("xlm-r");
        let texts: [&[u32]; 2] = [&[0, 5, 7, 2], &[0, 4, 4, 9, 3, 2]];
        let a = bert.embed_packed(&texts).expect("bert embeds");
        let b = xlmr.embed_packed(&texts).expect("xlm-r embeds");
        for (x, y) in a.iter().zip(&b) {
            for (u, v) in x.iter().zip(y) {
                assert!((u - v).abs() < 1e-5, "{x:?} against {y:?}");
            }
        }
        // Both read six positions; a seventh token has none.
        assert_eq!(
            config("xlm-roberta", POSITIONS + 2).max_tokens(),
            Ok(POSITIONS)
        );
        assert!(xlmr.embed_packed(&[&[0, 1, 2, 3, 4, 5, 6]]).is_err());
        assert!(config("gpt2", 8).family().is_err());
    }

    #[test]
    fn the_int8_encoder_computes_the_f32_function_to_8_bit_rounding() {
        let config = config("bert", POSITIONS);
        let f32 = Encoder::load(&weights(0), &config, Precision::F32).expect("f32");
        let int8 = Encoder::load(&weights(0), &config, Precision::Int8).expect("int8");
        let texts: [&[u32]; 3] = [&[0, 5, 7, 2], &[0, 4, 4, 9, 3, 2], &[1]];
        let a = f32.embed_packed(&texts).expect("f32 embeds");
        let b = int8.embed_packed(&texts).expect("int8 embeds");
        for (x, y) in a.iter().zip(&b) {
            let cosine: f32 = x.iter().zip(y).map(|(u, v)| u * v).sum();
            // Both are unit vectors; rows of eight values round coarsely, hence the margin.
            assert!(cosine > 0.98, "cosine {cosine}: {x:?} against {y:?}");
            assert_ne!(x, y, "int8 changed nothing: the f32 path ran");
        }
    }
}
