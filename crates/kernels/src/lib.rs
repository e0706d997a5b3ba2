//! The encoder's element-wise CPU kernels: embedding lookup, projection biases, softmax,
//! bias + GELU, bias + residual + layer norm, and mean pooling.
//!
//! Why they exist: candle runs each element-wise step as its own pass over a freshly allocated
//! tensor, on one thread, with scalar `erf` and `exp`. Here each step is one pass, in place over
//! memory that is already there, split across the inference pool's threads, in the CPU's widest
//! vectors: `pulp` picks AVX-512 or AVX2 at run time, so one binary runs everywhere and uses what
//! each CPU has, with no `unsafe` here. The loops use pulp's vector types explicitly: left to the
//! auto-vectoriser, `exp` and `erf` stayed scalar.
//!
//! The matrix products are candle's (gemm). Kernels never allocate but for their outputs.
//!
//! Why a crate of its own: debug builds (every `cargo test`) compile it optimised
//! (`[profile.dev.package.docket-kernels]`), so the local-model tests run at close to release
//! speed while the product crate keeps fast incremental builds. The callers are in
//! `docket::embed::local`.
//!
//! [`int8`] holds the 8-bit matrix products; it is the one module allowed `unsafe` (intrinsics
//! behind run-time CPU checks), and says so at its top.
#![deny(unsafe_code)]

pub mod int8;

use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;

/// Rows per parallel task in the row-wise kernels: large enough to amortise scheduling, small
/// enough to balance a few threads over a few hundred rows.
const ROWS_PER_TASK: usize = 16;

/// Makes `$kernel(simd, args)` runnable through [`vectorized`]: a `WithSimd` wrapper whose body
/// calls the kernel by name.
///
/// Why not a closure: only code inlined into pulp's `#[target_feature]` entry point is compiled
/// with those features. A closure (or a function passed as `FnOnce`) is called, not inlined, and
/// runs with the baseline instruction set: FMAs become library calls, nothing is vectorised
/// beyond SSE2. Each kernel is an `#[inline(always)]` function of the SIMD token and one
/// argument tuple.
macro_rules! simd_kernel {
    ($wrapper:ident, $kernel:expr, $args:ty, $out:ty) => {
        struct $wrapper<'a>($args);
        impl<'a> WithSimd for $wrapper<'a> {
            type Output = $out;
            #[inline(always)]
            fn with_simd<S: Simd>(self, simd: S) -> $out {
                ($kernel)(simd, self.0)
            }
        }
    };
}

/// Runs a kernel compiled for the best instruction set this CPU has.
#[inline(always)]
fn vectorized<Op: WithSimd>(op: Op) -> Op::Output {
    Arch::new().dispatch(op)
}

/// `e^x` lane by lane, within 2e-7 relative error for `x ∈ [-87, 88]` (clamped there):
/// Cody–Waite reduction to `r ∈ [-ln2/2, ln2/2]`, a degree-6 polynomial, and `2^n` put
/// together in the exponent bits. Rounding uses the 1.5·2²³ trick, so no float→int
/// conversion is needed.
#[inline(always)]
fn exp_f32s<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2^23
    let x = simd.min_f32s(
        simd.max_f32s(x, simd.splat_f32s(-87.0)),
        simd.splat_f32s(88.0),
    );
    let t = simd.mul_add_e_f32s(
        x,
        simd.splat_f32s(std::f32::consts::LOG2_E),
        simd.splat_f32s(ROUND),
    );
    let n = simd.sub_f32s(t, simd.splat_f32s(ROUND));
    let r = simd.mul_add_e_f32s(n, simd.splat_f32s(-0.693_359_4), x);
    let r = simd.mul_add_e_f32s(n, simd.splat_f32s(2.121_944_4e-4), r);
    let mut p = simd.splat_f32s(1.0 / 720.0);
    for c in [1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0] {
        p = simd.mul_add_e_f32s(p, r, simd.splat_f32s(c));
    }
    // The low bits of t hold n + ROUND's mantissa; n ∈ [-126, 127] after the clamp, so
    // (n + 127) << 23 is the bit pattern of 2^n, a normal number.
    let bias = ROUND.to_bits().wrapping_sub(127);
    let bits = simd.add_u32s(
        simd.transmute_u32s_f32s(t),
        simd.splat_u32s(bias.wrapping_neg()),
    );
    let scale = simd.wrapping_dyn_shl_u32s(bits, simd.splat_u32s(23));
    simd.mul_f32s(p, simd.transmute_f32s_u32s(scale))
}

/// The exact (erf) GELU lane by lane: `0.5·x·(1 + erf(x/√2))`, erf to 1.5e-7 absolute
/// (Abramowitz & Stegun 7.1.26).
#[inline(always)]
fn gelu_f32s<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    let z = simd.mul_f32s(x, simd.splat_f32s(std::f32::consts::FRAC_1_SQRT_2));
    let a = simd.abs_f32s(z);
    let one = simd.splat_f32s(1.0);
    let t = simd.div_f32s(
        one,
        simd.mul_add_e_f32s(a, simd.splat_f32s(0.327_591_1), one),
    );
    let mut p = simd.splat_f32s(1.061_405_4);
    for c in [-1.453_152_1, 1.421_413_8, -0.284_496_72, 0.254_829_6] {
        p = simd.mul_add_e_f32s(p, t, simd.splat_f32s(c));
    }
    let e = exp_f32s(simd, simd.neg_f32s(simd.mul_f32s(a, a)));
    // erf(|z|) = 1 - p·t·e; erf is odd, and x has z's sign, so 1 + erf(z) = 1 ± erf(|z|).
    let erf_abs = simd.sub_f32s(one, simd.mul_f32s(simd.mul_f32s(p, t), e));
    let negative = simd.less_than_f32s(x, simd.splat_f32s(0.0));
    let erf = simd.select_f32s(negative, simd.neg_f32s(erf_abs), erf_abs);
    simd.mul_f32s(
        simd.mul_f32s(simd.splat_f32s(0.5), x),
        simd.add_f32s(one, erf),
    )
}

/// Applies `f` to the values after the last whole vector (fewer than one vector) through one
/// vector on the stack: pulp's masked loads go through an assembly stub on AVX-512, far slower.
/// `f` is a closure and may not be inlined (see [`simd_kernel!`]); a tail is a few values per
/// row, so that costs nothing measurable, and the result is the same either way.
#[inline(always)]
fn map_tail<S: Simd>(tail: &mut [f32], f: impl Fn(S::f32s) -> S::f32s) {
    if tail.is_empty() {
        return;
    }
    let mut lanes = [0f32; 16];
    let lanes = &mut lanes[..S::F32_LANES];
    lanes[..tail.len()].copy_from_slice(tail);
    let (vectors, _) = S::as_mut_simd_f32s(lanes);
    for v in vectors.iter_mut() {
        *v = f(*v);
    }
    tail.copy_from_slice(&lanes[..tail.len()]);
}

/// `x += bias`, then the exact GELU, in place on rows of `bias.len()` values.
pub fn bias_gelu(x: &mut [f32], bias: &[f32]) {
    x.par_chunks_mut(bias.len() * ROWS_PER_TASK)
        .for_each(|rows| vectorized(BiasGelu((rows, bias))));
}

simd_kernel!(BiasGelu, bias_gelu_rows, (&'a mut [f32], &'a [f32]), ());

#[inline(always)]
fn bias_gelu_rows<S: Simd>(simd: S, (rows, bias): (&mut [f32], &[f32])) {
    let (bias_v, bias_tail) = S::as_simd_f32s(bias);
    for row in rows.chunks_exact_mut(bias.len()) {
        let (head, tail) = S::as_mut_simd_f32s(row);
        for (v, b) in head.iter_mut().zip(bias_v) {
            *v = gelu_f32s(simd, simd.add_f32s(*v, *b));
        }
        for (v, b) in tail.iter_mut().zip(bias_tail) {
            *v += b;
        }
        map_tail::<S>(tail, |v| gelu_f32s(simd, v));
    }
}

/// `x = layer_norm(x + y + bias) · gamma + beta`, row by row, in place on `x`.
pub fn add_layer_norm(x: &mut [f32], y: &[f32], bias: &[f32], norm: Norm<'_>) {
    let width = bias.len();
    x.par_chunks_mut(width * ROWS_PER_TASK)
        .zip(y.par_chunks(width * ROWS_PER_TASK))
        .for_each(|(xs, ys)| vectorized(AddNorm((xs, ys, bias, norm))));
}

/// A layer norm's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Norm<'a> {
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
    pub eps: f32,
}

simd_kernel!(
    AddNorm,
    add_norm_rows,
    (&'a mut [f32], &'a [f32], &'a [f32], Norm<'a>),
    ()
);

#[inline(always)]
fn add_norm_rows<S: Simd>(simd: S, (xs, ys, bias, norm): (&mut [f32], &[f32], &[f32], Norm<'_>)) {
    let width = bias.len();
    for (row, add) in xs.chunks_exact_mut(width).zip(ys.chunks_exact(width)) {
        for ((v, a), b) in row.iter_mut().zip(add).zip(bias) {
            *v += a + b;
        }
        normalize_row(simd, row, norm);
    }
}

/// Layer norm of one row, in place: mean, then variance around it (two passes, as torch does).
#[inline(always)]
fn normalize_row<S: Simd>(simd: S, row: &mut [f32], norm: Norm<'_>) {
    let n = row.len() as f32;
    let mean = sum(simd, row) / n;
    let (head, tail) = S::as_simd_f32s(row);
    let m = simd.splat_f32s(mean);
    let mut acc = simd.splat_f32s(0.0);
    for v in head {
        let d = simd.sub_f32s(*v, m);
        acc = simd.mul_add_e_f32s(d, d, acc);
    }
    let var = simd.reduce_sum_f32s(acc) + tail.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>();
    let inv = 1.0 / (var / n + norm.eps).sqrt();
    for ((v, g), b) in row.iter_mut().zip(norm.gamma).zip(norm.beta) {
        *v = ((*v - mean) * inv).mul_add(*g, *b);
    }
}

#[inline(always)]
fn sum<S: Simd>(simd: S, xs: &[f32]) -> f32 {
    let (head, tail) = S::as_simd_f32s(xs);
    let acc = head
        .iter()
        .fold(simd.splat_f32s(0.0), |acc, v| simd.add_f32s(acc, *v));
    simd.reduce_sum_f32s(acc) + tail.iter().sum::<f32>()
}

/// Where each sequence of a packed batch lies: rows `start .. start + len`.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub start: usize,
    pub len: usize,
}

/// The embedding tables and their layer norm.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddingTables<'a> {
    /// `[vocabulary, hidden]`.
    pub words: &'a [f32],
    /// `[max positions, hidden]`.
    pub positions: &'a [f32],
    /// The token-type-0 row (single-segment input).
    pub token_type: &'a [f32],
    pub norm: Norm<'a>,
}

/// The packed `[tokens, hidden]` input of the first layer. Ids and positions must be within
/// the tables (the caller checks them against the vocabulary and the max length).
pub fn embed(tables: EmbeddingTables<'_>, ids: &[u32], positions: &[u32]) -> Vec<f32> {
    let hidden = tables.token_type.len();
    let mut out = vec![0f32; ids.len() * hidden];
    out.par_chunks_mut(hidden * ROWS_PER_TASK)
        .zip(ids.par_chunks(ROWS_PER_TASK))
        .zip(positions.par_chunks(ROWS_PER_TASK))
        .for_each(|((rows, ids), positions)| vectorized(Embed((tables, rows, ids, positions))));
    out
}

simd_kernel!(
    Embed,
    embed_rows,
    (EmbeddingTables<'a>, &'a mut [f32], &'a [u32], &'a [u32]),
    ()
);

#[inline(always)]
fn embed_rows<S: Simd>(
    simd: S,
    (tables, rows, ids, positions): (EmbeddingTables<'_>, &mut [f32], &[u32], &[u32]),
) {
    let hidden = tables.token_type.len();
    for ((row, &id), &pos) in rows.chunks_exact_mut(hidden).zip(ids).zip(positions) {
        let word = &tables.words[id as usize * hidden..][..hidden];
        let position = &tables.positions[pos as usize * hidden..][..hidden];
        for (((v, w), p), t) in row
            .iter_mut()
            .zip(word)
            .zip(position)
            .zip(tables.token_type)
        {
            *v = w + p + t;
        }
        normalize_row(simd, row, tables.norm);
    }
}

/// The fused query/key/value projection's biases, in place on rows of `3 × hidden`: queries get
/// theirs and are scaled by `scale` (1/√head size, so the score product needs no pass of its
/// own), keys and values just get theirs.
pub fn qkv_bias(qkv: &mut [f32], bias: &[f32], scale: f32) {
    qkv.par_chunks_mut(bias.len() * ROWS_PER_TASK)
        .for_each(|rows| vectorized(QkvBias((rows, bias, scale))));
}

simd_kernel!(QkvBias, qkv_bias_rows, (&'a mut [f32], &'a [f32], f32), ());

#[inline(always)]
fn qkv_bias_rows<S: Simd>(_simd: S, (rows, bias, scale): (&mut [f32], &[f32], f32)) {
    let hidden = bias.len() / 3;
    for row in rows.chunks_exact_mut(bias.len()) {
        let (queries, rest) = row.split_at_mut(hidden);
        for (q, b) in queries.iter_mut().zip(bias) {
            *q = (*q + b) * scale;
        }
        for (v, b) in rest.iter_mut().zip(&bias[hidden..]) {
            *v += b;
        }
    }
}

/// Softmax of every row of `width` values, in place.
pub fn softmax_rows(x: &mut [f32], width: usize) {
    x.par_chunks_mut(width * ROWS_PER_TASK)
        .for_each(|rows| vectorized(SoftmaxRows((rows, width))));
}

simd_kernel!(SoftmaxRows, softmax_rows_kernel, (&'a mut [f32], usize), ());

#[inline(always)]
fn softmax_rows_kernel<S: Simd>(simd: S, (rows, width): (&mut [f32], usize)) {
    for row in rows.chunks_exact_mut(width) {
        softmax(simd, row);
    }
}

/// Softmax in place.
#[inline(always)]
fn softmax<S: Simd>(simd: S, xs: &mut [f32]) {
    let max = {
        let (head, tail) = S::as_simd_f32s(xs);
        let m = head
            .iter()
            .fold(simd.splat_f32s(f32::MIN), |m, v| simd.max_f32s(m, *v));
        tail.iter().fold(simd.reduce_max_f32s(m), |m, v| m.max(*v))
    };
    let max_v = simd.splat_f32s(max);
    let mut total = simd.splat_f32s(0.0);
    let (head, tail) = S::as_mut_simd_f32s(xs);
    for v in head.iter_mut() {
        *v = exp_f32s(simd, simd.sub_f32s(*v, max_v));
        total = simd.add_f32s(total, *v);
    }
    let mut total = simd.reduce_sum_f32s(total);
    map_tail::<S>(tail, |v| exp_f32s(simd, simd.sub_f32s(v, max_v)));
    total += tail.iter().sum::<f32>();
    let inv = 1.0 / total;
    for v in xs.iter_mut() {
        *v *= inv;
    }
}

/// Mean of each sequence's rows, L2-normalised (sentence-transformers' Pooling + Normalize).
pub fn mean_pool_normalized(x: &[f32], spans: &[Span], hidden: usize) -> Vec<Vec<f32>> {
    spans
        .par_iter()
        .map(|span| {
            vectorized(Pool((
                &x[span.start * hidden..(span.start + span.len) * hidden],
                hidden,
            )))
        })
        .collect()
}

simd_kernel!(Pool, pool_rows, (&'a [f32], usize), Vec<f32>);

#[inline(always)]
fn pool_rows<S: Simd>(_simd: S, (rows, hidden): (&[f32], usize)) -> Vec<f32> {
    let mut v = vec![0f32; hidden];
    for row in rows.chunks_exact(hidden) {
        for (a, b) in v.iter_mut().zip(row) {
            *a += b;
        }
    }
    let n = (rows.len() / hidden).max(1) as f32;
    v.iter_mut().for_each(|a| *a /= n);
    // sentence-transformers' Normalize: x / max(‖x‖, 1e-12).
    let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|a| *a /= norm);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies `gelu_f32s` (or `exp_f32s`) to each value, in the first lane of a vector.
    struct Lanewise {
        xs: Vec<f32>,
        gelu: bool,
    }

    impl WithSimd for Lanewise {
        type Output = Vec<f32>;
        fn with_simd<S: Simd>(self, simd: S) -> Vec<f32> {
            let gelu = self.gelu;
            self.xs
                .iter()
                .map(|&x| {
                    let v = simd.partial_load_f32s(&[x]);
                    let y = if gelu {
                        gelu_f32s(simd, v)
                    } else {
                        exp_f32s(simd, v)
                    };
                    let mut out = [0f32];
                    simd.partial_store_f32s(&mut out, y);
                    out[0]
                })
                .collect()
        }
    }

    fn apply(xs: &[f32], gelu: bool) -> Vec<f32> {
        vectorized(Lanewise {
            xs: xs.to_vec(),
            gelu,
        })
    }

    #[test]
    fn exp_matches_std_over_the_range_softmax_uses() {
        let xs: Vec<f32> = (0..=20_000)
            .map(|i| -87.0 + i as f32 * 97.0 / 20_000.0)
            .collect();
        let worst = xs
            .iter()
            .zip(apply(&xs, false))
            .map(|(x, got)| ((got - x.exp()) / x.exp()).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-6, "worst relative error {worst}");
    }

    #[test]
    fn gelu_is_the_erf_form_to_float_precision() {
        // x · Φ(x), from the normal distribution's table to 16 digits.
        let cases = [
            (-3.0, -0.004_049_694_094_890_3),
            (-1.0, -0.158_655_253_931_457_07),
            (0.0, 0.0),
            (0.5, 0.345_731_230_637_006_56),
            (1.0, 0.841_344_746_068_542_9),
            (2.0, 1.954_499_736_103_641_6),
            (6.0, 5.999_999_994_079_01),
        ];
        let xs: Vec<f32> = cases.iter().map(|c| c.0 as f32).collect();
        for ((x, want), got) in cases.iter().zip(apply(&xs, true)) {
            assert!(
                (f64::from(got) - want).abs() < 2e-6,
                "gelu({x}) = {got}, not {want}"
            );
        }
    }
}
