//! `docket bench evidence`: do chunks keep whole the sentences that answer questions?
//!
//! Every file named by the evaluation set (`queries.tsv`: each row has the sentence from its
//! file that answers the query) goes through the real extract step ([`extract::extract`], the
//! isolated child, OCR included) and the real chunker (default settings, the tokenizer-free
//! token estimate), twice: with paragraphs rebuilt from the extractors' lines, and with the
//! line output as it was stored before (blank-line runs collapsed, nothing joined), the
//! reference. A row counts when its evidence, normalised as the evaluation's `check.py` does
//! (NFKC, lower case, every run of non-alphanumerics one space), lies inside one chunk's
//! normalised text. Rows whose evidence is not in the extracted document at all are counted
//! apart: no chunking can keep what extraction lost.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;
use unicode_normalization::UnicodeNormalization;

use docket::chunk::{ApproxTokens, ChunkConfig, chunk_pages};
use docket::extract::{self, ExtractSettings};

/// Options of `docket bench evidence`.
#[derive(Debug, clap::Args)]
pub struct EvidenceBench {
    /// The corpus the questions' `expected_file` paths are relative to.
    #[arg(long, default_value = "../shared/corpus")]
    pub corpus: PathBuf,
    /// The questions (TSV with a header; columns query, expected_file, page, evidence, …).
    #[arg(long, default_value = "../shared/eval/queries.tsv")]
    pub queries: PathBuf,
}

/// Counts for one way of storing the text.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    in_one_chunk: usize,
    in_document: usize,
}

/// Runs the benchmark.
pub async fn run(args: EvidenceBench) -> anyhow::Result<()> {
    let table = std::fs::read_to_string(&args.queries)
        .with_context(|| format!("reading {}", args.queries.display()))?;
    let mut rows: Vec<(String, String)> = Vec::new();
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() >= 4 {
            rows.push((fields[1].to_owned(), fields[3].to_owned()));
        }
    }
    let exe = std::env::current_exe().context("finding this binary for PDF isolation")?;
    let mut limits = ExtractSettings::new(exe);
    limits.timeout = Duration::from_secs(60);

    let mut by_file: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (file, evidence) in &rows {
        by_file.entry(file).or_default().push(evidence);
    }
    let (mut rebuilt, mut lines) = (Tally::default(), Tally::default());
    let mut pdf = (Tally::default(), Tally::default(), 0usize);
    println!(
        "{:<44} {:>4} {:>14} {:>14}",
        "file", "rows", "paragraphs", "line output"
    );
    for (file, evidences) in &by_file {
        let path = args.corpus.join(file);
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut outcome = Vec::new();
        for paragraphs in [true, false] {
            limits.paragraphs = paragraphs;
            let chunks = chunk_texts(&bytes, file, &limits).await;
            let document = normalise(&chunks.join(" "));
            let chunks: Vec<String> = chunks.iter().map(|c| normalise(c)).collect();
            let mut tally = Tally::default();
            for evidence in evidences {
                let wanted = normalise(evidence);
                tally.in_document += usize::from(document.contains(&wanted));
                tally.in_one_chunk += usize::from(chunks.iter().any(|c| c.contains(&wanted)));
            }
            outcome.push(tally);
        }
        let is_pdf = file.ends_with(".pdf");
        for (total, tally) in [(&mut rebuilt, outcome[0]), (&mut lines, outcome[1])] {
            total.in_one_chunk += tally.in_one_chunk;
            total.in_document += tally.in_document;
        }
        if is_pdf {
            pdf.0.in_one_chunk += outcome[0].in_one_chunk;
            pdf.0.in_document += outcome[0].in_document;
            pdf.1.in_one_chunk += outcome[1].in_one_chunk;
            pdf.1.in_document += outcome[1].in_document;
            pdf.2 += evidences.len();
        }
        println!(
            "{:<44} {:>4} {:>8}/{:<5} {:>8}/{:<5}",
            file,
            evidences.len(),
            outcome[0].in_one_chunk,
            outcome[0].in_document,
            outcome[1].in_one_chunk,
            outcome[1].in_document,
        );
    }
    let share = |n: usize, of: usize| n as f64 / of.max(1) as f64;
    let total = rows.len();
    println!();
    println!("cells: evidence inside one chunk / evidence anywhere in the extracted text");
    for (label, tally, of) in [
        ("paragraphs rebuilt", rebuilt, total),
        ("line output (before)", lines, total),
        ("PDFs, paragraphs", pdf.0, pdf.2),
        ("PDFs, line output", pdf.1, pdf.2),
    ] {
        println!(
            "{label:<22} {:>3} of {of:<3} rows in one chunk ({:.3}); of those extracted {:.3}",
            tally.in_one_chunk,
            share(tally.in_one_chunk, of),
            share(tally.in_one_chunk, tally.in_document),
        );
    }
    println!(
        "{}",
        json!({
            "bench": "evidence",
            "rows": total,
            "pdf_rows": pdf.2,
            "in_one_chunk": round(share(rebuilt.in_one_chunk, total)),
            "in_one_chunk_of_extracted": round(share(rebuilt.in_one_chunk, rebuilt.in_document)),
            "line_output_in_one_chunk": round(share(lines.in_one_chunk, total)),
            "pdf_in_one_chunk": round(share(pdf.0.in_one_chunk, pdf.2)),
            "pdf_line_output_in_one_chunk": round(share(pdf.1.in_one_chunk, pdf.2)),
            "extracted": round(share(rebuilt.in_document, total)),
        })
    );
    Ok(())
}

/// The chunk texts of one file, as the pipeline would store them; none when extraction fails.
async fn chunk_texts(bytes: &[u8], name: &str, limits: &ExtractSettings) -> Vec<String> {
    let extracted = match extract::sniff(bytes, name) {
        Ok(sniffed) => extract::extract(bytes, &sniffed, limits).await,
        Err(err) => Err(err),
    };
    match extracted {
        Ok(extracted) => chunk_pages(&extracted.pages, &ChunkConfig::default(), &ApproxTokens)
            .into_iter()
            .map(|c| c.text)
            .collect(),
        Err(err) => {
            println!("{name}: {err}");
            Vec::new()
        }
    }
}

/// `check.py`'s `normalise`: NFKC, lower case, every run of non-alphanumerics one space.
fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.nfkc().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    out.trim().to_owned()
}

fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn normalising_matches_check_py() {
        assert_eq!(
            normalise("  The ﬁle’s\n“Customize”  "),
            "the file s customize"
        );
    }
}
