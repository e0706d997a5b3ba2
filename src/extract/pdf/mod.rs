//! PDF extraction: poppler's `pdftotext`, then `pdf-extract` where poppler's answer leaves room
//! for a second opinion; both in an isolated child process.
//!
//! PDF parsers panic, loop or eat memory on hostile files, so none runs in the worker: the
//! worker re-runs its own binary as `docket __extract-pdf` ([`run_child`]), which caps its
//! address space and then either parses the PDF from stdin with `pdf-extract` (printing a JSON
//! report) or execs `pdftotext -enc UTF-8 <tmpfile> -` under that cap. The parent kills either
//! at the deadline.
//!
//! Which extractor, and the cheap probe that decides when to pay for both: `pdftotext` runs
//! first. On the corpus it is the faster of the two on every large file (GeoTopo's 117 pages:
//! 1.0 s against pdf-extract's 1.65 s, debian-faq, WARN, oblivoir 3–5×), it keeps word spacing
//! that pdf-extract breaks (`google-doc-document.pdf`: "Exa mp le do cumen t"), and with
//! poppler-data it reads CID-keyed CJK fonts that pdf-extract does not (`jo.pdf`,
//! `mixedfonts.pdf`). Its answer is the probe: when it opened the file and every page either
//! has usable text or none at all (a scan: no parser finds text there, OCR does), that is the
//! result and `pdf-extract` never runs. Only when `pdftotext` could not open the file (damaged,
//! crashed, timed out, out of memory) or returned pages of garbage or letterless text (a font
//! mapping another parser may read differently) does `pdf-extract` run too; then the reading
//! with fewer unusable pages wins, `pdftotext`'s on a tie. Each step gets the full timeout, so
//! a document can take up to twice [`ExtractSettings::timeout`]. An encrypted file stops at the
//! first verdict. When neither yields text the failure is classified: encrypted (by either)
//! first, then no text layer, then what `pdftotext`, the more forgiving parser, said;
//! `pdf-extract`'s verdict is used only when `pdftotext` itself could not run.

mod child;
pub(crate) mod process;

use std::path::PathBuf;

use tokio::process::Command;

pub use child::run_child;
use child::{ChildReport, ENV_EXEC_PDFTOTEXT, ENV_INPUT, ENV_MEMORY};
pub(crate) use child::{ENV_EXEC, EXIT_OUT_OF_MEMORY, EXIT_SETUP_FAILED};
use process::{Finished, Run};

use super::decode::normalize;
use super::paragraphs;
use super::quality::{self, TextProblem};
use super::{ExtractError, ExtractSettings, Extracted, Extractor, Page};

/// The most text a PDF may yield; a bomb that expands into gigabytes of text is cut off here
/// and reported as running out of memory.
const MAX_TEXT_BYTES: u64 = 64 << 20;
/// The hidden subcommand that runs [`run_child`].
pub const CHILD_SUBCOMMAND: &str = "__extract-pdf";

/// What one extractor made of the document.
#[derive(Debug)]
enum Attempt {
    /// Pages of text; `complete` is false when some pages failed, `unreadable` lists the pages
    /// without a usable text layer (their text is emptied).
    Text {
        pages: Vec<Page>,
        complete: bool,
        unreadable: Vec<(u32, TextProblem)>,
    },
    /// The document opened but yielded no pages.
    NoText,
    Encrypted,
    Malformed(String),
    Timeout,
    OutOfMemory,
    /// docket could not run the extractor; says nothing about the file.
    Internal(String),
}

/// Extracts the text layer of a PDF, page by page, with page numbers kept. Pages without a
/// usable text layer come back empty and listed in [`Extracted::unreadable`] (for OCR); a
/// document none of whose pages has text is still `Ok` here.
pub async fn extract_pdf(
    bytes: &[u8],
    limits: &ExtractSettings,
) -> Result<Extracted, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::Empty);
    }
    let poppler = run_pdftotext(bytes, limits).await;
    match &poppler {
        Attempt::Text { unreadable, .. }
            if unreadable
                .iter()
                .all(|(_, problem)| *problem == TextProblem::Empty) =>
        {
            return Ok(into_extracted(poppler, Extractor::Pdftotext));
        }
        Attempt::Encrypted => return Err(ExtractError::PdfEncrypted),
        _ => {}
    }
    tracing::debug!(outcome = ?summary(&poppler), "pdftotext left unusable pages or failed; trying pdf-extract");
    let ours = run_pdf_extract(bytes, limits).await;
    match (&ours, &poppler) {
        (
            Attempt::Text {
                complete: true,
                unreadable: better,
                ..
            },
            Attempt::Text {
                unreadable: worse, ..
            },
        ) if better.len() < worse.len() => Ok(into_extracted(ours, Extractor::PdfExtract)),
        (_, Attempt::Text { .. }) => Ok(into_extracted(poppler, Extractor::Pdftotext)),
        (Attempt::Text { .. }, _) => Ok(into_extracted(ours, Extractor::PdfExtract)),
        _ => Err(classify(ours, poppler)),
    }
}

fn into_extracted(attempt: Attempt, extractor: Extractor) -> Extracted {
    let (pages, unreadable) = match attempt {
        Attempt::Text {
            pages, unreadable, ..
        } => (pages, unreadable),
        _ => (Vec::new(), Vec::new()),
    };
    Extracted {
        pages,
        extractor,
        unreadable,
        ocr: None,
        locations: Vec::new(),
    }
}

/// The final error when neither extractor produced text.
fn classify(first: Attempt, second: Attempt) -> ExtractError {
    let either = |pred: fn(&Attempt) -> bool| pred(&first) || pred(&second);
    if either(|a| matches!(a, Attempt::Encrypted)) {
        return ExtractError::PdfEncrypted;
    }
    if either(|a| matches!(a, Attempt::NoText)) {
        return ExtractError::NoTextLayer;
    }
    let verdict = if matches!(second, Attempt::Internal(_)) {
        first
    } else {
        second
    };
    match verdict {
        Attempt::Malformed(reason) => ExtractError::PdfMalformed { reason },
        Attempt::Timeout => ExtractError::Timeout,
        Attempt::OutOfMemory => ExtractError::OutOfMemory,
        Attempt::Internal(reason) => ExtractError::Internal { reason },
        // Handled above; kept total rather than panicking.
        Attempt::Text { .. } | Attempt::NoText => ExtractError::NoTextLayer,
        Attempt::Encrypted => ExtractError::PdfEncrypted,
    }
}

fn summary(attempt: &Attempt) -> String {
    match attempt {
        Attempt::Text {
            pages,
            complete,
            unreadable,
        } => format!(
            "{} pages, complete: {complete}, {} without usable text",
            pages.len(),
            unreadable.len()
        ),
        other => format!("{other:?}"),
    }
}

/// All the child (and `pdftotext` after it) gets of our environment: `PATH`, to find
/// `pdftotext` by name, and the locale. A process that parses hostile files never sees
/// `DATABASE_URL`, API keys or the API token.
const PASSED_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "LC_CTYPE"];

/// mimalloc's setting of how much address space it reserves at a time (KiB), read at start-up.
const ALLOCATOR_ARENA_RESERVE: &str = "MIMALLOC_ARENA_RESERVE";

/// The isolated child under `limits`, before its mode is chosen.
pub(crate) fn child_command(limits: &ExtractSettings) -> Command {
    let mut command = Command::new(&limits.child_exe);
    command.env_clear();
    for name in PASSED_ENV {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command
        .arg(CHILD_SUBCOMMAND)
        .env(ENV_MEMORY, limits.memory_bytes.to_string())
        // The process allocator (mimalloc, see the crate root) reserves address space in
        // arenas of 1 GiB and more, and RLIMIT_AS counts what is reserved as well as what is
        // used, so reserved arenas would change what the cap means. With none reserved, the
        // child's mappings are what it allocates.
        .env(ALLOCATOR_ARENA_RESERVE, "0")
        .env_remove(ENV_EXEC_PDFTOTEXT)
        .env_remove(ENV_EXEC)
        .env_remove(ENV_INPUT);
    command
}

async fn run_pdf_extract(bytes: &[u8], limits: &ExtractSettings) -> Attempt {
    let command = child_command(limits);
    // The JSON report escapes text, so allow it some room over the text cap.
    let run = process::run(command, Some(bytes), limits.timeout, MAX_TEXT_BYTES * 2).await;
    let finished = match finished_or_attempt(run) {
        Ok(finished) => finished,
        Err(attempt) => return attempt,
    };
    if !finished.status.success() {
        return crashed(&finished);
    }
    match serde_json::from_slice::<ChildReport>(&finished.stdout) {
        Ok(ChildReport::Ok {
            pages,
            failed_pages,
        }) => {
            for failed in &failed_pages {
                tracing::debug!(page = failed.number, reason = %failed.reason, "pdf-extract lost a page");
            }
            usable(pages, failed_pages.is_empty(), limits.paragraphs)
        }
        Ok(ChildReport::Encrypted) => Attempt::Encrypted,
        Ok(ChildReport::Malformed { reason }) => Attempt::Malformed(reason),
        Err(err) => Attempt::Internal(format!("unreadable report from the PDF child: {err}")),
    }
}

async fn run_pdftotext(bytes: &[u8], limits: &ExtractSettings) -> Attempt {
    let input = match TempPdf::write(bytes).await {
        Ok(input) => input,
        Err(err) => return Attempt::Internal(format!("cannot write a temporary file: {err}")),
    };
    let mut command = child_command(limits);
    command
        .env(ENV_EXEC_PDFTOTEXT, &limits.pdftotext)
        .env(ENV_INPUT, &input.path);
    let run = process::run(command, None, limits.timeout, MAX_TEXT_BYTES).await;
    drop(input);
    let finished = match finished_or_attempt(run) {
        Ok(finished) => finished,
        Err(attempt) => return attempt,
    };
    if finished.status.success() {
        let text = String::from_utf8_lossy(&finished.stdout);
        let mut pieces: Vec<&str> = text.split('\x0c').collect();
        // pdftotext ends every page with a form feed, so the last piece is empty.
        if pieces.last().is_some_and(|last| last.is_empty()) {
            pieces.pop();
        }
        let pages = pieces
            .into_iter()
            .zip(1u32..)
            .map(|(text, number)| Page {
                number,
                text: text.to_owned(),
            })
            .collect();
        return usable(pages, true, limits.paragraphs);
    }
    let stderr = String::from_utf8_lossy(&finished.stderr);
    if stderr.contains("Incorrect password") {
        return Attempt::Encrypted;
    }
    if stderr.contains("Wrong page range") {
        return Attempt::Malformed("the document has no pages".into());
    }
    if finished.status.code() == Some(1) || finished.status.code() == Some(99) {
        return Attempt::Malformed(poppler_reason(&stderr));
    }
    crashed(&finished)
}

/// Turns a run that did not finish into its attempt.
fn finished_or_attempt(run: Run) -> Result<Finished, Attempt> {
    match run {
        Run::Finished(finished) if finished.overflowed => Err(Attempt::OutOfMemory),
        Run::Finished(finished) => Ok(finished),
        Run::TimedOut => Err(Attempt::Timeout),
        Run::SpawnFailed(err) => Err(Attempt::Internal(format!(
            "cannot start the PDF extractor: {err}"
        ))),
    }
}

/// Classifies an abnormal exit from its stderr: an allocation that failed under the cap, a
/// stack overflow, a setup failure of ours, or some other crash of the parser.
fn crashed(finished: &Finished) -> Attempt {
    let stderr = String::from_utf8_lossy(&finished.stderr);
    if finished.status.code() == Some(i32::from(EXIT_SETUP_FAILED)) {
        return Attempt::Internal(stderr.trim().to_owned());
    }
    // Rust's allocation failure, C++'s bad_alloc, and the dynamic loader unable to map
    // pdftotext's libraries under the cap.
    let out_of_memory = [
        "memory allocation of",
        "bad_alloc",
        "out of memory",
        "cannot allocate memory",
        "failed to map segment",
    ];
    let lowered = stderr.to_lowercase();
    if finished.status.code() == Some(i32::from(EXIT_OUT_OF_MEMORY))
        || out_of_memory.iter().any(|needle| lowered.contains(needle))
    {
        return Attempt::OutOfMemory;
    }
    if stderr.contains("overflowed its stack") {
        return Attempt::Malformed("its structure is nested too deeply".into());
    }
    Attempt::Malformed(format!("the parser crashed ({})", finished.status))
}

/// The useful part of poppler's complaint: the last error line, without its "Syntax Error:"
/// style prefix.
fn poppler_reason(stderr: &str) -> String {
    let line = stderr
        .lines()
        .rev()
        .find(|line| line.contains("Error"))
        .or_else(|| stderr.lines().rev().find(|line| !line.trim().is_empty()))
        .unwrap_or("unreadable document");
    let reason = line.split_once(": ").map_or(line, |(_, rest)| rest).trim();
    let mut reason: String = reason.chars().take(200).collect();
    if let Some(first) = reason.get(..1) {
        let lowered = first.to_ascii_lowercase();
        reason.replace_range(..1, &lowered);
    }
    reason
}

/// Normalises pages and judges each one ([`quality::assess`]): pages keep their numbers, and
/// a page without a usable text layer is emptied and listed, so OCR can read it instead.
fn usable(pages: Vec<Page>, complete: bool, paragraphs: bool) -> Attempt {
    if pages.is_empty() {
        return Attempt::NoText;
    }
    let mut unreadable = Vec::new();
    let pages = pages
        .into_iter()
        .map(|page| {
            let text = tidy(&page.text, paragraphs);
            match quality::assess(&text) {
                None => Page {
                    number: page.number,
                    text,
                },
                Some(problem) => {
                    unreadable.push((page.number, problem));
                    Page {
                        number: page.number,
                        text: String::new(),
                    }
                }
            }
        })
        .collect();
    Attempt::Text {
        pages,
        complete,
        unreadable,
    }
}

/// Normalises line ends and rebuilds paragraphs from the extractor's lines
/// ([`paragraphs::rebuild`]); with `paragraphs` off (for measurement), only collapses runs of
/// blank lines into one paragraph break, as the line output was stored before.
pub(crate) fn tidy(text: &str, paragraphs: bool) -> String {
    let normalized = normalize(text);
    if paragraphs {
        return paragraphs::rebuild(&normalized);
    }
    let mut out = String::with_capacity(normalized.len());
    let mut newlines = 0;
    for c in normalized.trim_start_matches('\n').chars() {
        if c == '\n' {
            newlines += 1;
            if newlines > 2 {
                continue;
            }
        } else {
            newlines = 0;
        }
        out.push(c);
    }
    out
}

/// A private temporary copy of the PDF for `pdftotext`, removed when dropped.
struct TempPdf {
    path: PathBuf,
}

impl TempPdf {
    async fn write(bytes: &[u8]) -> std::io::Result<TempPdf> {
        let path =
            std::env::temp_dir().join(format!("docket-extract-{}.pdf", uuid::Uuid::new_v4()));
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .await?;
        let written = async {
            tokio::io::AsyncWriteExt::write_all(&mut file, bytes).await?;
            tokio::io::AsyncWriteExt::flush(&mut file).await
        }
        .await;
        let temp = TempPdf { path };
        written.map(|()| temp)
    }
}

impl Drop for TempPdf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poppler_reasons_lose_their_prefix() {
        let stderr =
            "Syntax Warning: May not be a PDF file\nSyntax Error: Couldn't read xref table\n";
        assert_eq!(poppler_reason(stderr), "couldn't read xref table");
    }

    #[test]
    fn garbage_glyph_pages_are_emptied_and_listed_for_ocr() {
        let pages = vec![
            Page {
                number: 1,
                text: "\u{fffd}\u{e001}\u{e002} ab".into(),
            },
            Page {
                number: 2,
                text: "Real words here.".into(),
            },
        ];
        let Attempt::Text {
            pages, unreadable, ..
        } = usable(pages, true, true)
        else {
            panic!("expected text");
        };
        assert_eq!(pages[0].text, "");
        assert_eq!(pages[1].text, "Real words here.");
        assert_eq!(unreadable.len(), 1);
        assert!(matches!(unreadable[0], (1, TextProblem::Garbage { .. })));
    }

    #[test]
    fn blank_pages_keep_their_numbers_beside_text() {
        let pages = vec![
            Page {
                number: 1,
                text: "\n\n".into(),
            },
            Page {
                number: 2,
                text: "Words\n\n\n\nmore".into(),
            },
        ];
        let Attempt::Text {
            pages,
            complete,
            unreadable,
        } = usable(pages, true, true)
        else {
            panic!("expected text");
        };
        assert!(complete);
        assert_eq!(unreadable, vec![(1, TextProblem::Empty)]);
        assert_eq!(
            pages[0],
            Page {
                number: 1,
                text: String::new()
            }
        );
        assert_eq!(pages[1].text, "Words\n\nmore");
    }

    #[test]
    fn encrypted_wins_then_no_text_then_pdftotext() {
        let err = classify(Attempt::Malformed("x".into()), Attempt::Encrypted);
        assert_eq!(err, ExtractError::PdfEncrypted);
        let err = classify(Attempt::NoText, Attempt::Timeout);
        assert_eq!(err, ExtractError::NoTextLayer);
        let err = classify(Attempt::OutOfMemory, Attempt::Malformed("bad xref".into()));
        assert_eq!(err.code(), "pdf_malformed");
        let err = classify(Attempt::Timeout, Attempt::Internal("missing".into()));
        assert_eq!(err, ExtractError::Timeout);
    }
}
