//! 8-bit integer matrix products for the encoder's linear layers: weights quantised once per
//! output channel, activations per row at run time, `i8 · i8 → i32` dot products, and one f32
//! multiply per output to bring the sum back to scale.
//!
//! Why: the f32 encoder runs at what the cores' f32 multiply-add rate allows; AVX-512 VNNI
//! (`vpdpbusd`) does four 8-bit multiply-adds per 32-bit lane in one instruction, four times
//! the f32 rate. The attention, layer norms and GELU stay in f32 (a small part of the work and
//! the part most sensitive to rounding).
//!
//! How the product is organised (a GEMM in the usual register-blocked shape):
//! - weights are packed once, at load, in panels of [`NR`] = 64 output channels: for each group
//!   of four inputs, 64 channels × 4 bytes, i.e. four 512-bit vectors read in a row. They are
//!   stored offset by 128 (unsigned), the operand `vpdpbusd` reads from a register;
//! - activations are quantised and packed once per call, in blocks of [`MR`] = 6 rows: for each
//!   group of four inputs, the six rows' four bytes side by side, the operand `vpdpbusd`
//!   broadcasts from memory. Each row's sum of values is kept to take back the offset
//!   (`Σ (w + 128)·x = Σ w·x + 128·Σ x`);
//! - the micro-kernel keeps a 6 × 64 tile of 32-bit sums in 24 vector registers over a slice
//!   of [`KC`] groups of the shared dimension: per group of four inputs, four weight loads and
//!   six broadcasts feed 24 `vpdpbusd`. A task takes each panel in turn and, slice by slice,
//!   runs it over all its row blocks, so the panel's slice (16 KB) is read from L1 by every
//!   block; a layer's whole packed weights (≤ 590 KB for the models docket runs) stay in L2;
//! - the work is split over rayon into tasks of up to [`BLOCKS_PER_TASK`] row blocks by a range
//!   of panels, with panels split only when there are too few rows to keep every thread busy
//!   (a single short text has one or two row blocks).
//!
//! Every path computes the same integers, and integer sums do not depend on their order, so the
//! portable loop, the AVX2 loop (`vpmaddwd` on 16-bit lanes) and the VNNI loop give the same
//! 32-bit sums and, through one shared f32 step, the same bits: the tests check it. The path is
//! picked once per process from what the CPU has ([`Path::best`]).
//!
//! This is the kernels crate's one module with `unsafe`: `std::arch` intrinsics ([`x86`]). Each
//! `unsafe` block is behind a run-time check that the CPU has the instructions it uses, and
//! reads only within slices whose lengths are checked first.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use rayon::prelude::*;

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;

/// The shared dimension is padded with zeros to a multiple of this (the four bytes one
/// 32-bit lane sums); zeros add nothing to a dot product.
const GROUP: usize = 4;

/// Output channels per panel of packed weights: four 512-bit vectors of 32-bit sums.
pub const NR: usize = 64;

/// Rows per block of packed activations: with four vectors of channels, 24 accumulators and
/// four weight vectors fill 28 of AVX-512's 32 registers.
pub const MR: usize = 6;

/// Row blocks per parallel task: 48 rows, whose packed activations (≤ 74 KB at 1536 inputs)
/// stay in L2 while the task walks its panels.
const BLOCKS_PER_TASK: usize = 8;

/// Groups of four inputs per pass of the micro-kernel (256 inputs): a panel's slice of
/// weights (16 KB), a task's slices of activations (≤ 12 KB) and its sums (12 KB) stay in
/// L1 together while the task runs over its blocks.
const KC: usize = 64;

/// Fewest tasks per thread worth splitting for: enough to balance, few enough that splitting
/// panels (which re-reads activations) happens only for small products.
const TASKS_PER_THREAD: usize = 3;

/// Largest magnitude of a quantised value: symmetric, so −128 is never used.
const LEVELS: f32 = 127.0;

/// The offset of the stored weights: `vpdpbusd` reads one operand as unsigned bytes.
const OFFSET: i32 = 128;

/// A weight matrix `[out, in]` quantised per output channel (row): `w ≈ q · scale[o]`.
#[derive(Debug, Clone)]
pub struct QuantizedMatrix {
    /// Output channels.
    pub out: usize,
    /// Input width (before padding).
    pub k: usize,
    /// Groups of four inputs (`k` padded up).
    steps: usize,
    panels: usize,
    /// `[panel][step][NR][GROUP]` of `q + 128`; padding holds 128 (a zero weight).
    packed: Vec<u8>,
    scales: Vec<f32>,
}

impl QuantizedMatrix {
    /// Quantises `weights`, row-major `[out, k]`.
    ///
    /// # Panics
    /// If `weights.len() != out · k` (a caller's bug: the shapes come from the model's config).
    pub fn new(weights: &[f32], out: usize, k: usize) -> Self {
        assert!(k > 0 && weights.len() == out * k, "weights of {out} × {k}");
        let steps = k.div_ceil(GROUP);
        let panels = out.div_ceil(NR);
        let mut rows = vec![0i8; out * k];
        let mut scales = vec![0f32; out];
        rows.par_chunks_mut(k)
            .zip(weights.par_chunks(k))
            .zip(scales.par_iter_mut())
            .for_each(|((q, w), scale)| *scale = quantize_row(w, q));
        let mut packed = vec![OFFSET as u8; panels * steps * NR * GROUP];
        for (o, q) in rows.chunks(k).enumerate() {
            let (panel, c) = (o / NR, o % NR);
            for (i, &v) in q.iter().enumerate() {
                let at = ((panel * steps + i / GROUP) * NR + c) * GROUP + i % GROUP;
                packed[at] = (i32::from(v) + OFFSET) as u8;
            }
        }
        Self {
            out,
            k,
            steps,
            panels,
            packed,
            scales,
        }
    }

    /// Panel `p`'s packed weights: `steps` groups of [`NR`] × [`GROUP`] bytes.
    fn panel(&self, p: usize) -> &[u8] {
        let len = self.steps * NR * GROUP;
        &self.packed[p * len..][..len]
    }
}

/// Rows of activations `[rows, k]` quantised each with its own scale, packed in blocks of
/// [`MR`] rows for the micro-kernels.
#[derive(Debug, Clone)]
pub struct QuantizedRows {
    pub rows: usize,
    pub k: usize,
    steps: usize,
    blocks: usize,
    /// `[block][step][MR]` groups of four bytes (little-endian), zero-padded.
    packed: Vec<u32>,
    /// `[blocks · MR]`: each row's scale (0 in padding rows).
    scales: Vec<f32>,
    /// `[blocks · MR]`: each row's sum of quantised values, times [`OFFSET`].
    offsets: Vec<i32>,
}

impl QuantizedRows {
    /// Quantises `x`, row-major `[rows, k]` (symmetric, dynamic: each row's largest magnitude
    /// maps to 127), with the CPU's widest vectors.
    ///
    /// # Panics
    /// If `x.len()` is not a multiple of `k`.
    pub fn new(x: &[f32], k: usize) -> Self {
        Self::new_with(x, k, Path::best())
    }

    /// [`QuantizedRows::new`] compiled for `path`'s instruction set (the same bits on any).
    pub fn new_with(x: &[f32], k: usize, path: Path) -> Self {
        assert!(
            k > 0 && x.len().is_multiple_of(k),
            "{} values in rows of {k}",
            x.len()
        );
        let rows = x.len() / k;
        let steps = k.div_ceil(GROUP);
        let blocks = rows.div_ceil(MR);
        let mut packed = vec![0u32; blocks * steps * MR];
        let mut scales = vec![0f32; blocks * MR];
        let mut offsets = vec![0i32; blocks * MR];
        let path = path.or_portable();
        packed
            .par_chunks_mut(steps * MR)
            .zip(scales.par_chunks_mut(MR))
            .zip(offsets.par_chunks_mut(MR))
            .enumerate()
            .for_each_init(
                || vec![0i8; steps * GROUP],
                |row, (b, ((packed, scales), offsets))| {
                    let first = b * MR * k;
                    let x = &x[first..x.len().min(first + MR * k)];
                    for (r, x) in x.chunks_exact(k).enumerate() {
                        let (scale, sum) = quantize_with(path, x, &mut row[..k]);
                        scales[r] = scale;
                        offsets[r] = sum * OFFSET;
                        let column = packed.iter_mut().skip(r).step_by(MR);
                        for (p, g) in column.zip(row.chunks_exact(GROUP)) {
                            *p = u32::from_le_bytes([
                                g[0] as u8, g[1] as u8, g[2] as u8, g[3] as u8,
                            ]);
                        }
                    }
                },
            );
        Self {
            rows,
            k,
            steps,
            blocks,
            packed,
            scales,
            offsets,
        }
    }

    /// Block `b`'s packed activations: `steps` groups of [`MR`] × four bytes.
    fn block(&self, b: usize) -> &[u32] {
        let len = self.steps * MR;
        &self.packed[b * len..][..len]
    }
}

/// Quantises one row into `q` (same length) and returns its scale.
fn quantize_row(x: &[f32], q: &mut [i8]) -> f32 {
    quantize(x, q).0
}

/// [`quantize`] by the instructions of `path`.
fn quantize_with(path: Path, x: &[f32], q: &mut [i8]) -> (f32, i32) {
    match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `or_portable` kept a path only if this CPU has its instructions.
        Path::Vnni => unsafe { x86::quantize_avx512(x, q) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Path::Avx2 => unsafe { x86::quantize_avx2(x, q) },
        _ => quantize(x, q),
    }
}

/// Quantises one row into `q` (same length, the rest of a padded row stays zero): its scale and
/// the sum of its quantised values. Written for the auto-vectoriser: lane-wise maxima, and
/// rounding by adding 1.5 · 2²³ (round half to even), which every instruction set computes to
/// the same bits.
#[inline(always)]
fn quantize(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    // Four vectors' worth of running maxima: independent chains, not one long one.
    const LANES: usize = 64;
    const ROUND: f32 = 12_582_912.0;
    let mut lanes = [0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in chunks.by_ref() {
        for (m, v) in lanes.iter_mut().zip(c) {
            *m = m.max(v.abs());
        }
    }
    let max = chunks
        .remainder()
        .iter()
        .chain(&lanes)
        .fold(0f32, |m, v| m.max(v.abs()));
    if max == 0.0 || !max.is_finite() {
        q.fill(0);
        return (if max.is_finite() { 0.0 } else { f32::NAN }, 0);
    }
    let inv = LEVELS / max;
    let mut sum = 0i32;
    let base = ROUND.to_bits() as i32;
    for (q, v) in q.iter_mut().zip(x) {
        // `v · inv + 1.5 · 2²³` holds the rounded value in its low mantissa bits: read them as
        // an integer (no float → int conversion, which the vectoriser leaves one lane at a
        // time). Within ±127 by construction; the clamp only guards the last rounding.
        let n = ((v * inv + ROUND).to_bits() as i32)
            .wrapping_sub(base)
            .clamp(-127, 127);
        *q = n as i8;
        sum += n;
    }
    (max / LEVELS, sum)
}

/// How the dot products are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// Plain Rust, any CPU.
    Portable,
    /// AVX2: widened to 16 bits, multiplied and summed in pairs (`vpmaddwd`).
    Avx2,
    /// AVX-512 VNNI on 512-bit vectors: four byte products into each 32-bit sum per
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
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
                {
                    paths.push(Path::Vnni);
                }
            }
        }
        paths
    }

    /// This path if the CPU has it, else the portable one (never a fault).
    fn or_portable(self) -> Path {
        if Path::available().contains(&self) {
            self
        } else {
            Path::Portable
        }
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
    let path = path.or_portable();
    let len = x.rows * w.out;
    if len == 0 {
        return vec![0.0; len];
    }
    // Written once by the tasks, never zeroed first (zeroing was a tenth of a product's time).
    let mut y: Vec<f32> = Vec::with_capacity(len);
    let row_tasks = x.blocks.div_ceil(BLOCKS_PER_TASK);
    let wanted = TASKS_PER_THREAD * rayon::current_num_threads();
    let splits = wanted.div_ceil(row_tasks).clamp(1, w.panels);
    let panels_per_task = w.panels.div_ceil(splits);
    let width = panels_per_task * NR;
    let splits = w.out.div_ceil(width);
    // Each task owns its rows' slices of its columns: disjoint by construction.
    let mut tasks = Vec::with_capacity(row_tasks * splits);
    let cells = &mut y.spare_capacity_mut()[..len];
    for (t, rows) in cells.chunks_mut(BLOCKS_PER_TASK * MR * w.out).enumerate() {
        let mut columns: Vec<Vec<&mut [MaybeUninit<f32>]>> =
            (0..splits).map(|_| Vec::new()).collect();
        for row in rows.chunks_mut(w.out) {
            let mut rest = row;
            for slices in &mut columns {
                let (part, tail) = rest.split_at_mut(width.min(rest.len()));
                slices.push(part);
                rest = tail;
            }
        }
        for (c, rows) in columns.into_iter().enumerate() {
            tasks.push(Task {
                block: t * BLOCKS_PER_TASK,
                panel: c * panels_per_task,
                rows,
            });
        }
    }
    tasks.into_par_iter().for_each(|task| match path {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `or_portable` kept this path only if the CPU has its instructions.
        Path::Vnni => unsafe { x86::task_vnni(task, x, w) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Path::Avx2 => unsafe { x86::task_avx2(task, x, w) },
        _ => run_task(task, x, w, portable_tile),
    });
    // SAFETY: the tasks' slices cover `len` cells, every row of every column range, and
    // `run_task` writes each cell of its slices.
    unsafe { y.set_len(len) };
    y
}

/// One parallel task: output rows from block `block` on (`rows[i]` is row `block · MR + i`'s
/// slice of channels from `panel · NR` on).
struct Task<'a> {
    block: usize,
    panel: usize,
    rows: Vec<&'a mut [MaybeUninit<f32>]>,
}

/// A tile of raw sums: `MR` rows × `NR` channels of `Σ (w + 128) · x`.
type Tile = [[i32; NR]; MR];

/// Runs `task` with `tile` as the micro-kernel (adds a block's packed activations times a
/// panel's packed weights, over a slice of the shared dimension, into a tile of sums). Loop
/// order: for each panel, for each slice of [`KC`] groups, for each of the task's blocks; so a
/// panel's slice of weights is read from L1 once per block. The f32 step here is shared by
/// every path, so their outputs are the same bits. Inlined into each path's
/// `#[target_feature]` entry, so this loop is vectorised for it too.
#[inline(always)]
fn run_task(
    task: Task<'_>,
    x: &QuantizedRows,
    w: &QuantizedMatrix,
    tile: impl Fn(&mut Tile, &[u32], &[u8]),
) {
    let Task {
        block: first,
        panel: first_panel,
        mut rows,
    } = task;
    let blocks = rows.len().div_ceil(MR);
    let width = rows.first().map_or(0, |r| r.len());
    let mut sums = [[[0i32; NR]; MR]; BLOCKS_PER_TASK];
    let sums = &mut sums[..blocks];
    for p in 0..width.div_ceil(NR) {
        let panel = w.panel(first_panel + p);
        sums.iter_mut().for_each(|t| *t = [[0; NR]; MR]);
        for k0 in (0..w.steps).step_by(KC) {
            let k1 = w.steps.min(k0 + KC);
            let b = &panel[k0 * NR * GROUP..k1 * NR * GROUP];
            for (i, sums) in sums.iter_mut().enumerate() {
                tile(sums, &x.block(first + i)[k0 * MR..k1 * MR], b);
            }
        }
        let o0 = (first_panel + p) * NR;
        let end = width.min((p + 1) * NR);
        for (i, (rows, sums)) in rows.chunks_mut(MR).zip(sums.iter()).enumerate() {
            for (r, (y, acc)) in rows.iter_mut().zip(sums).enumerate() {
                let row = (first + i) * MR + r;
                let (xs, offset) = (x.scales[row], x.offsets[row]);
                let y = &mut y[p * NR..end];
                let scales = &w.scales[o0..o0 + y.len()];
                for ((y, &acc), &ws) in y.iter_mut().zip(acc).zip(scales) {
                    y.write(dequantize(acc.wrapping_sub(offset), xs, ws));
                }
            }
        }
    }
}

/// The one f32 step.
#[inline(always)]
fn dequantize(acc: i32, x_scale: f32, w_scale: f32) -> f32 {
    acc as f32 * (x_scale * w_scale)
}

/// The portable micro-kernel: the same sums as the vector ones, one product at a time.
fn portable_tile(sums: &mut Tile, a: &[u32], b: &[u8]) {
    for (groups, weights) in a.chunks_exact(MR).zip(b.chunks_exact(NR * GROUP)) {
        for (row, &g) in sums.iter_mut().zip(groups) {
            let x = g.to_le_bytes().map(|v| i32::from(v as i8));
            for (acc, w) in row.iter_mut().zip(weights.chunks_exact(GROUP)) {
                for (&xv, &wv) in x.iter().zip(w) {
                    *acc += xv * i32::from(wv);
                }
            }
        }
    }
}
