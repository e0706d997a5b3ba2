//! The encoder's linear layers in the precision it runs at: f32 (candle's gemm over the weights
//! as stored) or int8 (weights quantised once here, at load, per output channel; activations
//! quantised per row on each call; `docket_kernels::int8` does the products).
//!
//! Why a type of its own: the four products of a layer are the only place the precision
//! matters (attention, layer norms and GELU stay f32 in both), so the encoder calls
//! [`Linear::forward`] and never asks which it is. The precision changes the vectors, so it is
//! part of the model version ([`Precision::version_suffix`]): vectors of the two never mix.

use candle_core::{DType, Device, Storage, Tensor};
use docket_kernels::int8::{self, QuantizedMatrix, QuantizedRows};

/// The number format of the encoder's matrix products (`DOCKET_LOCAL_PRECISION`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Precision {
    /// 32-bit floats throughout: sentence-transformers' own vectors to float rounding.
    #[default]
    F32,
    /// 8-bit integer weights and activations in the linear layers (about 2× f32's tokens per
    /// second at batch 64 on two threads: BENCHMARKS.md; vectors within a cosine of 0.99 of
    /// f32's, passage@5 on the development set 0.025 below f32's, so not the default).
    Int8,
}

impl Precision {
    /// What the precision adds to the model version: nothing for f32 (the versions made before
    /// int8 existed keep their names), `-int8` for int8.
    pub fn version_suffix(self) -> &'static str {
        match self {
            Precision::F32 => "",
            Precision::Int8 => "-int8",
        }
    }
}

/// One linear layer's weights, without its bias (the fused kernels after it add that).
pub enum Linear {
    /// `[in, out]`, contiguous: the right-hand side of `x · Wᵀ` as gemm reads it fastest.
    F32(Tensor),
    Int8(QuantizedMatrix),
}

impl Linear {
    /// The layer of a checkpoint's `[out, in]` weight, in `precision`.
    pub fn new(weight: Tensor, precision: Precision) -> candle_core::Result<Self> {
        Ok(match precision {
            Precision::F32 => Linear::F32(weight.t()?.contiguous()?),
            Precision::Int8 => {
                let (out, k) = weight.dims2()?;
                let values = weight
                    .to_dtype(DType::F32)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                Linear::Int8(QuantizedMatrix::new(&values, out, k))
            }
        })
    }

    /// `x · Wᵀ` for `x` of `[tokens, in]`: `[tokens, out]`.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Linear::F32(rhs) => x.matmul(rhs),
            Linear::Int8(weights) => {
                let (tokens, k) = x.dims2()?;
                if k != weights.k {
                    candle_core::bail!("a product of width {k} against weights of {}", weights.k);
                }
                let x = x.contiguous()?;
                let (storage, layout) = x.storage_and_layout();
                let Storage::Cpu(cpu) = &*storage else {
                    candle_core::bail!("the encoder runs on the CPU only");
                };
                let values = cpu.as_slice::<f32>()?;
                let start = layout.start_offset();
                let rows = values
                    .get(start..start + tokens * k)
                    .ok_or_else(|| candle_core::Error::Msg("tensor out of its storage".into()))?;
                let y = int8::matmul(&QuantizedRows::new(rows, k), weights);
                Tensor::from_vec(y, (tokens, weights.out), &Device::Cpu)
            }
        }
    }
}
