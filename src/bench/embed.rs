//! `docket bench embed`: the local embedder side by side with sentence-transformers (torch CPU)
//! on the same texts, in one run.
//!
//! Texts: 64 "short" texts of about 30 tokens and 64 "long" ones of about 250 (built from a
//! fixed list of sentences, measured with the model's own tokenizer). Each is embedded in
//! batches of 1, 16 and 64, on 1 and 2 threads; a cell repeats whole passes for at least
//! `--seconds` after a warm-up pass. Throughput is texts (chunks) per second and tokens per
//! second, special tokens included.
//!
//! Each thread count runs in its own child process (docket's with `RAYON_NUM_THREADS`, Python's
//! with `torch.set_num_threads`), because gemm reads its split from the environment once, and a
//! process cannot change its own environment safely. The Python side lives in its own venv,
//! created and filled from PyPI on first use (torch is large: this is not part of `make test`).
//!
//! The last line is JSON with both sides' cells and `ratio`: docket ÷ sentence-transformers in
//! texts per second at batch 64 on 2 threads, the lower of the short and long figures.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};

use crate::embed::{LocalConfig, LocalEmbedder};
use crate::pipeline::chunk::TokenCounter;

const BATCHES: [usize; 3] = [1, 16, 64];
const THREADS: [usize; 2] = [1, 2];
const TEXTS_PER_LENGTH: usize = 64;
const SHORT_TOKENS: usize = 30;
const LONG_TOKENS: usize = 250;

/// Options of `docket bench embed`.
#[derive(Debug, clap::Args)]
pub struct EmbedBench {
    /// The model directory (default: where scripts/get-model.sh installs it).
    #[arg(long, env = "DOCKET_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,

    /// Least seconds measured per cell.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,

    /// The venv of the sentence-transformers side (created when missing).
    #[arg(long, default_value = ".docket/bench-venv")]
    pub venv: PathBuf,

    /// Measure docket only.
    #[arg(long)]
    pub no_reference: bool,

    /// Internal: be the docket child for this many threads, reading texts from `--texts`.
    #[arg(long, hide = true)]
    pub child_threads: Option<usize>,

    /// Internal: the texts file of a child.
    #[arg(long, hide = true)]
    pub texts: Option<PathBuf>,
}

/// The texts every side embeds.
#[derive(serde::Serialize, serde::Deserialize)]
struct Texts {
    short: Vec<String>,
    long: Vec<String>,
    batches: Vec<usize>,
}

/// One measured cell, as both sides print it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Cell {
    length: String,
    batch: usize,
    threads: usize,
    texts: u64,
    tokens: u64,
    seconds: f64,
}

impl Cell {
    fn texts_per_second(&self) -> f64 {
        self.texts as f64 / self.seconds.max(1e-9)
    }
    fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.seconds.max(1e-9)
    }
}

/// Runs the benchmark (or, with `--child-threads`, one docket child).
pub async fn run(args: EmbedBench) -> anyhow::Result<()> {
    let model_dir = args
        .model_dir
        .clone()
        .unwrap_or_else(crate::config::default_model_dir);
    if let Some(threads) = args.child_threads {
        let texts = args.texts.context("--child-threads needs --texts")?;
        return tokio::task::spawn_blocking(move || {
            child(&model_dir, &texts, threads, args.seconds)
        })
        .await
        .context("the benchmark thread")?;
    }

    let model = LocalEmbedder::load(&LocalConfig {
        model_dir: model_dir.clone(),
        threads: 1,
    })?;
    let counter = model.token_counter();
    let texts = Texts {
        short: build_texts(&counter, SHORT_TOKENS),
        long: build_texts(&counter, LONG_TOKENS),
        batches: BATCHES.to_vec(),
    };
    let scratch = tempfile_path("docket-bench-embed", "json");
    std::fs::write(&scratch, serde_json::to_vec(&texts)?).context("writing the texts")?;

    let exe = std::env::current_exe().context("finding the docket binary")?;
    let mut docket = Vec::new();
    for threads in THREADS {
        eprintln!("bench embed: docket, {threads} thread(s)");
        let output = tokio::process::Command::new(&exe)
            .args(["bench", "embed", "--child-threads", &threads.to_string()])
            .arg("--texts")
            .arg(&scratch)
            .arg("--model-dir")
            .arg(&model_dir)
            .args(["--seconds", &args.seconds.to_string()])
            .env("RAYON_NUM_THREADS", threads.to_string())
            .output()
            .await
            .context("running the docket child")?;
        docket.extend(cells(&output, "docket child")?);
    }

    let mut reference = Vec::new();
    if !args.no_reference {
        let python = ensure_venv(&args.venv).await?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/bench-embed.py");
        for threads in THREADS {
            eprintln!("bench embed: sentence-transformers, {threads} thread(s)");
            let output = tokio::process::Command::new(&python)
                .arg(&script)
                .arg(&model_dir)
                .arg(&scratch)
                .arg(threads.to_string())
                .arg(args.seconds.to_string())
                .env("OMP_NUM_THREADS", threads.to_string())
                .env("MKL_NUM_THREADS", threads.to_string())
                .env("TOKENIZERS_PARALLELISM", "false")
                .output()
                .await
                .context("running the sentence-transformers side")?;
            reference.extend(cells(&output, "sentence-transformers")?);
        }
    }
    let _ = std::fs::remove_file(&scratch);
    report(&model.model_id(), &docket, &reference)
}

/// The docket child: embeds every cell for `threads` threads and prints one JSON line each.
fn child(model_dir: &Path, texts: &Path, threads: usize, seconds: f64) -> anyhow::Result<()> {
    let texts: Texts = serde_json::from_slice(&std::fs::read(texts).context("reading texts")?)?;
    let model = LocalEmbedder::load(&LocalConfig {
        model_dir: model_dir.to_owned(),
        threads,
    })?;
    let counter = model.token_counter();
    for (length, list) in [("short", &texts.short), ("long", &texts.long)] {
        let max = model.max_tokens();
        let tokens_per_pass: u64 = list
            .iter()
            .map(|t| (counter.count(t) + 2).min(max) as u64)
            .sum();
        for &batch in &texts.batches {
            let one_pass = || -> anyhow::Result<()> {
                for group in list.chunks(batch.max(1)) {
                    model.embed_blocking(group)?;
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

fn cells(output: &std::process::Output, who: &str) -> anyhow::Result<Vec<Cell>> {
    if !output.status.success() {
        bail!(
            "{who} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).with_context(|| format!("{who} printed {l:?}")))
        .collect()
}

/// The venv's Python, after creating the venv and installing torch and sentence-transformers
/// into it when they are missing. PyPI's torch wheel for Linux is the CUDA build: with its
/// nvidia-* dependencies it is several GB, but it runs on the CPU here like the CPU build.
async fn ensure_venv(venv: &Path) -> anyhow::Result<PathBuf> {
    let python = venv.join("bin/python");
    let ready = tokio::process::Command::new(&python)
        .args(["-c", "import sentence_transformers, torch"])
        .output()
        .await
        .is_ok_and(|o| o.status.success());
    if ready {
        return Ok(python);
    }
    eprintln!(
        "bench embed: installing torch and sentence-transformers into {} (several GB, once)",
        venv.display()
    );
    let status = tokio::process::Command::new("python3")
        .args(["-m", "venv"])
        .arg(venv)
        .status()
        .await
        .context("python3 -m venv")?;
    if !status.success() {
        bail!(
            "python3 -m venv {} failed (is python3-venv installed?)",
            venv.display()
        );
    }
    let status = tokio::process::Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "-q",
            "--disable-pip-version-check",
            "torch",
            "sentence-transformers",
        ])
        .status()
        .await
        .context("pip install")?;
    if !status.success() {
        bail!("installing torch and sentence-transformers failed");
    }
    Ok(python)
}

/// Texts of about `tokens` tokens each (special tokens included), made of whole sentences from
/// a fixed list, each text starting at a different sentence so no two are alike.
fn build_texts(counter: &dyn TokenCounter, tokens: usize) -> Vec<String> {
    (0..TEXTS_PER_LENGTH)
        .map(|i| {
            let mut text = String::new();
            let mut k = i;
            loop {
                let sentence = SENTENCES[k % SENTENCES.len()];
                let candidate = if text.is_empty() {
                    sentence.to_owned()
                } else {
                    format!("{text} {sentence}")
                };
                if counter.count(&candidate) + 2 > tokens && !text.is_empty() {
                    break;
                }
                text = candidate;
                k += 7;
            }
            text
        })
        .collect()
}

fn report(model_id: &str, docket: &[Cell], reference: &[Cell]) -> anyhow::Result<()> {
    let key = |c: &Cell| (c.length.clone(), c.batch, c.threads);
    let theirs: BTreeMap<_, _> = reference.iter().map(|c| (key(c), c)).collect();
    println!("model: {model_id}");
    println!(
        "{:<6} {:>5} {:>7} | {:>10} {:>11} | {:>10} {:>11} | {:>6}",
        "length", "batch", "threads", "docket/s", "tokens/s", "s-t/s", "tokens/s", "ratio"
    );
    let mut ratios = BTreeMap::new();
    for cell in docket {
        let other = theirs.get(&key(cell));
        let ratio = other.map(|o| cell.texts_per_second() / o.texts_per_second().max(1e-9));
        println!(
            "{:<6} {:>5} {:>7} | {:>10.1} {:>11.0} | {:>10} {:>11} | {:>6}",
            cell.length,
            cell.batch,
            cell.threads,
            cell.texts_per_second(),
            cell.tokens_per_second(),
            other.map_or("-".to_owned(), |o| format!("{:.1}", o.texts_per_second())),
            other.map_or("-".to_owned(), |o| format!("{:.0}", o.tokens_per_second())),
            ratio.map_or("-".to_owned(), |r| format!("{r:.2}")),
        );
        if cell.batch == 64 && cell.threads == 2 {
            ratios.insert(cell.length.clone(), ratio);
        }
    }
    let ratio = ratios
        .values()
        .flatten()
        .copied()
        .fold(None, |low: Option<f64>, r| {
            Some(low.map_or(r, |l| l.min(r)))
        });
    let figures = |cells: &[Cell]| -> serde_json::Value {
        cells
            .iter()
            .map(|c| {
                serde_json::json!({
                    "length": c.length, "batch": c.batch, "threads": c.threads,
                    "texts_per_s": (c.texts_per_second() * 10.0).round() / 10.0,
                    "tokens_per_s": c.tokens_per_second().round(),
                })
            })
            .collect()
    };
    println!(
        "{}",
        serde_json::json!({
            "bench": "embed",
            "model": model_id,
            "docket": figures(docket),
            "sentence_transformers": figures(reference),
            "ratio_short_b64_t2": ratios.get("short").copied().flatten(),
            "ratio_long_b64_t2": ratios.get("long").copied().flatten(),
            "ratio": ratio,
        })
    );
    Ok(())
}

fn tempfile_path(prefix: &str, ext: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "{prefix}-{}-{}.{ext}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ))
}

/// Varied English sentences; texts are built from them.
const SENTENCES: [&str; 24] = [
    "The invoice lists consulting hours, a travel allowance and a software licence.",
    "Payment is due within thirty days, and late payments accrue interest every month.",
    "Photosynthesis turns light into chemical energy stored in sugars.",
    "Chlorophyll absorbs mostly blue and red light while water is split to release oxygen.",
    "The committee postponed its decision on solar panels until the engineers report in spring.",
    "To reset the router, hold the button on the back for ten seconds until the lights flash.",
    "Medieval cathedrals took generations to build, and their styles changed along the way.",
    "Masons passed their knowledge from master to apprentice over many decades.",
    "The quarterly report shows revenue growing faster than costs in every region.",
    "A database index speeds up reads at the price of slower writes and more disk space.",
    "The recipe calls for two cups of flour, a pinch of salt and three eggs.",
    "Rain is expected over the weekend, with strong winds along the northern coast.",
    "The library extended its opening hours during the examination period.",
    "Each employee must complete the safety training before the end of the year.",
    "The museum's new wing displays ceramics from the early Bronze Age.",
    "Our support team answers questions by email within one working day.",
    "The contract may be terminated by either party with ninety days' written notice.",
    "Bees communicate the direction of flowers through a dance inside the hive.",
    "The train to the airport leaves every fifteen minutes from platform four.",
    "Version two of the API adds pagination and removes the deprecated search endpoint.",
    "The patient was advised to rest, drink fluids and return if the fever persists.",
    "Solar output peaks around noon, so batteries store the surplus for the evening.",
    "The novel follows three generations of a family running a small bakery.",
    "Warranty claims require the original receipt and the product's serial number.",
];
