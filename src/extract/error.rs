//! The one error type of extraction.
//!
//! Each variant carries a stable snake_case [`code`](ExtractError::code) for clients and a
//! readable message (its `Display`) shown to the person who uploaded the file, so messages say
//! what is wrong with the file, not what went wrong inside docket.

/// Why a document yielded no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The bytes are a type docket does not read (an image, an archive, binary junk).
    #[error("unsupported file type ({detected})")]
    Unsupported {
        /// The MIME type the bytes look like.
        detected: &'static str,
    },
    /// The name promises a PDF but the bytes are readable text of another kind: refused rather
    /// than read as text, since the person meant to send a PDF and would otherwise get the
    /// wrong file indexed without noticing.
    #[error("named .pdf but the bytes are not a PDF (looks like {detected})")]
    NotAPdf {
        /// The MIME type the bytes look like.
        detected: &'static str,
    },
    /// The upload has no bytes.
    #[error("the file is empty")]
    Empty,
    /// A text or HTML document decoded to nothing but whitespace.
    #[error("the document contains no text")]
    NoText,
    /// The PDF needs a password to open.
    #[error("the PDF is encrypted")]
    PdfEncrypted,
    /// The PDF opened but holds no extractable text, typically a scan without OCR.
    #[error("no text layer (scanned?)")]
    NoTextLayer,
    /// The PDF is damaged or not really a PDF.
    #[error("the PDF is malformed: {reason}")]
    PdfMalformed {
        /// What the parser said, in a few words.
        reason: String,
    },
    /// The document is beyond what docket parses: too large, too many elements or nested too
    /// deep (limits that keep a hostile file from taking the worker down).
    #[error("the document is too large or complex to read: {reason}")]
    TooComplex {
        /// Which limit, in a few words.
        reason: String,
    },
    /// An image declares more pixels than OCR may decode (a decompression bomb, or a poster).
    #[error(
        "the image is {width} × {height} pixels; docket reads images up to {max_megapixels} megapixels"
    )]
    ImageTooLarge {
        width: u32,
        height: u32,
        max_megapixels: u64,
    },
    /// An image is damaged or cut short.
    #[error("the image is damaged: {reason}")]
    ImageMalformed {
        /// What is wrong, in a few words.
        reason: String,
    },
    /// An office, e-book or Hangul document needs a password to open (an encrypted OOXML
    /// package, an HWP file with its password flag set).
    #[error("the {format} is password-protected; save it without a password and upload it again")]
    Encrypted {
        /// The format as a person knows it ("Word document", "HWP document").
        format: &'static str,
    },
    /// A container format whose bytes are cut short or inconsistent (a truncated zip, an OLE
    /// file with cyclic sectors, XML that does not parse).
    #[error("the {format} is damaged: {reason}")]
    Corrupt {
        /// The format as a person knows it.
        format: &'static str,
        /// What is wrong, in a few words.
        reason: String,
    },
    /// A format docket recognises but does not read, with what to do instead
    /// ("legacy Word 97–2003 document": "save it as .docx").
    #[error("{format} files are not read; {advice}")]
    LegacyFormat {
        /// The format as a person knows it.
        format: &'static str,
        /// What to do instead.
        advice: &'static str,
    },
    /// More pages need OCR than the configured cap allows.
    #[error("{pages} pages need OCR, more than the limit of {limit} (DOCKET_OCR_MAX_PAGES)")]
    OcrPageLimit { pages: usize, limit: u32 },
    /// No page has a usable text layer and OCR read nothing either.
    #[error("no text found: no usable text layer, and OCR read nothing (blank or illegible?)")]
    OcrNoText,
    /// Every extractor ran past its time limit.
    #[error("extraction timed out")]
    Timeout,
    /// Every extractor ran past its memory limit.
    #[error("extraction ran out of memory")]
    OutOfMemory,
    /// docket itself failed (a helper could not be started, a task died); worth a retry.
    #[error("extraction failed: {reason}")]
    Internal {
        /// What failed.
        reason: String,
    },
}

impl ExtractError {
    /// The stable snake_case code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            ExtractError::Unsupported { .. } => "unsupported_type",
            ExtractError::NotAPdf { .. } => "not_a_pdf",
            ExtractError::Empty => "empty_file",
            ExtractError::NoText => "no_text",
            ExtractError::PdfEncrypted => "pdf_encrypted",
            ExtractError::NoTextLayer => "no_text_layer",
            ExtractError::PdfMalformed { .. } => "pdf_malformed",
            ExtractError::TooComplex { .. } => "document_too_complex",
            ExtractError::ImageTooLarge { .. } => "image_too_large",
            ExtractError::ImageMalformed { .. } => "image_malformed",
            ExtractError::Encrypted { .. } => "encrypted",
            ExtractError::Corrupt { .. } => "file_corrupt",
            ExtractError::LegacyFormat { .. } => "legacy_format",
            ExtractError::OcrPageLimit { .. } => "ocr_page_limit",
            ExtractError::OcrNoText => "ocr_no_text",
            ExtractError::Timeout => "extraction_timeout",
            ExtractError::OutOfMemory => "extraction_out_of_memory",
            ExtractError::Internal { .. } => "extraction_failed",
        }
    }

    /// Whether retrying the same bytes is pointless: true for everything that is the file's
    /// fault (including timeouts and memory, which are limits the file exceeded), false for
    /// docket's own failures.
    pub fn is_permanent(&self) -> bool {
        !matches!(self, ExtractError::Internal { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_documented_sentences() {
        assert_eq!(
            ExtractError::PdfEncrypted.to_string(),
            "the PDF is encrypted"
        );
        assert_eq!(
            ExtractError::NoTextLayer.to_string(),
            "no text layer (scanned?)"
        );
        assert_eq!(ExtractError::Timeout.to_string(), "extraction timed out");
        assert_eq!(
            ExtractError::OutOfMemory.to_string(),
            "extraction ran out of memory"
        );
        let malformed = ExtractError::PdfMalformed {
            reason: "no xref table".into(),
        };
        assert_eq!(malformed.to_string(), "the PDF is malformed: no xref table");
        assert_eq!(malformed.code(), "pdf_malformed");
    }

    #[test]
    fn only_internal_failures_are_retryable() {
        assert!(ExtractError::Timeout.is_permanent());
        assert!(
            ExtractError::Unsupported {
                detected: "image/png"
            }
            .is_permanent()
        );
        assert!(
            !ExtractError::Internal {
                reason: "spawn".into()
            }
            .is_permanent()
        );
    }
}
