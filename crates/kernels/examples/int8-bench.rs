//! Times the int8 product in isolation on the encoder's shapes (multilingual-e5-small: 384
//! hidden, 1536 inner): quantising and packing the activations, and the product, apart.
//!
//! Why: `docket bench embed` times the whole encoder; this says which part of a linear layer
//! the time goes to, and how close the product is to the CPU's 8-bit multiply-add rate.
//! Run: `cargo run --release -p docket-kernels --example int8-bench [THREADS]`.

use std::time::Instant;

use docket_kernels::int8::{self, Path, QuantizedMatrix, QuantizedRows};

fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut state = seed.wrapping_add(1);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// Seconds per call of `f`, repeated for at least a quarter of a second.
fn time(mut f: impl FnMut()) -> f64 {
    f();
    let started = Instant::now();
    let mut calls = 0u32;
    while started.elapsed().as_secs_f64() < 0.25 {
        f();
        calls += 1;
    }
    started.elapsed().as_secs_f64() / f64::from(calls)
}

fn main() {
    let threads = std::env::args()
        .nth(1)
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    pool.install(|| {
        println!("threads {threads}, path {:?}", Path::best());
        println!(
            "{:>6} {:>5} {:>5} | {:>9} {:>9} | {:>8}",
            "tokens", "k", "out", "quant µs", "gemm µs", "GMAC/s"
        );
        for tokens in [35, 260, 2240, 16640] {
            for (k, out) in [(384, 1152), (384, 384), (384, 1536), (1536, 384)] {
                let x = values(1, tokens * k);
                let w = QuantizedMatrix::new(&values(2, out * k), out, k);
                let q = time(|| drop(QuantizedRows::new(&x, k)));
                let xq = QuantizedRows::new(&x, k);
                let g = time(|| drop(int8::matmul(&xq, &w)));
                let macs = (tokens * k * out) as f64;
                println!(
                    "{tokens:>6} {k:>5} {out:>5} | {:>9.1} {:>9.1} | {:>8.1}",
                    q * 1e6,
                    g * 1e6,
                    macs / g / 1e9
                );
            }
        }
    });
}
