//! Extraction: uploaded bytes → pages of text.
//!
//! The type of a document is decided from its bytes, never from its name ([`sniff()`]). Plain text,
//! Markdown and HTML are decoded and parsed in-process ([`text`], [`html`]); they are pure and
//! bounded by the input size, so they run on a blocking thread. PDFs are parsed by `pdf-extract`
//! in a child process under a memory and time limit, falling back to poppler's `pdftotext`
//! ([`pdf`]), because PDF parsers panic, loop or eat memory on hostile files and none of that may
//! reach the worker.
//!
//! Every failure is an [`ExtractError`] with a stable code and a message fit to show a user.

mod decode;
mod error;
pub mod html;
pub mod pdf;
pub mod sniff;
pub mod text;

pub use error::ExtractError;
pub use pdf::{PdfLimits, extract_pdf};
pub use sniff::sniff;
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
}

/// The verdict of [`sniff()`]: the kind of a document and how to decode it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sniffed {
    /// What the bytes are.
    pub kind: DocKind,
    /// How text kinds are decoded; `None` for PDFs, which carry their own encodings.
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
    /// The `pdf-extract` crate, in the isolated child process.
    PdfExtract,
    /// Poppler's `pdftotext`, the fallback for PDFs.
    Pdftotext,
    /// The plain-text / Markdown decoder.
    Text,
    /// The HTML parser.
    Html,
}

impl Extractor {
    /// A stable name for storage and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Extractor::PdfExtract => "pdf-extract",
            Extractor::Pdftotext => "pdftotext",
            Extractor::Text => "text",
            Extractor::Html => "html",
        }
    }
}

/// The text of a document and who extracted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// Pages in order, numbered from 1.
    pub pages: Vec<Page>,
    /// The extractor whose output this is.
    pub extractor: Extractor,
}

/// Extracts any sniffed document: PDFs through [`extract_pdf`], the rest on a blocking thread.
pub async fn extract(
    bytes: &[u8],
    sniffed: &Sniffed,
    limits: &PdfLimits,
) -> Result<Extracted, ExtractError> {
    if sniffed.kind == DocKind::Pdf {
        return extract_pdf(bytes, limits).await;
    }
    let extractor = if sniffed.kind == DocKind::Html {
        Extractor::Html
    } else {
        Extractor::Text
    };
    // The blocking pool needs owned data; one copy of a text file is cheap next to parsing it.
    let owned = bytes.to_vec();
    let sniffed = *sniffed;
    let pages = tokio::task::spawn_blocking(move || extract_text(&owned, &sniffed))
        .await
        .map_err(|join| ExtractError::Internal {
            reason: format!("text extraction task failed: {join}"),
        })??;
    Ok(Extracted { pages, extractor })
}
