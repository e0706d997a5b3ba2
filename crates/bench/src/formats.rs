//! `docket bench extract --formats`: docket's readers of office, e-mail and Hangul formats
//! against a reference extractor per format, on the office corpus (one folder per format).
//!
//! "Ours" is the reader the extract step runs for the file, called in-process on the bytes; each
//! file is read repeatedly until 0.2 s have passed (at most 50 times), so small files are timed
//! above the clock's noise. The references are separate programs, timed once per file with
//! their start-up included, as a person would run them: `pandoc -t plain` (Debian) for RTF,
//! `hwp5txt` (PyPI `pyhwp`) for HWP, `xlrd` for XLS and Python's own `email` package for EML,
//! pandoc for DOCX/ODT/EPUB, `openpyxl` for XLSX and `python-pptx` for PPTX, the Python ones
//! in the bench's venv. Formats without a reference here (CSV, legacy `.doc`, ODS, ODP, HWPX)
//! report speed only. The zip family goes through sniffing and [`office::read`], as the
//! extract step does.
//!
//! Agreement: both texts with whitespace runs folded to one space, then the Dice coefficient of
//! their character-trigram multisets (2·|A∩B| / (|A|+|B|)): linear in the text, so the
//! 1.46M-character HWP report is compared too, and insensitive to block order (a table placed
//! before or after its caption). Linearised table rows (`header: value`) repeat headers the
//! references print once, which lowers agreement on table-heavy files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use docket::extract::{DocKind, ExtractError, Section, csv, email, office, ole, rtf, sniff};

/// How long each file is read by ours, at least (and at most [`MAX_REPEATS`] times).
const MIN_TIMING: Duration = Duration::from_millis(200);
const MAX_REPEATS: u32 = 50;

/// The reference's Python, for XLS (xlrd) and EML (stdlib `email`).
const PYTHON_XLS: &str = r#"
import sys, xlrd
book = xlrd.open_workbook(sys.argv[1])
for sheet in book.sheets():
    print(sheet.name)
    for r in range(sheet.nrows):
        print(" ".join(str(v) for v in sheet.row_values(r) if str(v) != ""))
"#;
const PYTHON_EML: &str = r#"
import sys, email
from email import policy
msg = email.message_from_bytes(open(sys.argv[1], "rb").read(), policy=policy.default)
for h in ("From", "To", "Date", "Subject"):
    if msg[h] is not None:
        print(f"{h}: {msg[h]}")
body = msg.get_body(preferencelist=("plain", "html"))
if body is not None:
    print(body.get_content())
"#;
const PYTHON_XLSX: &str = r#"
import sys, openpyxl
book = openpyxl.load_workbook(sys.argv[1], data_only=True, read_only=True)
for sheet in book.worksheets:
    print(sheet.title)
    for row in sheet.iter_rows(values_only=True):
        print(" ".join(str(v) for v in row if v is not None))
"#;
const PYTHON_PPTX: &str = r#"
import sys, pptx
deck = pptx.Presentation(sys.argv[1])
def shape_text(shape):
    if shape.has_text_frame:
        print(shape.text_frame.text)
    if getattr(shape, "has_table", False) and shape.has_table:
        for row in shape.table.rows:
            print(" ".join(cell.text for cell in row.cells))
    for inner in getattr(shape, "shapes", []):
        shape_text(inner)
for slide in deck.slides:
    for shape in slide.shapes:
        shape_text(shape)
    if slide.has_notes_slide:
        print(slide.notes_slide.notes_text_frame.text)
"#;
/// The PyPI packages of the references.
pub const VENV_PACKAGES: &[&str] = &["pyhwp", "six", "xlrd", "openpyxl", "python-pptx"];

/// One format's totals.
#[derive(Debug, Default)]
struct Totals {
    files: usize,
    bytes: u64,
    ours_secs: f64,
    ours_ok: usize,
    reference_secs: f64,
    reference_files: usize,
    reference_bytes: u64,
    agreements: Vec<f64>,
}

/// Runs the formats bench over `corpus`, the references from `venv` (created when missing).
pub async fn run(corpus: &Path, venv: &Path, timeout: Duration) -> anyhow::Result<()> {
    let python = crate::venv_with(venv, VENV_PACKAGES).await?;
    let (mut files, skipped): (Vec<_>, Vec<_>) = corpus_files(corpus)?
        .into_iter()
        .partition(|(format, _)| WIRED.contains(&format.as_str()));
    files.sort();
    let mut skipped: Vec<String> = skipped.into_iter().map(|(format, _)| format).collect();
    skipped.sort();
    skipped.dedup();
    let mut totals: HashMap<String, Totals> = HashMap::new();
    println!(
        "{:<48} {:>9} {:>10} {:>10} {:>7}  verdict",
        "file", "KB", "ours ms", "ref ms", "agree"
    );
    for (format, path) in &files {
        let bytes = tokio::fs::read(path).await?;
        let (ours, ours_time) = time_ours(format, path, &bytes);
        let reference = reference(format, path, &python, timeout).await;
        let entry = totals.entry(format.clone()).or_default();
        entry.files += 1;
        entry.bytes += bytes.len() as u64;
        entry.ours_secs += ours_time.as_secs_f64();
        entry.ours_ok += usize::from(ours.is_ok());
        let mut agreement = None;
        // A reference that failed (not installed, or refusing the file) says nothing about its
        // speed: only the runs that gave text count.
        if let Some((Some(text), elapsed)) = &reference {
            entry.reference_secs += elapsed.as_secs_f64();
            entry.reference_files += 1;
            entry.reference_bytes += bytes.len() as u64;
            if let Ok(ours) = &ours {
                let value = trigram_dice(ours, text);
                entry.agreements.push(value);
                agreement = Some(value);
            }
        }
        println!(
            "{:<48} {:>9.1} {:>10.2} {:>10} {:>7}  {}",
            short_name(corpus, path),
            bytes.len() as f64 / 1024.0,
            ours_time.as_secs_f64() * 1e3,
            reference
                .as_ref()
                .map_or("-".into(), |(_, t)| format!("{:.0}", t.as_secs_f64() * 1e3)),
            agreement.map_or("-".into(), |a| format!("{a:.3}")),
            match &ours {
                Ok(text) => format!("ok, {} chars", text.chars().count()),
                Err(error) => format!("{}: {error}", error.code()),
            }
        );
    }
    println!("{}", summary(&totals, &skipped));
    Ok(())
}

/// The table per format and the JSON line.
fn summary(totals: &HashMap<String, Totals>, skipped: &[String]) -> String {
    let mut names: Vec<&String> = totals.keys().collect();
    names.sort();
    let mut table = format!(
        "\n{:<6} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}\n",
        "format", "files", "ours f/s", "ours MB/s", "ref f/s", "ref MB/s", "ratio", "agree", "ok"
    );
    let mut json_formats = serde_json::Map::new();
    for name in names {
        let t = &totals[name];
        let mb = t.bytes as f64 / 1e6;
        let ours_fps = t.files as f64 / t.ours_secs.max(1e-9);
        let ours_mbps = mb / t.ours_secs.max(1e-9);
        let reference = (t.reference_files > 0).then(|| {
            let fps = t.reference_files as f64 / t.reference_secs.max(1e-9);
            let mbps = t.reference_bytes as f64 / 1e6 / t.reference_secs.max(1e-9);
            (fps, mbps)
        });
        let ratio = reference.map(|(_, mbps)| ours_mbps / mbps);
        let agreement = (!t.agreements.is_empty())
            .then(|| t.agreements.iter().sum::<f64>() / t.agreements.len() as f64);
        let cell =
            |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
        table.push_str(&format!(
            "{:<6} {:>5} {:>9.1} {:>9.2} {:>9} {:>9} {:>9} {:>7} {:>4}/{}\n",
            name,
            t.files,
            ours_fps,
            ours_mbps,
            cell(reference.map(|r| r.0), 1),
            cell(reference.map(|r| r.1), 2),
            cell(ratio, 1),
            cell(agreement, 3),
            t.ours_ok,
            t.files
        ));
        json_formats.insert(
            name.clone(),
            json!({
                "files": t.files,
                "ours_ok": t.ours_ok,
                "ours_files_per_s": round(ours_fps),
                "ours_mb_per_s": round(ours_mbps),
                "reference_files_per_s": reference.map(|r| round(r.0)),
                "reference_mb_per_s": reference.map(|r| round(r.1)),
                "speed_ratio": ratio.map(round),
                "agreement": agreement.map(round),
            }),
        );
    }
    if !skipped.is_empty() {
        table.push_str(&format!(
            "not measured (no reader wired here): {}\n",
            skipped.join(", ")
        ));
    }
    let line = json!({
        "bench": "extract-formats",
        "formats": Value::Object(json_formats),
        "not_measured": skipped,
    });
    format!("{table}\n{line}")
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// Ours on one file, repeated for a stable time: the text (sections joined) or the error, and
/// the time of one read.
fn time_ours(format: &str, path: &Path, bytes: &[u8]) -> (Result<String, ExtractError>, Duration) {
    let started = Instant::now();
    let mut runs = 0u32;
    let mut result;
    loop {
        result = read(format, path, bytes);
        runs += 1;
        if started.elapsed() >= MIN_TIMING || runs >= MAX_REPEATS {
            break;
        }
    }
    (result, started.elapsed() / runs)
}

/// The corpus folders measured: every format docket reads.
const WIRED: &[&str] = &[
    "hwp", "doc", "xls", "rtf", "eml", "csv", "docx", "pptx", "xlsx", "odt", "ods", "odp", "epub",
    "hwpx",
];

/// The reader the extract step uses for the file.
fn read(format: &str, path: &Path, bytes: &[u8]) -> Result<String, ExtractError> {
    let sections: Vec<Section> = match format {
        "hwp" | "doc" | "xls" => ole::extract_ole(bytes)?,
        "rtf" => rtf::extract_rtf(bytes)?,
        "eml" => email::extract_email(bytes, 0)?.sections,
        "csv" => {
            let name = path.to_string_lossy();
            let sniffed = sniff(bytes, &name)?;
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            csv::extract_csv(bytes, sniffed.encoding, stem.as_deref().unwrap_or("CSV"))?
        }
        // The zip family, through the detection and readers the extract step uses.
        _ => match sniff(bytes, &path.to_string_lossy())?.kind {
            DocKind::Package(package) => office::read(package, bytes)?,
            _ => {
                return Err(ExtractError::Unsupported {
                    detected: "not a zip-family document",
                });
            }
        },
    };
    Ok(sections
        .into_iter()
        .map(|s| s.text)
        .collect::<Vec<_>>()
        .join("\n\n"))
}

/// The reference's text (None when it failed) and its time, or None without a reference.
async fn reference(
    format: &str,
    path: &Path,
    python: &Path,
    timeout: Duration,
) -> Option<(Option<String>, Duration)> {
    let hwp5txt = python.with_file_name("hwp5txt");
    let (program, args): (PathBuf, Vec<String>) = match format {
        "rtf" | "docx" | "odt" | "epub" => (
            "pandoc".into(),
            vec!["-f".into(), format.into(), "-t".into(), "plain".into()],
        ),
        "xlsx" => (python.into(), vec!["-c".into(), PYTHON_XLSX.into()]),
        "pptx" => (python.into(), vec!["-c".into(), PYTHON_PPTX.into()]),
        "hwp" => (hwp5txt, Vec::new()),
        "xls" => (python.into(), vec!["-c".into(), PYTHON_XLS.into()]),
        "eml" => (python.into(), vec!["-c".into(), PYTHON_EML.into()]),
        _ => return None,
    };
    let started = Instant::now();
    let output = tokio::process::Command::new(&program)
        .args(&args)
        .arg(path)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(timeout, output).await;
    let elapsed = started.elapsed();
    let text = match output {
        Ok(Ok(out)) if out.status.success() => {
            Some(String::from_utf8_lossy(&out.stdout).into_owned())
        }
        _ => None,
    };
    Some((text, elapsed))
}

/// Files under `corpus/<format>/`, with their format (the folder's name).
fn corpus_files(corpus: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    for folder in std::fs::read_dir(corpus)? {
        let folder = folder?.path();
        if !folder.is_dir() {
            continue;
        }
        let format = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for file in std::fs::read_dir(&folder)? {
            let file = file?.path();
            if file.is_file() {
                files.push((format.clone(), file));
            }
        }
    }
    Ok(files)
}

fn short_name(corpus: &Path, path: &Path) -> String {
    path.strip_prefix(corpus)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// Dice coefficient of character-trigram multisets, whitespace runs folded to one space.
fn trigram_dice(a: &str, b: &str) -> f64 {
    let grams = |s: &str| -> HashMap<[char; 3], usize> {
        let folded: Vec<char> = s
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .collect();
        let mut counts = HashMap::new();
        for w in folded.windows(3) {
            *counts.entry([w[0], w[1], w[2]]).or_insert(0) += 1;
        }
        counts
    };
    let (a, b) = (grams(a), grams(b));
    let total: usize = a.values().sum::<usize>() + b.values().sum::<usize>();
    if total == 0 {
        return 1.0;
    }
    let common: usize = a
        .iter()
        .map(|(gram, n)| (*n).min(b.get(gram).copied().unwrap_or(0)))
        .sum();
    2.0 * common as f64 / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trigram_dice_folds_whitespace_and_counts_shared_trigrams() {
        assert_eq!(trigram_dice("the  cat\nsat", "the cat sat"), 1.0);
        assert_eq!(trigram_dice("abc", "xyz"), 0.0);
        let half = trigram_dice("abcd", "abcx");
        assert!((half - 0.5).abs() < 1e-9, "{half}");
    }
}
