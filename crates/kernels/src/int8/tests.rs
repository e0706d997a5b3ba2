use super::*;

/// Deterministic values in [-1, 1).
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

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Shapes around every boundary: rows not multiples of a block or a task, widths not
/// multiples of a group, channels not multiples of a panel or a vector, and the encoder's own.
const SHAPES: [(usize, usize, usize); 9] = [
    (1, 1, 1),
    (7, 63, 5),
    (37, 384, 11),
    (5, 1536, 3),
    (66, 130, 9),
    (49, 384, 1152),
    (3, 384, 130),
    (100, 1536, 384),
    (300, 384, 200),
];

#[test]
fn every_path_this_cpu_has_gives_the_portable_bits() {
    // One thread, two (the machine's), and many: the split into tasks changes with them.
    for threads in [1, 2, 7] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .expect("pool");
        pool.install(|| {
            for (rows, k, out) in SHAPES {
                let mut x = values(rows as u64, rows * k);
                // Extremes: a row of zeros, a row of one large value.
                x[..k].iter_mut().for_each(|v| *v = 0.0);
                if rows > 1 {
                    x[k] = 1e6;
                }
                let w = values(k as u64 + 1, out * k);
                let wq = QuantizedMatrix::new(&w, out, k);
                let xq = QuantizedRows::new_with(&x, k, Path::Portable);
                let want = matmul_with(&xq, &wq, Path::Portable);
                for path in Path::available() {
                    let xp = QuantizedRows::new_with(&x, k, path);
                    assert_eq!(xp.packed, xq.packed, "{path:?} quantises differently");
                    assert!(same_bits(&xp.scales, &xq.scales), "{path:?} scales");
                    let got = matmul_with(&xp, &wq, path);
                    assert!(
                        same_bits(&want, &got),
                        "{path:?} differs at {rows} × {k} × {out}, {threads} threads"
                    );
                }
            }
        });
    }
}

#[test]
fn the_portable_path_is_the_plain_product_of_the_quantised_values() {
    // Against a reference written without the packing: each output is the dot product of
    // the row's and the channel's quantised values, brought back to scale.
    let (rows, k, out) = (13, 70, 67);
    let x = values(11, rows * k);
    let w = values(12, out * k);
    let y = matmul_with(
        &QuantizedRows::new_with(&x, k, Path::Portable),
        &QuantizedMatrix::new(&w, out, k),
        Path::Portable,
    );
    let mut qx = vec![0i8; k];
    let mut qw = vec![0i8; k];
    for r in 0..rows {
        let xs = quantize_row(&x[r * k..][..k], &mut qx);
        for o in 0..out {
            let ws = quantize_row(&w[o * k..][..k], &mut qw);
            let acc: i32 = qx
                .iter()
                .zip(&qw)
                .map(|(&a, &b)| i32::from(a) * i32::from(b))
                .sum();
            assert_eq!(
                y[r * out + o].to_bits(),
                dequantize(acc, xs, ws).to_bits(),
                "{r},{o}"
            );
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
    let wq = QuantizedMatrix::new(&w, 2, k);
    for path in Path::available() {
        let y = matmul_with(&QuantizedRows::new_with(&x, k, path), &wq, path);
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
    assert!(quantize_row(&[1.0, f32::INFINITY], &mut [0, 0]).is_nan());
}

#[test]
fn quantising_rounds_half_to_even_within_the_levels() {
    // 127 / 254 = 0.5 exactly: 1 → 0.5·… the largest value maps to 127, halves to even.
    let x = [254.0, 1.0, 3.0, -1.0, -254.0];
    let mut q = [0i8; 5];
    let (scale, sum) = quantize(&x, &mut q);
    assert_eq!(q, [127, 0, 2, 0, -127]);
    assert_eq!(sum, 2);
    assert_eq!(scale, 2.0);
}
