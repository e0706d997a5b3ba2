//! The OCR half of `docket bench extract`: our OCR against `ocrmypdf --sidecar` on the same
//! files and languages, one file at a time.
//!
//! The files are the corpus PDFs none of whose pages has a text layer (scans, text drawn as
//! curves, a blank page) and the images found in the corpus and image folders (sniffed from
//! their bytes, so `typewriter.pdf`, a PNG, counts). "Ours" is the worker's whole extract step
//! on the file ([`extract::extract`]: the text-layer probe, then OCR), so its time includes
//! every process start. The reference is `ocrmypdf -l LANGS --force-ocr --sidecar` with the
//! languages our run used (its own default otherwise is English only), at its default settings.
//!
//! Agreement is 1 − the character edit distance between the two texts (whitespace runs folded
//! to one space) over the longer one's length. ocrmypdf runs twice per file, and its agreement
//! with itself is the yardstick: the aim is ours ≥ that − 0.05, at ≥ 0.8× its pages/s.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};

use docket::extract::{self, DocKind, ExtractSettings};

/// One file's OCR figures.
struct OcrRow {
    name: String,
    pages: usize,
    ours_s: f64,
    theirs_s: f64,
    agreement: f64,
    self_agreement: f64,
    languages: String,
}

/// The files OCR reads wholly: PDFs of `pdf_dir` needing OCR on every page, and images in
/// `pdf_dir` and `image_dir`.
pub(super) async fn files(
    pdf_dir: &Path,
    image_dir: &Path,
    limits: &ExtractSettings,
) -> Vec<PathBuf> {
    let mut chosen = Vec::new();
    for dir in [pdf_dir, image_dir] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        for path in paths {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let name = file_name(&path);
            let Ok(sniffed) = extract::sniff(&bytes, &name) else {
                continue;
            };
            let whole = match sniffed.kind {
                DocKind::Image => true,
                DocKind::Pdf if dir == pdf_dir => {
                    match extract::extract_text_layer(&bytes, &sniffed, limits).await {
                        // Scans: no page has any text layer. Garbage text layers are left
                        // out: what OCR reads there depends on fonts, not on the scan.
                        Ok(layer) => {
                            !layer.pages.is_empty()
                                && layer.unreadable.len() == layer.pages.len()
                                && layer
                                    .unreadable
                                    .iter()
                                    .all(|(_, problem)| *problem == extract::TextProblem::Empty)
                        }
                        Err(_) => false,
                    }
                }
                _ => false,
            };
            if whole && !chosen.contains(&path) {
                chosen.push(path);
            }
        }
    }
    chosen
}

/// Runs both sides on `files`; prints a table and returns the JSON figures.
pub(super) async fn compare(
    files: &[PathBuf],
    limits: &ExtractSettings,
    ocrmypdf: &Path,
    timeout: Duration,
) -> anyhow::Result<Value> {
    if files.is_empty() {
        println!("OCR: no scanned PDFs or images found");
        return Ok(json!({ "skipped": "no files" }));
    }
    let work = tempfile_dir()?;
    println!();
    println!(
        "{:<34} {:>5} {:>9} {:>11} {:>9} {:>9}  languages",
        "OCR file", "pages", "docket s", "ocrmypdf s", "agree", "self"
    );
    let mut rows = Vec::new();
    for path in files {
        let bytes = tokio::fs::read(path)
            .await
            .with_context(|| format!("reading {}", path.display()))?;
        let name = file_name(path);
        let started = Instant::now();
        let result = match extract::sniff(&bytes, &name) {
            Ok(sniffed) => extract::extract(&bytes, &sniffed, limits).await,
            Err(err) => Err(err),
        };
        let ours_s = started.elapsed().as_secs_f64();
        let (ours_text, pages, languages, is_image) = match &result {
            Ok(extracted) => (
                extracted
                    .pages
                    .iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                extracted.pages.len(),
                extracted
                    .ocr
                    .as_ref()
                    .map(|run| run.languages.join("+"))
                    .filter(|l| !l.is_empty())
                    .unwrap_or_else(|| "eng".into()),
                extracted.extractor == extract::Extractor::Ocr,
            ),
            Err(err) => {
                println!("{name}: docket failed: {err}");
                continue;
            }
        };
        let mut texts = Vec::new();
        let mut theirs_s = 0.0;
        for round in 0..2 {
            let started = Instant::now();
            let text = run_ocrmypdf(
                ocrmypdf, path, is_image, &languages, &work.0, round, timeout,
            )
            .await;
            if round == 0 {
                theirs_s = started.elapsed().as_secs_f64();
            }
            match text {
                Ok(text) => texts.push(text),
                Err(err) => println!("{name}: ocrmypdf failed: {err:#}"),
            }
        }
        let Some(reference) = texts.first() else {
            continue;
        };
        let row = OcrRow {
            name: name.clone(),
            pages,
            ours_s,
            theirs_s,
            agreement: agreement(&ours_text, reference),
            self_agreement: texts
                .get(1)
                .map_or(f64::NAN, |again| agreement(again, reference)),
            languages,
        };
        println!(
            "{:<34} {:>5} {:>9.2} {:>11.2} {:>9.3} {:>9.3}  {}",
            row.name,
            row.pages,
            row.ours_s,
            row.theirs_s,
            row.agreement,
            row.self_agreement,
            row.languages
        );
        rows.push(row);
    }
    let pages: usize = rows.iter().map(|r| r.pages).sum();
    let ours_s: f64 = rows.iter().map(|r| r.ours_s).sum();
    let theirs_s: f64 = rows.iter().map(|r| r.theirs_s).sum();
    let mean = |f: fn(&OcrRow) -> f64| {
        let values: Vec<f64> = rows.iter().map(f).filter(|v| v.is_finite()).collect();
        values.iter().sum::<f64>() / values.len().max(1) as f64
    };
    let agreement = mean(|r| r.agreement);
    let self_agreement = mean(|r| r.self_agreement);
    let ours_pps = pages as f64 / ours_s.max(1e-9);
    let theirs_pps = pages as f64 / theirs_s.max(1e-9);
    let speed_ratio = ours_pps / theirs_pps.max(1e-12);
    println!(
        "OCR: {pages} pages; docket {ours_pps:.3} pages/s, ocrmypdf {theirs_pps:.3} pages/s \
         (ratio {speed_ratio:.2}); agreement {agreement:.3}, ocrmypdf with itself {self_agreement:.3}"
    );
    let round3 = |v: f64| (v * 1000.0).round() / 1000.0;
    Ok(json!({
        "files": rows.len(),
        "pages": pages,
        "docket_pages_per_s": round3(ours_pps),
        "ocrmypdf_pages_per_s": round3(theirs_pps),
        "speed_ratio": round3(speed_ratio),
        "agreement": round3(agreement),
        "ocrmypdf_self_agreement": round3(self_agreement),
    }))
}

/// `ocrmypdf --sidecar` on one file; the text it recognised.
async fn run_ocrmypdf(
    program: &Path,
    input: &Path,
    is_image: bool,
    languages: &str,
    work: &Path,
    round: usize,
    timeout: Duration,
) -> anyhow::Result<String> {
    let stem = format!("{}-{round}", file_name(input));
    let sidecar = work.join(format!("{stem}.txt"));
    let output = work.join(format!("{stem}.pdf"));
    let mut command = tokio::process::Command::new(program);
    command
        .arg("-q")
        .arg("-l")
        .arg(languages)
        .arg("--force-ocr");
    if is_image {
        // Images without a resolution tag are refused otherwise.
        command.arg("--image-dpi").arg("300");
    }
    command
        .arg("--sidecar")
        .arg(&sidecar)
        .arg(input)
        .arg(&output)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let finished = tokio::time::timeout(timeout, command.output())
        .await
        .context("ocrmypdf timed out")?
        .context("starting ocrmypdf (scripts/install-deps.sh installs it)")?;
    if !finished.status.success() {
        let stderr = String::from_utf8_lossy(&finished.stderr);
        anyhow::bail!(
            "{}: {}",
            finished.status,
            stderr.lines().last().unwrap_or("")
        );
    }
    let text = tokio::fs::read_to_string(&sidecar)
        .await
        .context("reading the sidecar")?;
    Ok(text)
}

/// 1 − edit distance / longer length, over characters, whitespace runs folded.
fn agreement(a: &str, b: &str) -> f64 {
    let fold = |s: &str| -> Vec<char> {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            // ocrmypdf marks skipped or empty pages with a form feed and a notice; neither is text.
            .replace('\x0c', "")
            .chars()
            .collect()
    };
    let (a, b) = (fold(a), fold(b));
    let longer = a.len().max(b.len());
    if longer == 0 {
        return 1.0;
    }
    1.0 - edit_distance(&a, &b) as f64 / longer as f64
}

/// Levenshtein distance with two rows.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A scratch directory for ocrmypdf's outputs, removed when dropped.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> anyhow::Result<ScratchDir> {
    let path = std::env::temp_dir().join(format!("docket-bench-ocr-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir(&path).context("creating a scratch directory")?;
    Ok(ScratchDir(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_is_one_minus_the_normalised_edit_distance() {
        assert_eq!(agreement("the  cat\nsat", "the cat sat"), 1.0);
        // One substitution in eleven characters.
        let value = agreement("the cat sat", "the bat sat");
        assert!((value - (1.0 - 1.0 / 11.0)).abs() < 1e-9);
        assert_eq!(agreement("", ""), 1.0);
        assert_eq!(agreement("abc", ""), 0.0);
    }
}
