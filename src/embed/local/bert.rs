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
//!   and vectorised ([`super::kernels`]).
//!
//! It computes exactly BERT's function (erf GELU, post-layer-norm residuals, absolute positions,
//! token type 0), checked against sentence-transformers' vectors by the reference test.

use std::collections::HashMap;

use candle_core::{CpuStorage, DType, Device, IndexOp, Layout, Storage, Tensor};
use rayon::prelude::*;

use super::kernels::{self, EmbeddingTables, Span};

/// The fields of a Hugging Face BERT `config.json` the encoder reads.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct BertConfig {
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

/// One transformer layer. Linear weights are stored as the right-hand side of `x · Wᵀ`
/// (`[in, out]`, contiguous), the layout gemm reads fastest.
struct Layer {
    /// `[hidden, 3 × hidden]`: queries, keys and values in one product.
    qkv: Tensor,
    qkv_bias: Vec<f32>,
    attention_out: Tensor,
    attention_out_bias: Vec<f32>,
    attention_norm: Norm,
    up: Tensor,
    up_bias: Vec<f32>,
    down: Tensor,
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
    max_positions: usize,
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

/// Finds `name` with or without the `bert.` prefix some checkpoints use.
fn weight(weights: &HashMap<String, Tensor>, name: &str) -> candle_core::Result<Tensor> {
    weights
        .get(name)
        .or_else(|| weights.get(&format!("bert.{name}")))
        .ok_or_else(|| candle_core::Error::Msg(format!("the weight {name} is missing")))?
        .to_dtype(DType::F32)
}

fn vector(weights: &HashMap<String, Tensor>, name: &str) -> candle_core::Result<Vec<f32>> {
    weight(weights, name)?.flatten_all()?.to_vec1()
}

/// A `[out, in]` weight as the contiguous `[in, out]` right-hand side of `x · Wᵀ`.
fn right_hand(weight: Tensor) -> candle_core::Result<Tensor> {
    weight.t()?.contiguous()
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
    /// Builds the encoder from safetensors weights; refuses configurations it does not compute.
    pub fn load(
        weights: &HashMap<String, Tensor>,
        config: &BertConfig,
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
        let heads = config.num_attention_heads;
        if heads == 0 || config.hidden_size % heads != 0 {
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
            layers.push(Layer {
                qkv: right_hand(qkv)?,
                qkv_bias,
                attention_out: right_hand(weight(
                    weights,
                    &format!("{p}.attention.output.dense.weight"),
                )?)?,
                attention_out_bias: vector(weights, &format!("{p}.attention.output.dense.bias"))?,
                attention_norm: norm(weights, &format!("{p}.attention.output.LayerNorm"))?,
                up: right_hand(weight(weights, &format!("{p}.intermediate.dense.weight"))?)?,
                up_bias: vector(weights, &format!("{p}.intermediate.dense.bias"))?,
                down: right_hand(weight(weights, &format!("{p}.output.dense.weight"))?)?,
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
            max_positions: config.max_position_embeddings,
        })
    }

    /// The pooled, normalised vector of each text of `batch` (token ids, special tokens
    /// included), in order, from one forward pass over all of them packed together.
    pub fn embed_packed(&self, batch: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let mut spans = Vec::with_capacity(batch.len());
        let mut ids = Vec::new();
        let mut positions = Vec::new();
        for text in batch {
            if text.len() > self.max_positions {
                candle_core::bail!(
                    "a text of {} tokens is longer than the model's {} positions",
                    text.len(),
                    self.max_positions
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
            positions.extend(0..text.len() as u32);
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
            let qkv = x.matmul(&layer.qkv)?;
            qkv.inplace_op1(&QkvBias {
                bias: &layer.qkv_bias,
                scale,
            })?;
            let context = self.attention(&qkv, &spans)?;
            let projected = context.matmul(&layer.attention_out)?;
            x.inplace_op2(
                &projected,
                &AddNorm {
                    bias: &layer.attention_out_bias,
                    norm: &layer.attention_norm,
                    eps: self.eps,
                },
            )?;
            let inner = x.matmul(&layer.up)?;
            inner.inplace_op1(&BiasGelu {
                bias: &layer.up_bias,
            })?;
            let out = inner.matmul(&layer.down)?;
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
