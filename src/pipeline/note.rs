//! How a document's text was obtained, told once: the extract and OCR steps compose the
//! document's [`ExtractionNote`] from what the extraction found (the text layer's pages, the
//! pages without a usable one and why, what OCR read of them), and store it with the state it
//! describes. Pending when the pages go to OCR, final at the checkpoint; a client shows it as
//! given and never has to reconcile the extractor's label with a note written before OCR ran.

use crate::documents::{ExtractionMethod, ExtractionNote};
use crate::extract::{Extracted, Extractor, TextProblem};

/// The description while the pages without a usable text layer wait for OCR.
pub(super) fn pending(extracted: &Extracted) -> ExtractionNote {
    let counts = Counts::of(extracted);
    let waiting = format!("OCR pending on {}", pages(counts.wanted));
    let summary = match text_layer(extracted, &counts) {
        Some(layer) => format!("{layer}; {waiting}: {}.", reasons(extracted)),
        None => format!("{waiting}: {}.", why(extracted)),
    };
    counts.note(ExtractionMethod::OcrPending, 0, summary)
}

/// The description of a finished extraction (what the checkpoint stores).
pub(super) fn finished(extracted: &Extracted) -> ExtractionNote {
    let counts = Counts::of(extracted);
    let read = ocr_read(extracted).len();
    let layer = text_layer(extracted, &counts);
    let Some(run) = &extracted.ocr else {
        if counts.wanted == 0 {
            let summary = match extracted.extractor {
                Extractor::Pdftotext | Extractor::PdfExtract => format!(
                    "Text layer on every page ({}); no OCR needed.",
                    extracted.extractor.as_str()
                ),
                other => format!("The file's own text ({}); no OCR needed.", other.as_str()),
            };
            return counts.note(ExtractionMethod::Text, 0, summary);
        }
        let left = format!(
            "{} not read, because OCR is off: {}",
            pages(counts.wanted),
            reasons(extracted)
        );
        let summary = match layer {
            Some(layer) => format!("{layer}; {left}."),
            None => format!("{left}."),
        };
        return counts.note(ExtractionMethod::OcrOff, 0, summary);
    };
    let engine = if run.languages.is_empty() {
        run.engine.clone()
    } else {
        format!("{}, {}", run.engine, run.languages.join("+"))
    };
    let ocr = format!("OCR on {} of {} ({engine})", read, pages(counts.total));
    let blank = counts.wanted - read;
    let blank = if blank > 0 {
        format!("; OCR found no text on {}", pages(blank))
    } else {
        String::new()
    };
    match layer {
        Some(layer) => counts.note(
            ExtractionMethod::TextAndOcr,
            read,
            format!("{layer}; {ocr}: {}{blank}.", reasons(extracted)),
        ),
        None => counts.note(
            ExtractionMethod::Ocr,
            read,
            format!("{ocr}: {}{blank}.", why(extracted)),
        ),
    }
}

/// The pages OCR read text from, in order: those it ran on that came back with text (not the
/// blank ones, nor those whose OCR output was judged garbage and dropped). The document's
/// `ocr_pages`, which the reader marks, are these.
pub(super) fn ocr_read(extracted: &Extracted) -> Vec<u32> {
    let Some(run) = &extracted.ocr else {
        return Vec::new();
    };
    run.pages
        .iter()
        .copied()
        .filter(|&number| {
            extracted
                .pages
                .iter()
                .any(|page| page.number == number && !page.text.trim().is_empty())
        })
        .collect()
}

/// The pages of a document and those without a usable text layer.
struct Counts {
    total: usize,
    wanted: usize,
}

impl Counts {
    fn of(extracted: &Extracted) -> Counts {
        Counts {
            total: extracted.pages.len(),
            wanted: extracted.unreadable.len(),
        }
    }

    fn note(&self, method: ExtractionMethod, read: usize, summary: String) -> ExtractionNote {
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        ExtractionNote {
            method,
            pages: count(self.total),
            ocr_wanted: count(self.wanted),
            ocr_read: count(read),
            summary,
        }
    }
}

/// "Text layer on 4 of 5 pages (pdftotext)", when some pages had one; `None` for an image or a
/// document none of whose pages had a usable text layer.
fn text_layer(extracted: &Extracted, counts: &Counts) -> Option<String> {
    if extracted.extractor == Extractor::Ocr || counts.wanted >= counts.total {
        return None;
    }
    Some(format!(
        "Text layer on {} of {} ({})",
        counts.total - counts.wanted,
        pages(counts.total),
        extracted.extractor.as_str()
    ))
}

/// Why the pages went to OCR: the file is an image, or the reasons page by page.
fn why(extracted: &Extracted) -> String {
    if extracted.extractor == Extractor::Ocr {
        "the file is an image".to_owned()
    } else {
        reasons(extracted)
    }
}

/// The pages without a usable text layer, grouped by reason: `page 5: no text layer` or
/// `pages 2–3, 7: a text layer without letters; page 4: …`.
fn reasons(extracted: &Extracted) -> String {
    let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
    for (number, problem) in &extracted.unreadable {
        // Junk shares differ page by page; the kind of problem is what groups them.
        let reason = match problem {
            TextProblem::Garbage { .. } => "a text layer of unmappable glyphs (garbage)".to_owned(),
            other => other.describe(),
        };
        match groups.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, numbers)) => numbers.push(*number),
            None => groups.push((reason, vec![*number])),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(reason, numbers)| format!("{}: {reason}", crate::extract::page_ranges(numbers)))
        .collect();
    parts.join("; ")
}

/// `1 page`, `5 pages`.
fn pages(n: usize) -> String {
    if n == 1 {
        "1 page".to_owned()
    } else {
        format!("{n} pages")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::{OcrRun, Page};

    fn page(number: u32, text: &str) -> Page {
        Page {
            number,
            text: text.to_owned(),
        }
    }

    fn mixed(ocr: Option<OcrRun>, fifth: &str) -> Extracted {
        Extracted {
            pages: vec![
                page(1, "one"),
                page(2, "two"),
                page(3, "three"),
                page(4, "four"),
                page(5, fifth),
            ],
            extractor: Extractor::Pdftotext,
            unreadable: vec![(5, TextProblem::Empty)],
            ocr,
            locations: Vec::new(),
        }
    }

    fn run(pages: Vec<u32>) -> OcrRun {
        OcrRun {
            engine: "tesseract 5.3.0".into(),
            languages: vec!["eng".into()],
            pages,
        }
    }

    #[test]
    fn every_state_of_a_mixed_pdf_reads_true() {
        let waiting = pending(&mixed(None, ""));
        assert_eq!(waiting.method, ExtractionMethod::OcrPending);
        assert_eq!(
            waiting.summary,
            "Text layer on 4 of 5 pages (pdftotext); OCR pending on 1 page: page 5: no text layer."
        );
        let read = finished(&mixed(Some(run(vec![5])), "garden"));
        assert_eq!(
            (read.method, read.ocr_read),
            (ExtractionMethod::TextAndOcr, 1)
        );
        assert_eq!(
            read.summary,
            "Text layer on 4 of 5 pages (pdftotext); OCR on 1 of 5 pages (tesseract 5.3.0, eng): page 5: no text layer."
        );
        let blank = finished(&mixed(Some(run(Vec::new())), ""));
        assert_eq!(
            (blank.method, blank.ocr_read),
            (ExtractionMethod::TextAndOcr, 0)
        );
        assert!(
            blank.summary.ends_with("; OCR found no text on 1 page."),
            "{}",
            blank.summary
        );
        let off = finished(&mixed(None, ""));
        assert_eq!(off.method, ExtractionMethod::OcrOff);
        assert_eq!(
            off.summary,
            "Text layer on 4 of 5 pages (pdftotext); 1 page not read, because OCR is off: page 5: no text layer."
        );
    }

    #[test]
    fn pages_group_by_reason_in_ranges() {
        assert_eq!(crate::extract::page_ranges(&[2, 3, 4, 7]), "pages 2–4, 7");
        assert_eq!(crate::extract::page_ranges(&[9]), "page 9");
    }
}
