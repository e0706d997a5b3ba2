//! `docket bench extract`: our PDF extract step side by side with poppler's `pdftotext` on the
//! same files, one file at a time, each under the same wall-clock limit; then OCR against
//! `ocrmypdf` ([`super::ocr`]).
//!
//! "Our step" is what a worker's extract job runs: [`docket::extract::sniff()`] then
//! [`docket::extract::extract_text_layer`] with real [`ExtractSettings`] (the isolated
//! `docket __extract-pdf` child is this very binary; `pdftotext` first, `pdf-extract` where
//! poppler fails or leaves garbage pages), so its time includes the process starts, the
//! isolation and any second extractor. Pages that need OCR are counted in its verdict but read
//! in the OCR half, which `pdftotext` has no counterpart for. The reference is a plain
//! `pdftotext -enc UTF-8 FILE -`.
//!
//! Figures over the whole set: MB/s = all input bytes / total time of that extractor (failures
//! included, since their time is spent too); pages/s = pages *with text* it produced / total
//! time. `ratio` is ours over `pdftotext` in MB/s (the same bytes, so it is the inverse time
//! ratio); above 1 means we are faster.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;

use docket::extract::{self, ExtractSettings};

/// Options of `docket bench extract`.
#[derive(Debug, clap::Args)]
pub struct ExtractBench {
    /// Folder of PDFs (files ending in .pdf, not walked recursively).
    #[arg(long, default_value = "../shared/corpus/pdf")]
    pub corpus: PathBuf,

    /// Wall-clock limit of each extractor per file, in seconds (the worker default is 60).
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,

    /// Poppler's `pdftotext` (a path or a name on PATH), for both our extractor and the reference.
    #[arg(long, default_value = "pdftotext")]
    pub pdftotext: PathBuf,

    /// A folder searched for images (PNG, JPEG, TIFF, by their bytes) for the OCR half.
    #[arg(long, default_value = "../shared/corpus/malformed")]
    pub images: PathBuf,

    /// The OCR reference (`ocrmypdf --sidecar`).
    #[arg(long, default_value = "ocrmypdf")]
    pub ocrmypdf: PathBuf,

    /// Skip the OCR half.
    #[arg(long)]
    pub no_ocr: bool,

    /// Instead of PDFs: the office, e-mail and Hangul readers against a reference per format
    /// ([`super::formats`]), on `--office`.
    #[arg(long)]
    pub formats: bool,

    /// The office corpus, one folder per format (with `--formats`).
    #[arg(long, default_value = "../shared/corpus/office")]
    pub office: PathBuf,

    /// The venv of the Python references (with `--formats`; created when missing).
    #[arg(long, default_value = ".docket/bench-formats-venv")]
    pub formats_venv: PathBuf,
}

/// What one extractor made of one file.
#[derive(Debug, Clone)]
struct Run {
    elapsed: Duration,
    /// Pages with non-blank text.
    pages: usize,
    /// `pdf-extract` / `pdftotext` on success, the failure code otherwise.
    verdict: String,
    ok: bool,
}

/// Runs the benchmark.
pub async fn run(args: ExtractBench) -> anyhow::Result<()> {
    if args.formats {
        let timeout = Duration::from_secs(args.timeout_secs.max(1));
        return super::formats::run(&args.office, &args.formats_venv, timeout).await;
    }
    let files = match pdf_files(&args.corpus) {
        Ok(files) if !files.is_empty() => files,
        Ok(_) | Err(_) => {
            let reason = format!("no PDFs in {}", args.corpus.display());
            println!("bench extract skipped: {reason} (give the corpus with --corpus DIR)");
            println!("{}", json!({ "bench": "extract", "skipped": reason }));
            return Ok(());
        }
    };
    let exe = std::env::current_exe().context("finding this binary for PDF isolation")?;
    let mut limits = ExtractSettings::new(exe);
    limits.timeout = Duration::from_secs(args.timeout_secs.max(1));
    limits.pdftotext = args.pdftotext.clone();

    println!(
        "{:<44} {:>8}  {:>5} {:>9} {:<24} {:>5} {:>9} {:<12}",
        "file", "KiB", "pages", "docket ms", "docket verdict", "pages", "poppler ms", "poppler"
    );
    let mut total_bytes: u64 = 0;
    let (mut ours_total, mut theirs_total) = (Totals::default(), Totals::default());
    let mut by_extractor: std::collections::BTreeMap<String, usize> = Default::default();
    for path in &files {
        let bytes = tokio::fs::read(path)
            .await
            .with_context(|| format!("reading {}", path.display()))?;
        total_bytes += bytes.len() as u64;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let ours = run_ours(&bytes, &name, &limits).await;
        let theirs = run_pdftotext(path, &args.pdftotext, limits.timeout).await;
        *by_extractor.entry(ours.verdict.clone()).or_default() += 1;
        ours_total.add(&ours);
        theirs_total.add(&theirs);
        println!(
            "{:<44} {:>8.1}  {:>5} {:>9.1} {:<24} {:>5} {:>9.1} {:<12}",
            truncate(&name, 44),
            bytes.len() as f64 / 1024.0,
            ours.pages,
            ours.elapsed.as_secs_f64() * 1e3,
            ours.verdict,
            theirs.pages,
            theirs.elapsed.as_secs_f64() * 1e3,
            theirs.verdict,
        );
    }
    let mb = total_bytes as f64 / 1e6;
    let rate = |totals: &Totals| {
        let secs = totals.elapsed.as_secs_f64().max(1e-9);
        (totals.pages as f64 / secs, mb / secs)
    };
    let (ours_pps, ours_mbps) = rate(&ours_total);
    let (theirs_pps, theirs_mbps) = rate(&theirs_total);
    let ratio = ours_mbps / theirs_mbps.max(1e-12);
    let pages_ratio = ours_pps / theirs_pps.max(1e-12);
    println!();
    println!(
        "{} files, {mb:.2} MB; timeout {} s per extractor",
        files.len(),
        limits.timeout.as_secs()
    );
    println!(
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "extractor", "total s", "pages", "pages/s", "MB/s", "failures"
    );
    for (label, totals, pps, mbps) in [
        ("docket", &ours_total, ours_pps, ours_mbps),
        ("pdftotext", &theirs_total, theirs_pps, theirs_mbps),
    ] {
        println!(
            "{:<12} {:>10.2} {:>10} {:>10.1} {:>10.2} {:>9}",
            label,
            totals.elapsed.as_secs_f64(),
            totals.pages,
            pps,
            mbps,
            totals.failures
        );
    }
    println!("ratio docket/pdftotext: {ratio:.3} (MB/s), {pages_ratio:.3} (pages/s)");
    let verdicts: Vec<String> = by_extractor
        .iter()
        .map(|(verdict, n)| format!("{verdict} {n}"))
        .collect();
    println!("docket verdicts: {}", verdicts.join(", "));
    let ocr = if args.no_ocr {
        json!({ "skipped": "--no-ocr" })
    } else {
        let files = super::ocr::files(&args.corpus, &args.images, &limits).await;
        super::ocr::compare(&files, &limits, &args.ocrmypdf, limits.timeout * 10).await?
    };
    println!(
        "{}",
        json!({
            "bench": "extract",
            "files": files.len(),
            "bytes": total_bytes,
            "timeout_s": limits.timeout.as_secs(),
            "docket_s": round(ours_total.elapsed.as_secs_f64()),
            "docket_pages": ours_total.pages,
            "docket_pages_per_s": round(ours_pps),
            "docket_mb_per_s": round(ours_mbps),
            "docket_failures": ours_total.failures,
            "docket_verdicts": by_extractor,
            "pdftotext_s": round(theirs_total.elapsed.as_secs_f64()),
            "pdftotext_pages": theirs_total.pages,
            "pdftotext_pages_per_s": round(theirs_pps),
            "pdftotext_mb_per_s": round(theirs_mbps),
            "pdftotext_failures": theirs_total.failures,
            "pages_ratio": round(pages_ratio),
            "ratio": round(ratio),
            "ocr": ocr,
        })
    );
    Ok(())
}

#[derive(Debug, Default)]
struct Totals {
    elapsed: Duration,
    pages: usize,
    failures: usize,
}

impl Totals {
    fn add(&mut self, run: &Run) {
        self.elapsed += run.elapsed;
        self.pages += run.pages;
        self.failures += usize::from(!run.ok);
    }
}

/// The worker's extract job on one file: the text layer, with the pages left for OCR named
/// in the verdict.
async fn run_ours(bytes: &[u8], name: &str, limits: &ExtractSettings) -> Run {
    let started = Instant::now();
    let result = match extract::sniff(bytes, name) {
        Ok(sniffed) => extract::extract_text_layer(bytes, &sniffed, limits).await,
        Err(err) => Err(err),
    };
    let elapsed = started.elapsed();
    match result {
        Ok(extracted) => Run {
            elapsed,
            pages: extracted
                .pages
                .iter()
                .filter(|p| !p.text.trim().is_empty())
                .count(),
            verdict: if extracted.unreadable.is_empty() {
                extracted.extractor.as_str().to_owned()
            } else {
                format!(
                    "{}, OCR {}",
                    extracted.extractor.as_str(),
                    extracted.unreadable.len()
                )
            },
            ok: true,
        },
        Err(err) => Run {
            elapsed,
            pages: 0,
            verdict: err.code().to_owned(),
            ok: false,
        },
    }
}

/// `pdftotext -enc UTF-8 FILE -` under `timeout`: ok with text, `no_text`, `exit N` or
/// `timeout`.
async fn run_pdftotext(path: &Path, program: &Path, timeout: Duration) -> Run {
    let started = Instant::now();
    let child = tokio::process::Command::new(program)
        .arg("-enc")
        .arg("UTF-8")
        .arg(path)
        .arg("-")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn();
    let failed = |verdict: String| Run {
        elapsed: started.elapsed(),
        pages: 0,
        verdict,
        ok: false,
    };
    let child = match child {
        Ok(child) => child,
        Err(err) => return failed(format!("spawn: {}", err.kind())),
    };
    // On timeout the future (and with it the child, kill_on_drop) is dropped: the process dies.
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(err)) => return failed(format!("wait: {}", err.kind())),
        Err(_) => return failed("timeout".into()),
    };
    if !output.status.success() {
        return failed(match output.status.code() {
            Some(code) => format!("exit {code}"),
            None => "killed".into(),
        });
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let pages = text
        .split('\x0c')
        .filter(|page| !page.trim().is_empty())
        .count();
    Run {
        elapsed: started.elapsed(),
        pages,
        verdict: if pages == 0 {
            "no_text".into()
        } else {
            "text".into()
        },
        ok: pages > 0,
    }
}

/// The `.pdf` files directly in `dir`, by name.
fn pdf_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_file()
                && path
                    .extension()
                    .is_some_and(|ext| ext.eq_ignore_ascii_case("pdf"))
        })
        .collect();
    files.sort();
    Ok(files)
}

fn truncate(name: &str, width: usize) -> String {
    if name.chars().count() <= width {
        return name.to_owned();
    }
    let mut short: String = name.chars().take(width - 1).collect();
    short.push('…');
    short
}

/// Three decimals are plenty for comparing runs and keep the JSON line short.
fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}
