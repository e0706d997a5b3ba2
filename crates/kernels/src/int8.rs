//! 8-bit integer matrix products for the encoder's linear layers: weights quantised once per
//! output channel, activations per row at run time, `i8 · i8 → i32` dot products, and one f32
//! multiply per output to bring the sum back to scale.
//!
//! Why: the f32 encoder runs at what the cores' f32 multiply-add rate allows; the same silicon
//! does four to eight times as many 8-bit multiply-adds per instruction. The attention, layer
//! norms and GELU stay in f32 (they are a small part of the work and the part most sensitive
//! to rounding).
//!
//! Every path computes the same integers, and integer sums do not depend on their order, so the
//! portable loop, the AVX2 loop (`vpmaddwd` on sign-extended 16-bit lanes) and the VNNI loop
//! (`vpdpbusd`, 8-bit lanes straight into 32-bit sums) give the same bits: the tests check it.
//! The path is picked once per process from what the CPU has ([`Path::best`]).
//!
//! This is the kernels crate's one module with `unsafe`: `std::arch` intrinsics and one
//! instruction in `asm!` (VNNI's intrinsics are newer than the workspace's minimum Rust). Each
//! `unsafe` block is behind a run-time check that the CPU has the instructions it uses, and
//! reads only within slices whose lengths are checked first.
#![allow(unsafe_code)]

use rayon::prelude::*;

/// The shared dimension is padded with zeros to a multiple of this (the four bytes one
/// 32-bit lane sums); zeros add nothing to a dot product.
const GROUP: usize = 4;

/// Output channels are padded to a multiple of this: one 256-bit vector of 32-bit sums.
const LANES: usize = 8;

/// Largest magnitude of a quantised value: symmetric, so −128 is never used.
const LEVELS: f32 = 127.0;

/// Rows of the left operand per parallel task (their quantised values stay in L1).
const ROWS_PER_TASK: usize = 32;

/// A weight matrix `[out, in]` quantised per output channel (row): `w ≈ q · scale[o]`.
///
/// Stored packed for the vector loops: groups of four consecutive input values of eight
/// consecutive channels make one 32-byte vector (`[k/4][out/8 · 8][4]`), so each step of a
/// loop reads one vector of weights and broadcasts four bytes of a row, and no sum ever needs
/// reducing across lanes.
#[derive(Debug, Clone)]
pub struct QuantizedMatrix {
    /// Output channels.
    pub out: usize,
    /// Input width (before padding).
    pub k: usize,
    k_pad: usize,
    out_pad: usize,
    /// `[k_pad / 4][out_pad][4]`, zero-padded.
    packed: Vec<i8>,
    scales: Vec<f32>,
    /// Each channel's sum of values: the VNNI path reads activations as unsigned (`x + 128`)
    /// and takes `128 · sum` back off.
    sums: Vec<i32>,
}

impl QuantizedMatrix {
    /// Quantises `weights`, row-major `[out, k]`.
    ///
    /// # Panics
    /// If `weights.len() != out · k` (a caller's bug: the shapes come from the model's config).
    pub fn new(weights: &[f32], out: usize, k: usize) -> Self {
        assert!(k > 0 && weights.len() == out * k, "weights of {out} × {k}");
        let k_pad = k.div_ceil(GROUP) * GROUP;
        let out_pad = out.div_ceil(LANES) * LANES;
        let mut rows = vec![0i8; out * k];
        let mut scales = vec![0f32; out];
        rows.par_chunks_mut(k)
            .zip(weights.par_chunks(k))
            .zip(scales.par_iter_mut())
            .for_each(|((q, w), scale)| *scale = quantize_row(w, q));
        let sums = rows
            .chunks(k)
            .map(|q| q.iter().map(|&v| i32::from(v)).sum())
            .collect();
        let mut packed = vec![0i8; k_pad * out_pad];
        for (o, q) in rows.chunks(k).enumerate() {
            for (i, &v) in q.iter().enumerate() {
                packed[((i / GROUP) * out_pad + o) * GROUP + i % GROUP] = v;
            }
        }
        Self {
            out,
            k,
            k_pad,
            out_pad,
            packed,
            scales,
            sums,
        }
    }

    /// The quantised value of channel `o`, input `i` (zero in the padding).
    fn at(&self, o: usize, i: usize) -> i8 {
        self.packed[((i / GROUP) * self.out_pad + o) * GROUP + i % GROUP]
    }
}

/// Rows of activations `[rows, k]` quantised each with its own scale.
#[derive(Debug, Clone)]
pub struct QuantizedRows {
    pub rows: usize,
    pub k: usize,
    k_pad: usize,
    /// `[rows, k_pad]`, zero-padded.
    values: Vec<i8>,
    scales: Vec<f32>,
}

impl QuantizedRows {
    /// Quantises `x`, row-major `[rows, k]` (symmetric, dynamic: each row's largest magnitude
    /// maps to 127).
    ///
    /// # Panics
    /// If `x.len()` is not a multiple of `k`.
    pub fn new(x: &[f32], k: usize) -> Self {
        assert!(
            k > 0 && x.len() % k == 0,
            "{} values in rows of {k}",
            x.len()
        );
        let rows = x.len() / k;
        let k_pad = k.div_ceil(GROUP) * GROUP;
        let mut values = vec![0i8; rows * k_pad];
        let mut scales = vec![0f32; rows];
        values
            .par_chunks_mut(k_pad * ROWS_PER_TASK)
            .zip(x.par_chunks(k * ROWS_PER_TASK))
            .zip(scales.par_chunks_mut(ROWS_PER_TASK))
            .for_each(|((q, x), s)| {
                for ((q, x), s) in q.chunks_exact_mut(k_pad).zip(x.chunks_exact(k)).zip(s) {
                    *s = quantize_row(x, &mut q[..k]);
                }
            });
        Self {
            rows,
            k,
            k_pad,
            values,
            scales,
        }
    }
}

/// Quantises one row into `q` (same length) and returns its scale.
fn quantize_row(x: &[f32], q: &mut [i8]) -> f32 {
    let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    if max == 0.0 || !max.is_finite() {
        q.fill(0);
        return if max.is_finite() { 0.0 } else { f32::NAN };
    }
    let inv = LEVELS / max;
    for (q, v) in q.iter_mut().zip(x) {
        // Within ±127 by construction; the clamp only guards the last rounding.
        *q = (v * inv).round().clamp(-LEVELS, LEVELS) as i8;
    }
    max / LEVELS
}

/// How the dot products are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Plain Rust, any CPU.
    Portable,
    /// AVX2: sign-extended to 16 bits, multiplied and summed in pairs (`vpmaddwd`).
    Avx2,
    /// AVX-512 VNNI (with VL) on 256-bit vectors: four byte products into each 32-bit sum per
    /// instruction (`vpdpbusd`).
    Vnni,
}

impl Path {
    /// The fastest path this CPU runs (detected once).
    pub fn best() -> Path {
        static BEST: std::sync::OnceLock<Path> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| {
            Path::available()
                .into_iter()
                .last()
                .unwrap_or(Path::Portable)
        })
    }

    /// Every path this CPU runs, slowest first (the portable one always).
    pub fn available() -> Vec<Path> {
        let mut paths = vec![Path::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                paths.push(Path::Avx2);
                if std::arch::is_x86_feature_detected!("avx512vnni")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                {
                    paths.push(Path::Vnni);
                }
            }
        }
        paths
    }
}

/// `x · wᵀ`: `[rows, out]` in f32, row-major, by the fastest path.
///
/// # Panics
/// If the widths differ.
pub fn matmul(x: &QuantizedRows, w: &QuantizedMatrix) -> Vec<f32> {
    matmul_with(x, w, Path::best())
}

/// [`matmul`] by a chosen path; a path this CPU lacks falls back to the portable one rather
/// than fault.
pub fn matmul_with(x: &QuantizedRows, w: &QuantizedMatrix, path: Path) -> Vec<f32> {
    assert_eq!(x.k, w.k, "widths {} and {}", x.k, w.k);
    let path = if Path::available().contains(&path) {
        path
    } else {
        Path::Portable
    };
    let mut y = vec![0f32; x.rows * w.out];
    if w.out == 0 {
        return y;
    }
    y.par_chunks_mut(w.out * ROWS_PER_TASK)
        .zip(x.values.par_chunks(x.k_pad * ROWS_PER_TASK))
        .zip(x.scales.par_chunks(ROWS_PER_TASK))
        .for_each(|((y, xq), xs)| {
            let block = Block { xq, xs, w, y };
            match path {
                Path::Portable => block.portable(),
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the path is one `Path::available` detected on this CPU.
                Path::Avx2 => unsafe { x86::avx2(block) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                Path::Vnni => unsafe { x86::vnni(block) },
                #[cfg(not(target_arch = "x86_64"))]
                _ => block.portable(),
            }
        });
    y
}

/// A block of rows of the product: `xq` holds `xs.len()` rows of `w.k_pad` values, `y` as many
/// rows of `w.out`.
struct Block<'a> {
    xq: &'a [i8],
    xs: &'a [f32],
    w: &'a QuantizedMatrix,
    y: &'a mut [f32],
}

impl Block<'_> {
    fn portable(self) {
        let w = self.w;
        for (r, (xrow, &xs)) in self.xq.chunks_exact(w.k_pad).zip(self.xs).enumerate() {
            for o in 0..w.out {
                let acc: i32 = xrow
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| i32::from(v) * i32::from(w.at(o, i)))
                    .sum();
                self.y[r * w.out + o] = dequantize(acc, xs, w.scales[o]);
            }
        }
    }

    /// Writes the sums of rows `r0..` (one array of eight per row and vector) for channels
    /// `o0..`, skipping the padding channels.
    fn store<const R: usize, const C: usize>(
        &mut self,
        r0: usize,
        o0: usize,
        sums: &[[[i32; LANES]; C]; R],
    ) {
        let w = self.w;
        for (i, row) in sums.iter().enumerate() {
            for (j, lanes) in row.iter().enumerate() {
                for (l, &acc) in lanes.iter().enumerate() {
                    let o = o0 + j * LANES + l;
                    if o < w.out {
                        self.y[(r0 + i) * w.out + o] =
                            dequantize(acc, self.xs[r0 + i], w.scales[o]);
                    }
                }
            }
        }
    }
}

/// The one f32 step, shared by every path so that their outputs are the same bits.
#[inline(always)]
fn dequantize(acc: i32, x_scale: f32, w_scale: f32) -> f32 {
    acc as f32 * (x_scale * w_scale)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Block, GROUP, LANES};

    /// Rows per tile: with three vectors of channels, twelve accumulators, three weight
    /// vectors and one broadcast row fill the sixteen vector registers.
    const ROWS: usize = 4;

    fn lanes(v: __m256i) -> [i32; LANES] {
        // SAFETY: `__m256i` is 32 plain bytes, as is `[i32; 8]`.
        unsafe { std::mem::transmute::<__m256i, [i32; LANES]>(v) }
    }

    /// The VNNI path: tiles of up to 4 rows × 24 channels.
    ///
    /// # Safety
    /// The CPU has AVX2, AVX-512 VNNI and AVX-512 VL.
    #[target_feature(enable = "avx2")]
    pub unsafe fn vnni(mut block: Block<'_>) {
        unsafe {
            let w = block.w;
            // Rows read as unsigned bytes (`x + 128`: the sign bit flipped), four at a time.
            let xu: Vec<u32> = block
                .xq
                .chunks_exact(GROUP)
                .map(|g| u32::from_le_bytes([g[0], g[1], g[2], g[3]].map(|v| v as u8 ^ 0x80)))
                .collect();
            let rows = block.xs.len();
            let mut o0 = 0;
            while o0 < w.out_pad {
                let vectors = (w.out_pad - o0) / LANES;
                let mut r0 = 0;
                while r0 < rows {
                    match (rows - r0).min(ROWS) {
                        4 => vnni_tile::<4>(&mut block, &xu, r0, o0, vectors),
                        3 => vnni_tile::<3>(&mut block, &xu, r0, o0, vectors),
                        2 => vnni_tile::<2>(&mut block, &xu, r0, o0, vectors),
                        _ => vnni_tile::<1>(&mut block, &xu, r0, o0, vectors),
                    }
                    r0 += ROWS;
                }
                o0 += vectors.min(3) * LANES;
            }
        }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn vnni_tile<const R: usize>(
        block: &mut Block<'_>,
        xu: &[u32],
        r0: usize,
        o0: usize,
        vectors: usize,
    ) {
        unsafe {
            match vectors {
                1 => vnni_tile_rc::<R, 1>(block, xu, r0, o0),
                2 => vnni_tile_rc::<R, 2>(block, xu, r0, o0),
                _ => vnni_tile_rc::<R, 3>(block, xu, r0, o0),
            }
        }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn vnni_tile_rc<const R: usize, const C: usize>(
        block: &mut Block<'_>,
        xu: &[u32],
        r0: usize,
        o0: usize,
    ) {
        unsafe {
            let w = block.w;
            let steps = w.k_pad / GROUP;
            // Every read below is within these two slices.
            assert!(xu.len() >= (r0 + R) * steps && o0 + C * LANES <= w.out_pad);
            assert_eq!(w.packed.len(), steps * w.out_pad * GROUP);
            let mut acc = [[_mm256_setzero_si256(); C]; R];
            let wp = w.packed.as_ptr();
            let xp = xu.as_ptr();
            for s in 0..steps {
                let base = wp.add((s * w.out_pad + o0) * GROUP);
                let mut wv = [_mm256_setzero_si256(); C];
                for (j, v) in wv.iter_mut().enumerate() {
                    *v = _mm256_loadu_si256(base.add(j * LANES * GROUP).cast());
                }
                for (i, acc_row) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_epi32(*xp.add((r0 + i) * steps + s) as i32);
                    for (a, &v) in acc_row.iter_mut().zip(&wv) {
                        *a = dpbusd(*a, x, v);
                    }
                }
            }
            let mut sums = [[[0i32; LANES]; C]; R];
            for (row, acc_row) in sums.iter_mut().zip(&acc) {
                for (j, (out, &a)) in row.iter_mut().zip(acc_row).enumerate() {
                    *out = lanes(a);
                    for (l, v) in out.iter_mut().enumerate() {
                        // The unsigned reading added 128 · Σ w; padding channels have no sum.
                        let o = o0 + j * LANES + l;
                        let sum = w.sums.get(o).copied().unwrap_or(0);
                        *v = v.wrapping_sub(sum.wrapping_mul(128));
                    }
                }
            }
            block.store(r0, o0, &sums);
        }
    }

    /// `acc + Σ₄ u8(a) · i8(b)` per 32-bit lane (`vpdpbusd`, EVEX-encoded on 256 bits: its
    /// intrinsic is newer than the workspace's minimum Rust).
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn dpbusd(mut acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        unsafe {
            std::arch::asm!(
                "vpdpbusd {acc}, {a}, {b}",
                acc = inout(ymm_reg) acc,
                a = in(ymm_reg) a,
                b = in(ymm_reg) b,
                options(pure, nomem, nostack),
            );
            acc
        }
    }

    /// The AVX2 path: tiles of up to 4 rows × 8 channels. A weight vector (8 channels × 4
    /// inputs) is sign-extended into two halves of 16-bit lanes; `vpmaddwd` against the row's
    /// four inputs, broadcast, leaves each channel's sum in two neighbouring lanes.
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn avx2(mut block: Block<'_>) {
        unsafe {
            let w = block.w;
            let x16: Vec<i16> = block.xq.iter().map(|&v| i16::from(v)).collect();
            let rows = block.xs.len();
            let mut o0 = 0;
            while o0 < w.out_pad {
                let mut r0 = 0;
                while r0 < rows {
                    match (rows - r0).min(ROWS) {
                        4 => avx2_tile::<4>(&mut block, &x16, r0, o0),
                        3 => avx2_tile::<3>(&mut block, &x16, r0, o0),
                        2 => avx2_tile::<2>(&mut block, &x16, r0, o0),
                        _ => avx2_tile::<1>(&mut block, &x16, r0, o0),
                    }
                    r0 += ROWS;
                }
                o0 += LANES;
            }
        }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn avx2_tile<const R: usize>(block: &mut Block<'_>, x16: &[i16], r0: usize, o0: usize) {
        unsafe {
            let w = block.w;
            let steps = w.k_pad / GROUP;
            assert!(x16.len() >= (r0 + R) * w.k_pad && o0 + LANES <= w.out_pad);
            assert_eq!(w.packed.len(), steps * w.out_pad * GROUP);
            let mut low = [_mm256_setzero_si256(); R];
            let mut high = [_mm256_setzero_si256(); R];
            let wp = w.packed.as_ptr();
            let xp = x16.as_ptr();
            for s in 0..steps {
                let v = _mm256_loadu_si256(wp.add((s * w.out_pad + o0) * GROUP).cast());
                let wl = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
                let wh = _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(v));
                for i in 0..R {
                    let four = xp.add((r0 + i) * w.k_pad + s * GROUP).cast::<i64>();
                    let x = _mm256_set1_epi64x(four.read_unaligned());
                    low[i] = _mm256_add_epi32(low[i], _mm256_madd_epi16(wl, x));
                    high[i] = _mm256_add_epi32(high[i], _mm256_madd_epi16(wh, x));
                }
            }
            let mut sums = [[[0i32; LANES]; 1]; R];
            for (row, (&l, &h)) in sums.iter_mut().zip(low.iter().zip(&high)) {
                let (l, h) = (lanes(l), lanes(h));
                for c in 0..LANES / 2 {
                    row[0][c] = l[2 * c].wrapping_add(l[2 * c + 1]);
                    row[0][c + LANES / 2] = h[2 * c].wrapping_add(h[2 * c + 1]);
                }
            }
            block.store(r0, o0, &sums);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1), with some rows scaled far apart.
    fn values(seed: u64, n: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(7);
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 40) as f32 / (1u64 << 23) as f32) - 1.0
            })
            .collect()
    }

    #[test]
    fn every_path_this_cpu_has_gives_the_portable_bits() {
        // Widths around the padding, rows and outputs not multiples of the tiles.
        for (rows, k, out) in [
            (1, 1, 1),
            (7, 63, 5),
            (37, 384, 11),
            (5, 1536, 3),
            (66, 130, 9),
        ] {
            let mut x = values(rows as u64, rows * k);
            // Extremes: a row of a single large value, a row of zeros.
            x[..k].iter_mut().for_each(|v| *v = 0.0);
            if rows > 1 {
                x[k] = 1e6;
            }
            let w = values(k as u64 + 1, out * k);
            let (xq, wq) = (QuantizedRows::new(&x, k), QuantizedMatrix::new(&w, out, k));
            let want = matmul_with(&xq, &wq, Path::Portable);
            for path in Path::available() {
                let got = matmul_with(&xq, &wq, path);
                let same = want
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{path:?} differs at {rows} × {k} × {out}");
            }
        }
    }

    #[test]
    fn the_integer_sums_are_exact_at_the_extremes() {
        // Every product at ±127², over a long row: the largest sums the kernels can meet.
        let k = 1536;
        let x = vec![1.0f32; 2 * k];
        let mut w = vec![-1.0f32; k];
        w.extend(vec![1.0f32; k]);
        let (xq, wq) = (QuantizedRows::new(&x, k), QuantizedMatrix::new(&w, 2, k));
        for path in Path::available() {
            let y = matmul_with(&xq, &wq, path);
            assert_eq!(
                y,
                vec![-(k as f32), k as f32, -(k as f32), k as f32],
                "{path:?}"
            );
        }
    }

    #[test]
    fn the_product_is_close_to_the_f32_one() {
        let (rows, k, out) = (9, 384, 17);
        let x = values(3, rows * k);
        let w = values(4, out * k);
        let y = matmul(
            &QuantizedRows::new(&x, k),
            &QuantizedMatrix::new(&w, out, k),
        );
        let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>().sqrt();
        for r in 0..rows {
            for o in 0..out {
                let (xr, wr) = (&x[r * k..][..k], &w[o * k..][..k]);
                let exact: f32 = xr.iter().zip(wr).map(|(a, b)| a * b).sum();
                let err = (y[r * out + o] - exact).abs();
                // Two 8-bit roundings: far under a percent of the largest the product can be.
                assert!(
                    err < 0.003 * norm(xr) * norm(wr),
                    "{r},{o}: {} against {exact}",
                    y[r * out + o]
                );
            }
        }
        assert_eq!(quantize_row(&[0.0, 0.0], &mut [0, 0]), 0.0);
    }
}
