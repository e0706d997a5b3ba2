//! The x86-64 paths: AVX-512 VNNI and AVX2 micro-kernels, and the activation quantiser
//! compiled for each instruction set.
//!
//! Each entry is `#[target_feature]` and `unsafe` only in that the CPU must have the features
//! (the caller checked, [`super::Path::available`]); the pointer reads in the micro-kernels are
//! within the slices whose lengths they assert first.

use std::arch::x86_64::*;

use super::{GROUP, KC, MR, NR, QuantizedMatrix, QuantizedRows, Task, Tile, quantize, run_task};

/// [`quantize`] compiled for AVX-512 (vectorised maxima, rounding and narrowing).
///
/// # Safety
/// The CPU has AVX-512 F and BW.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
pub unsafe fn quantize_avx512(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    quantize(x, q)
}

/// [`quantize`] compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn quantize_avx2(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    quantize(x, q)
}

/// One task by the VNNI micro-kernel.
///
/// # Safety
/// The CPU has AVX-512 F, BW and VNNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,avx2,fma")]
pub unsafe fn task_vnni(task: Task<'_>, x: &QuantizedRows, w: &QuantizedMatrix) {
    run_task(task, x, w, |sums, a, b| {
        // SAFETY: this function's own requirement.
        unsafe { tile_vnni(sums, a, b) }
    });
}

/// Adds a 6 × 64 tile: 24 accumulators in registers over the slice. Per group of four
/// inputs: four 64-byte weight loads, then for each row one 4-byte broadcast (folded into the
/// instruction) and four `vpdpbusd`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn tile_vnni(sums: &mut Tile, a: &[u32], b: &[u8]) {
    let steps = a.len() / MR;
    // Every read below is within these two slices.
    assert!(a.len() == steps * MR && b.len() == steps * NR * GROUP);
    let (ap, bp) = (a.as_ptr(), b.as_ptr());
    let mut acc = [[_mm512_setzero_si512(); 4]; MR];
    for (acc, row) in acc.iter_mut().zip(sums.iter()) {
        for (j, v) in acc.iter_mut().enumerate() {
            // SAFETY: 16 of the row's 64 values.
            *v = unsafe { _mm512_loadu_si512(row[j * 16..][..16].as_ptr().cast()) };
        }
    }
    for s in 0..steps {
        // SAFETY: step `s` of both operands is within them (asserted above).
        unsafe {
            let base = bp.add(s * NR * GROUP);
            let wv = [
                _mm512_loadu_si512(base.cast()),
                _mm512_loadu_si512(base.add(64).cast()),
                _mm512_loadu_si512(base.add(128).cast()),
                _mm512_loadu_si512(base.add(192).cast()),
            ];
            let groups = ap.add(s * MR);
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_epi32(*groups.add(r) as i32);
                for (a, &v) in acc.iter_mut().zip(&wv) {
                    *a = _mm512_dpbusd_epi32(*a, v, x);
                }
            }
        }
    }
    for (row, acc) in sums.iter_mut().zip(&acc) {
        for (j, &v) in acc.iter().enumerate() {
            // SAFETY: 16 lanes into 16 of the row's 64 values.
            unsafe { _mm512_storeu_si512(row[j * 16..][..16].as_mut_ptr().cast(), v) };
        }
    }
}

/// One task by the AVX2 micro-kernel.
///
/// # Safety
/// The CPU has AVX2.
#[target_feature(enable = "avx2,fma")]
pub unsafe fn task_avx2(task: Task<'_>, x: &QuantizedRows, w: &QuantizedMatrix) {
    run_task(task, x, w, |sums, a, b| {
        // SAFETY: this function's own requirement.
        unsafe { tile_avx2(sums, a, b) }
    });
}

/// Adds a 6 × 64 tile, in eight slices of eight channels. Per slice and group of four inputs: the
/// 32 weight bytes widened to two vectors of 16-bit lanes; each row's four inputs, widened
/// and broadcast, multiplied and summed in pairs (`vpmaddwd`), which leaves each channel's
/// sum in two neighbouring lanes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn tile_avx2(sums: &mut Tile, a: &[u32], b: &[u8]) {
    let steps = a.len() / MR;
    assert!(a.len() == steps * MR && steps <= KC && b.len() == steps * NR * GROUP);
    // The rows' groups widened to four 16-bit lanes once for all slices.
    let mut wide = [0i64; KC * MR];
    for (wide, &g) in wide.iter_mut().zip(a) {
        let [x0, x1, x2, x3] = g.to_le_bytes().map(|v| i64::from(v as i8 as i16 as u16));
        *wide = x0 | (x1 << 16) | (x2 << 32) | (x3 << 48);
    }
    let (xp, bp) = (wide.as_ptr(), b.as_ptr());
    for slice in 0..NR / 8 {
        let mut low = [_mm256_setzero_si256(); MR];
        let mut high = [_mm256_setzero_si256(); MR];
        for s in 0..steps {
            // SAFETY: step `s`, slice `slice` is within `b`; row groups within `wide`.
            unsafe {
                let v = _mm256_loadu_si256(bp.add(s * NR * GROUP + slice * 32).cast());
                let wl = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(v));
                let wh = _mm256_cvtepu8_epi16(_mm256_extracti128_si256::<1>(v));
                for r in 0..MR {
                    let x = _mm256_set1_epi64x(*xp.add(s * MR + r));
                    low[r] = _mm256_add_epi32(low[r], _mm256_madd_epi16(wl, x));
                    high[r] = _mm256_add_epi32(high[r], _mm256_madd_epi16(wh, x));
                }
            }
        }
        for (row, (&l, &h)) in sums.iter_mut().zip(low.iter().zip(&high)) {
            // SAFETY: `__m256i` is 32 plain bytes, as is `[i32; 8]`.
            let (l, h) = unsafe {
                (
                    std::mem::transmute::<__m256i, [i32; 8]>(l),
                    std::mem::transmute::<__m256i, [i32; 8]>(h),
                )
            };
            let out = &mut row[slice * 8..][..8];
            for c in 0..4 {
                out[c] = out[c].wrapping_add(l[2 * c].wrapping_add(l[2 * c + 1]));
                out[c + 4] = out[c + 4].wrapping_add(h[2 * c].wrapping_add(h[2 * c + 1]));
            }
        }
    }
}
