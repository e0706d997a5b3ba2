//! Extraction: uploaded bytes → pages of text.
//!
//! The type of a document is decided from its bytes, never from its name ([`sniff()`]). Plain text,
//! Markdown and HTML are decoded and parsed in-process ([`text`], [`html`]); they are pure and
//! bounded by the input size, so they run on a blocking thread. PDFs are parsed by poppler's
//! `pdftotext`, and by `pdf-extract` where poppler leaves unusable pages or fails, in a child
//! process under a memory and time limit ([`pdf`]), because PDF parsers panic, loop or eat memory
//! on hostile files and none of that may reach the worker.
//!
//! Images (PNG, JPEG, TIFF) and PDF pages without a usable text layer (none, or garbage:
//! [`quality`]) are read by OCR ([`ocr`]), in the same isolated child. OCR is slow, so it is a
//! second phase a caller can run apart: [`extract_text_layer`] says which pages need it
//! ([`Extracted::unreadable`]) and [`read_unreadable`] fills them in; [`extract`] does both.
//!
//! Every failure is an [`ExtractError`] with a stable code and a message fit to show a user.

pub mod csv;
mod decode;
pub mod email;
mod error;
pub mod formats;
pub mod html;
pub mod image;
pub mod ocr;
pub mod office;
pub mod ole;
pub mod paragraphs;
pub mod pdf;
pub mod quality;
pub mod rtf;
mod settings;
pub mod sniff;
pub mod structure;
pub mod text;

pub use error::ExtractError;
pub use formats::{FORMATS, Format};
pub use ocr::{Languages, OcrRun, OcrSettings};
pub use office::Package;
pub use ole::OleKind;
pub use pdf::extract_pdf;
pub use quality::TextProblem;
pub use settings::ExtractSettings;
pub use sniff::sniff;
pub use structure::{Location, Section};
pub use text::extract_text;

/// What a document is, judged from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// A PDF (`%PDF-` header).
    Pdf,
    /// An HTML or XHTML page.
    Html,
    /// Text whose name says Markdown; kept as text, markup included.
    Markdown,
    /// Any other readable text.
    Text,
    /// A PNG, JPEG or TIFF image, read by OCR.
    Image,
    /// A zip-family document: Word, PowerPoint, Excel, OpenDocument, EPUB, HWPX.
    Package(Package),
    /// An OLE compound file docket reads: HWP 5.0 or a legacy `.xls` ([`ole`]).
    Ole(OleKind),
    /// An RTF document ([`rtf`]).
    Rtf,
    /// An e-mail message, attachments included ([`email`]).
    Email,
    /// A CSV or TSV table ([`csv`]), decoded with `encoding`.
    Csv,
}

/// The verdict of [`sniff()`]: the kind of a document and how to decode it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sniffed {
    /// What the bytes are.
    pub kind: DocKind,
    /// How text kinds are decoded; `None` for PDFs and images.
    ///
    /// `encoding_rs` has no ISO-2022-KR decoder (the WHATWG standard maps that label to its
    /// `REPLACEMENT` encoding); docket decodes it itself, so `Some(REPLACEMENT)` here means
    /// ISO-2022-KR.
    pub encoding: Option<&'static encoding_rs::Encoding>,
    /// The MIME type stored with the document (`application/pdf`, `text/html`, …).
    pub content_type: &'static str,
}

/// One page of extracted text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Page {
    /// 1-based page number; text formats have a single page 1.
    pub number: u32,
    /// The page's text: paragraphs separated by blank lines.
    pub text: String,
}

/// Which extractor produced the text, recorded so bad output can be traced to its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extractor {
    /// The `pdf-extract` crate, in the isolated child process: the second opinion for PDFs.
    PdfExtract,
    /// Poppler's `pdftotext`, the first extractor for PDFs.
    Pdftotext,
    /// The plain-text / Markdown decoder.
    Text,
    /// The HTML parser.
    Html,
    /// OCR alone (an image); see [`Extracted::ocr`] for the engine and languages.
    Ocr,
    /// A zip-family reader ([`office`]).
    Package(Package),
    /// The OLE reader ([`ole`]): HWP 5.0 or `.xls`.
    Ole(OleKind),
    /// The RTF reader.
    Rtf,
    /// The e-mail reader (and its attachments' readers).
    Email,
    /// The CSV/TSV reader.
    Csv,
}

impl Extractor {
    /// A stable name for storage and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Extractor::PdfExtract => "pdf-extract",
            Extractor::Pdftotext => "pdftotext",
            Extractor::Text => "text",
            Extractor::Html => "html",
            Extractor::Ocr => "ocr",
            Extractor::Package(package) => package.short(),
            Extractor::Ole(OleKind::Hwp) => "hwp",
            Extractor::Ole(OleKind::Excel97) => "xls",
            Extractor::Ole(_) => "ole",
            Extractor::Rtf => "rtf",
            Extractor::Email => "email",
            Extractor::Csv => "csv",
        }
    }
}

/// The text of a document and who extracted it.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// Pages in order, numbered from 1.
    pub pages: Vec<Page>,
    /// The extractor whose output this is (of the text layer, for a PDF that OCR completed).
    pub extractor: Extractor,
    /// Pages without a usable text layer, and why: empty in `pages` until OCR reads them.
    pub unreadable: Vec<(u32, TextProblem)>,
    /// What OCR did, once it ran.
    pub ocr: Option<OcrRun>,
    /// For structured formats, where each page is: page `n` is the section at `n - 1` (a
    /// heading path, a slide, a sheet's rows). Empty for PDFs, images and plain text, whose
    /// pages are pages.
    pub locations: Vec<Location>,
}

impl Extracted {
    /// The label of page `number`'s location ("slide 2"); `None` when the document has no
    /// structure beyond pages, or the section has no heading above it.
    pub fn location_of(&self, number: u32) -> Option<String> {
        let at = usize::try_from(number).ok()?.checked_sub(1)?;
        let label = self.locations.get(at)?.label();
        (!label.is_empty()).then_some(label)
    }

    /// Whether some pages wait for OCR.
    pub fn needs_ocr(&self) -> bool {
        self.ocr.is_none() && !self.unreadable.is_empty()
    }

    /// The extractor as stored and shown: `pdftotext`, `ocr (tesseract 5.3.0, kor+eng)`, or
    /// both for a PDF whose text layer OCR completed.
    pub fn label(&self) -> String {
        match (&self.ocr, self.extractor) {
            (None, extractor) => extractor.as_str().to_owned(),
            (Some(run), Extractor::Ocr) => run.label(),
            (Some(run), _) if run.pages.len() == self.pages.len() => run.label(),
            (Some(run), extractor) => format!(
                "{} + {} on {} of {} pages",
                extractor.as_str(),
                run.label(),
                run.pages.len(),
                self.pages.len()
            ),
        }
    }

    /// Why pages went to OCR, grouped by reason with page ranges (`pages 2–22: a text layer of
    /// unmappable glyphs`); `None` when every page had text or the document is an image.
    pub fn note(&self) -> Option<String> {
        if self.unreadable.is_empty() || self.extractor == Extractor::Ocr {
            return None;
        }
        let mut groups: Vec<(String, Vec<u32>)> = Vec::new();
        for (number, problem) in &self.unreadable {
            // Shares differ page by page; the kind of problem is what groups them.
            let reason = match problem {
                TextProblem::Garbage { .. } => {
                    "a text layer of unmappable glyphs (garbage)".to_owned()
                }
                other => other.describe(),
            };
            match groups.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, pages)) => pages.push(*number),
                None => groups.push((reason, vec![*number])),
            }
        }
        let after = if self.ocr.is_some() {
            "read by OCR"
        } else {
            "not read (OCR off)"
        };
        let parts: Vec<String> = groups
            .iter()
            .map(|(reason, pages)| format!("{}: {reason}", page_ranges(pages)))
            .collect();
        Some(format!("{}; {after}", parts.join("; ")))
    }
}

/// `page 3`, `pages 2–22, 25`.
pub fn page_ranges(pages: &[u32]) -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for &page in pages {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == page => *end = page,
            _ => ranges.push((page, page)),
        }
    }
    let text: Vec<String> = ranges
        .iter()
        .map(|&(start, end)| {
            if start == end {
                start.to_string()
            } else {
                format!("{start}–{end}")
            }
        })
        .collect();
    let word = if pages.len() == 1 { "page" } else { "pages" };
    format!("{word} {}", text.join(", "))
}

/// Extracts any sniffed document, OCR included: [`extract_text_layer`] then
/// [`read_unreadable`].
pub async fn extract(
    bytes: &[u8],
    sniffed: &Sniffed,
    limits: &ExtractSettings,
) -> Result<Extracted, ExtractError> {
    let extracted = extract_text_layer(bytes, sniffed, limits).await?;
    read_unreadable(bytes, extracted, limits, &|_, _| {}).await
}

/// The first, fast phase: PDFs' text layers through [`extract_pdf`], text kinds on a blocking
/// thread; images only have their headers checked. Pages that need OCR are listed, not read.
pub async fn extract_text_layer(
    bytes: &[u8],
    sniffed: &Sniffed,
    limits: &ExtractSettings,
) -> Result<Extracted, ExtractError> {
    match sniffed.kind {
        DocKind::Pdf => extract_pdf(bytes, limits).await,
        DocKind::Image => image_pages(bytes, limits),
        DocKind::Html => text_pages(bytes, sniffed, Extractor::Html).await,
        DocKind::Markdown | DocKind::Text => text_pages(bytes, sniffed, Extractor::Text).await,
        DocKind::Package(package) => {
            let read = move |bytes: &[u8]| office::read(package, bytes);
            sections_of(bytes, read, Extractor::Package(package)).await
        }
        DocKind::Ole(kind) => sections_of(bytes, ole::extract_ole, Extractor::Ole(kind)).await,
        DocKind::Rtf => sections_of(bytes, rtf::extract_rtf, Extractor::Rtf).await,
        DocKind::Csv => {
            let encoding = sniffed.encoding;
            let read = move |bytes: &[u8]| csv::extract_csv(bytes, encoding, "CSV");
            sections_of(bytes, read, Extractor::Csv).await
        }
        DocKind::Email => Box::pin(email_pages(bytes, limits)).await,
    }
}

/// A structured document read by `read` on a blocking thread: each section becomes a page,
/// and its location is kept beside it.
async fn sections_of<F>(
    bytes: &[u8],
    read: F,
    extractor: Extractor,
) -> Result<Extracted, ExtractError>
where
    F: FnOnce(&[u8]) -> Result<Vec<Section>, ExtractError> + Send + 'static,
{
    let owned = bytes.to_vec();
    let sections = tokio::task::spawn_blocking(move || read(&owned))
        .await
        .map_err(|join| ExtractError::Internal {
            reason: format!("{} reader task failed: {join}", extractor.as_str()),
        })??;
    Ok(from_sections(sections, extractor))
}

/// An e-mail: its headers and body, then each attachment docket reads, by its own reader (a
/// PDF in the isolated child), its text labelled with the attachment's name. An attachment
/// that cannot be read is left out, not the message; pages of it that need OCR stay unread.
async fn email_pages(bytes: &[u8], limits: &ExtractSettings) -> Result<Extracted, ExtractError> {
    let owned = bytes.to_vec();
    let message = tokio::task::spawn_blocking(move || email::extract_email(&owned, 0))
        .await
        .map_err(|join| ExtractError::Internal {
            reason: format!("e-mail reader task failed: {join}"),
        })??;
    let mut sections = message.sections;
    for attachment in message.attachments {
        let read = match sniff(&attachment.bytes, &attachment.name) {
            // A message attached to a message gives its own text, not its attachments.
            Ok(sniffed) if sniffed.kind == DocKind::Email => {
                email::extract_email(&attachment.bytes, email::MAX_DEPTH)
                    .map(|inner| from_sections(inner.sections, Extractor::Email))
            }
            Ok(sniffed) => Box::pin(extract_text_layer(&attachment.bytes, &sniffed, limits)).await,
            Err(err) => Err(err),
        };
        let read = match read {
            Ok(read) => read,
            Err(err) => {
                tracing::info!(attachment = %attachment.name, reason = %err, "attachment not read");
                continue;
            }
        };
        let paginated = read.locations.is_empty() && read.pages.len() > 1;
        for (at, page) in read.pages.iter().enumerate() {
            let inner = match read.locations.get(at) {
                Some(location) => Some(Box::new(location.clone())),
                None if paginated => Some(Box::new(Location::Page {
                    number: page.number,
                })),
                None => None,
            };
            sections.push(Section {
                location: Location::Attachment {
                    name: attachment.name.clone(),
                    inner,
                },
                text: page.text.clone(),
            });
        }
    }
    Ok(from_sections(sections, Extractor::Email))
}

/// Sections as numbered pages with their locations; sections without text are dropped.
pub fn from_sections(sections: Vec<Section>, extractor: Extractor) -> Extracted {
    let mut pages = Vec::new();
    let mut locations = Vec::new();
    for section in sections {
        let text = decode::normalize(&section.text);
        if text.trim().is_empty() {
            continue;
        }
        let number = u32::try_from(pages.len() + 1).unwrap_or(u32::MAX);
        pages.push(Page { number, text });
        locations.push(section.location);
    }
    Extracted {
        pages,
        extractor,
        unreadable: Vec::new(),
        ocr: None,
        locations,
    }
}

/// An image: its headers checked, every frame listed as a page for OCR.
fn image_pages(bytes: &[u8], limits: &ExtractSettings) -> Result<Extracted, ExtractError> {
    let info = ocr::inspect_image(bytes, &limits.ocr)?;
    let numbers = 1..=u32::try_from(info.pages.len()).unwrap_or(u32::MAX);
    Ok(Extracted {
        pages: numbers
            .clone()
            .map(|number| Page {
                number,
                text: String::new(),
            })
            .collect(),
        extractor: Extractor::Ocr,
        unreadable: numbers.map(|n| (n, TextProblem::Empty)).collect(),
        ocr: None,
        locations: Vec::new(),
    })
}

/// Text, Markdown and HTML, decoded and parsed on a blocking thread.
async fn text_pages(
    bytes: &[u8],
    sniffed: &Sniffed,
    extractor: Extractor,
) -> Result<Extracted, ExtractError> {
    // The blocking pool needs owned data; one copy of a text file is cheap next to parsing it.
    let owned = bytes.to_vec();
    let sniffed = *sniffed;
    let pages = tokio::task::spawn_blocking(move || extract_text(&owned, &sniffed))
        .await
        .map_err(|join| ExtractError::Internal {
            reason: format!("text extraction task failed: {join}"),
        })??;
    Ok(Extracted {
        pages,
        extractor,
        unreadable: Vec::new(),
        ocr: None,
        locations: Vec::new(),
    })
}

/// The second, slow phase: OCR of the pages [`extract_text_layer`] listed (all of an image),
/// with `progress(done, total)` after each page; then the verdict on the whole: a document
/// with no text on any page fails ([`ExtractError::OcrNoText`], or
/// [`ExtractError::NoTextLayer`] when OCR is off).
pub async fn read_unreadable(
    bytes: &[u8],
    mut extracted: Extracted,
    limits: &ExtractSettings,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Extracted, ExtractError> {
    if extracted.needs_ocr() && limits.ocr.enabled {
        let (read, run) = if extracted.extractor == Extractor::Ocr {
            ocr::read_image(bytes, limits, progress).await?
        } else {
            let numbers: Vec<u32> = extracted.unreadable.iter().map(|(n, _)| *n).collect();
            ocr::read_pdf_pages(bytes, &numbers, limits, progress).await?
        };
        // OCR output is judged like a text layer: a page drawn with substituted fonts
        // (`XiaoBiaoSong.pdf` renders its own mojibake) reads back as the same garbage.
        let read = read.into_iter().map(|page| {
            let text = pdf::tidy(&page.text, limits.paragraphs);
            let text = if quality::assess(&text).is_some() {
                String::new()
            } else {
                text
            };
            Page {
                number: page.number,
                text,
            }
        });
        if extracted.extractor == Extractor::Ocr {
            extracted.pages = read.collect();
        } else {
            for page in read {
                if let Some(slot) = extracted.pages.iter_mut().find(|p| p.number == page.number) {
                    slot.text = page.text;
                }
            }
        }
        extracted.ocr = Some(run);
    }
    let has_text = extracted.pages.iter().any(|p| !p.text.trim().is_empty());
    if !has_text {
        return Err(if extracted.ocr.is_some() {
            ExtractError::OcrNoText
        } else if extracted.extractor == Extractor::Ocr {
            ExtractError::Unsupported {
                detected: "image (OCR is off)",
            }
        } else {
            ExtractError::NoTextLayer
        });
    }
    Ok(extracted)
}
