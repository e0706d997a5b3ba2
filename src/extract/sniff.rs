//! Type and encoding detection from the bytes of an upload.
//!
//! The filename is a hint for one thing only: telling Markdown from plain text once the bytes
//! are known to be text. Everything else is read from the bytes: a PDF named `.txt` is a PDF and
//! a PNG named `.pdf` is an image for OCR. A file *named* `.pdf` whose bytes are text is refused
//! ([`ExtractError::NotAPdf`]): whoever sent it expected a PDF, and indexing it as text would
//! hide the mistake. Text encodings are found in this order: byte-order mark,
//! valid UTF-8, the ISO-2022-KR designator, then `chardetng`'s guess (EUC-KR, Shift_JIS, Big5,
//! windows-125x, …) rather than assuming Latin-1. For HTML a declared charset (`<meta>` or
//! the XML prolog) wins over the guess, as in browsers.
//!
//! Images that OCR reads (PNG, JPEG, TIFF) are recognised by their signatures like PDFs; a zip
//! container is opened and told apart by its contents ([`office::detect`]); an OLE compound file
//! by its streams ([`ole::classify`]: HWP 5.0 and `.xls` are read, legacy Word/PowerPoint and
//! encrypted Office refused with advice); `{\rtf` is RTF; text opening with mail headers is an
//! e-mail; text named `.csv`/`.tsv` is a table. Other binary formats, images included, are
//! refused with the type they look like.
//!
//! UTF-16 without a byte-order mark is not recognised: its NUL bytes make it binary junk
//! (`application/octet-stream`), which is also what a mislabelled binary looks like.

use encoding_rs::{Encoding, REPLACEMENT, UTF_8};

use super::decode::{decode, is_binary_junk, looks_like_iso_2022_kr, without_makeup_sequences};
use super::{DocKind, ExtractError, Sniffed, formats, html, office, ole};

/// How many leading bytes are decoded to look for junk and HTML markers.
const PREFIX_BYTES: usize = 64 * 1024;
/// How many bytes `chardetng` reads; more rarely changes its guess.
const DETECTOR_BYTES: usize = 1024 * 1024;

/// Images docket reads with OCR, by their leading bytes.
const IMAGE_MAGIC: &[(&[u8], &str)] = &[
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"II*\0", "image/tiff"),
    (b"MM\0*", "image/tiff"),
];

/// Binary formats recognised by their leading bytes, with the MIME type reported when refused.
const MAGIC: &[(&[u8], &str)] = &[
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    // BigTIFF: leptonica, which tesseract reads images with, does not open it.
    (b"II+\0", "image/tiff"),
    (b"MM\0+", "image/tiff"),
    (b"PK\x05\x06", "empty zip archive"),
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\0", "application/x-xz"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
    (b"%!PS", "application/postscript"),
    (b"\x7fELF", "application/x-executable"),
    (b"\0asm", "application/wasm"),
    (b"SQLite format 3\0", "application/vnd.sqlite3"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
];

/// Decides what `bytes` are. `filename` only separates Markdown from plain text.
pub fn sniff(bytes: &[u8], filename: &str) -> Result<Sniffed, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::Empty);
    }
    if is_pdf(bytes) {
        return Ok(Sniffed {
            kind: DocKind::Pdf,
            encoding: None,
            content_type: "application/pdf",
        });
    }
    if let Some((_, content_type)) = IMAGE_MAGIC
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
    {
        return Ok(Sniffed {
            kind: DocKind::Image,
            encoding: None,
            content_type,
        });
    }
    if bytes.starts_with(b"PK\x03\x04") {
        let named = formats::named(filename);
        let package = match office::detect(bytes, named) {
            Ok(package) => package,
            // A damaged container named as a format docket reads is stored and fails in its
            // step, as a damaged PDF does: the person finds the document and the reason, and
            // the next file goes on. A zip named as nothing docket reads is refused.
            Err(err @ ExtractError::Corrupt { .. }) => {
                named.and_then(office::Package::by_name).ok_or(err)?
            }
            Err(err) => return Err(err),
        };
        return Ok(Sniffed {
            kind: DocKind::Package(package),
            encoding: None,
            content_type: package.mime(),
        });
    }
    if ole::is_ole(bytes) || ole::is_hwp3(bytes) {
        return ole_kind(bytes);
    }
    if bytes.starts_with(b"{\\rtf") {
        return Ok(Sniffed {
            kind: DocKind::Rtf,
            encoding: None,
            content_type: "application/rtf",
        });
    }
    if let Some(detected) = binary_magic(bytes) {
        return Err(ExtractError::Unsupported { detected });
    }

    let guessed = detect_encoding(bytes);
    let prefix = &bytes[..bytes.len().min(PREFIX_BYTES)];
    let text = decode(prefix, Some(guessed));
    if text.trim().is_empty() {
        return Err(ExtractError::Empty);
    }
    if is_binary_junk(&text) {
        return Err(ExtractError::Unsupported {
            detected: "application/octet-stream",
        });
    }

    if looks_like_email(&text) {
        return Ok(Sniffed {
            kind: DocKind::Email,
            encoding: Some(guessed),
            content_type: "message/rfc822",
        });
    }
    let is_html = html::looks_like_html(&text);
    if is_pdf_name(filename) {
        return Err(ExtractError::NotAPdf {
            detected: if is_html { "text/html" } else { "text/plain" },
        });
    }
    if is_html {
        let has_bom = Encoding::for_bom(bytes).is_some();
        let declared = if has_bom {
            None
        } else {
            html::declared_encoding(prefix)
        };
        return Ok(Sniffed {
            kind: DocKind::Html,
            encoding: Some(declared.unwrap_or(guessed)),
            content_type: "text/html",
        });
    }
    let (kind, content_type) = if let Some(content_type) = table_name(filename) {
        (DocKind::Csv, content_type)
    } else if is_markdown_name(filename) {
        (DocKind::Markdown, "text/markdown")
    } else {
        (DocKind::Text, "text/plain")
    };
    Ok(Sniffed {
        kind,
        encoding: Some(guessed),
        content_type,
    })
}

/// An OLE compound file (or HWP 3.x) by its streams: HWP 5.0 and `.xls` are read, the others
/// (and failed in their step when encrypted); legacy Word and PowerPoint and HWP 3.x are refused
/// at once with what to do.
fn ole_kind(bytes: &[u8]) -> Result<Sniffed, ExtractError> {
    if ole::is_hwp3(bytes) {
        return Err(ole::hwp3_refusal());
    }
    match ole::classify(bytes)? {
        // An encrypted Word/Excel/PowerPoint file is stored and fails in its step with
        // `encrypted`, as an encrypted PDF or HWP does.
        kind @ (ole::OleKind::Hwp | ole::OleKind::Excel97 | ole::OleKind::EncryptedOffice) => {
            Ok(Sniffed {
                kind: DocKind::Ole(kind),
                encoding: None,
                content_type: kind.content_type(),
            })
        }
        refused => Err(ole::refusal(refused)),
    }
}

/// Header names that open an RFC 822 message (a saved `.eml`, an mbox entry's headers).
const MAIL_HEADERS: &[&str] = &[
    "from",
    "to",
    "subject",
    "date",
    "received",
    "return-path",
    "message-id",
    "mime-version",
    "delivered-to",
    "reply-to",
    "cc",
    "content-type",
    "x-mailer",
    "sender",
];

/// Text that opens with a block of headers, at least two of them mail headers and one of
/// From, Subject or Date.
fn looks_like_email(text: &str) -> bool {
    let mut known = 0;
    let mut essential = false;
    for line in text.lines().take(200) {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((name, _)) = line.split_once(':') else {
            return false;
        };
        if name.is_empty() || name.contains(' ') {
            return false;
        }
        let name = name.to_ascii_lowercase();
        if MAIL_HEADERS.contains(&name.as_str()) {
            known += 1;
            essential |= matches!(name.as_str(), "from" | "subject" | "date");
        }
    }
    known >= 2 && essential
}

/// The MIME type of a table file named `.csv` or `.tsv`.
fn table_name(filename: &str) -> Option<&'static str> {
    let lower = filename.to_ascii_lowercase();
    if lower.ends_with(".csv") {
        Some("text/csv")
    } else if lower.ends_with(".tsv") || lower.ends_with(".tab") {
        Some("text/tab-separated-values")
    } else {
        None
    }
}

/// `%PDF-` at the start (after whitespace), or anywhere in the first KiB of a file that also
/// ends like a PDF: readers accept a little junk before the header, but a text file that merely
/// mentions `%PDF-` is not a PDF.
fn is_pdf(bytes: &[u8]) -> bool {
    const HEADER: &[u8] = b"%PDF-";
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    if bytes[start..].starts_with(HEADER) {
        return true;
    }
    let head = &bytes[..bytes.len().min(1024)];
    let tail = &bytes[bytes.len().saturating_sub(2048)..];
    contains(head, HEADER) && contains(tail, b"%%EOF")
}

fn binary_magic(bytes: &[u8]) -> Option<&'static str> {
    if let Some((_, mime)) = MAGIC.iter().find(|(magic, _)| bytes.starts_with(magic)) {
        return Some(mime);
    }
    // Container formats whose tag sits a few bytes in.
    if bytes.len() >= 12 && &bytes[..4] == b"RIFF" {
        return Some(match &bytes[8..12] {
            b"WEBP" => "image/webp",
            b"WAVE" => "audio/wav",
            b"AVI " => "video/x-msvideo",
            _ => "application/octet-stream",
        });
    }
    if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        return Some(match &bytes[8..12] {
            b"avif" => "image/avif",
            b"heic" | b"heix" | b"mif1" => "image/heic",
            _ => "video/mp4",
        });
    }
    None
}

/// The text encoding of `bytes`: BOM, else UTF-8 if valid, else ISO-2022-KR if announced, else
/// `chardetng`'s guess.
fn detect_encoding(bytes: &[u8]) -> &'static Encoding {
    if let Some((bom, _)) = Encoding::for_bom(bytes) {
        return bom;
    }
    if looks_like_iso_2022_kr(bytes) {
        return REPLACEMENT;
    }
    let sample = &bytes[..bytes.len().min(DETECTOR_BYTES)];
    let valid_utf8 = match std::str::from_utf8(sample) {
        Ok(_) => true,
        // A sample cut inside a character is still UTF-8.
        Err(err) => err.error_len().is_none(),
    };
    // Pure ASCII may still be ISO-2022-JP, which only the detector recognises.
    if valid_utf8 && !sample.contains(&0x1b) {
        return UTF_8;
    }
    let mut detector = chardetng::EncodingDetector::new(chardetng::Iso2022JpDetection::Allow);
    detector.feed(
        &without_makeup_sequences(sample),
        sample.len() == bytes.len(),
    );
    detector.guess(None, chardetng::Utf8Detection::Allow)
}

fn is_pdf_name(filename: &str) -> bool {
    filename.to_ascii_lowercase().ends_with(".pdf")
}

fn is_markdown_name(filename: &str) -> bool {
    let lower = filename.to_ascii_lowercase();
    [".md", ".markdown", ".mdown", ".mkd", ".mkdn"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pdf_header_after_whitespace_is_a_pdf_whatever_the_name() {
        let sniffed = sniff(b"\n%PDF-1.4\n...", "notes.txt").unwrap();
        assert_eq!(sniffed.kind, DocKind::Pdf);
        assert_eq!(sniffed.content_type, "application/pdf");
    }

    #[test]
    fn text_that_mentions_the_pdf_header_is_text() {
        let sniffed = sniff(b"A PDF starts with %PDF- and a version.", "a.txt").unwrap();
        assert_eq!(sniffed.kind, DocKind::Text);
    }

    #[test]
    fn text_named_pdf_is_refused_as_not_a_pdf() {
        let err = sniff(b"oops\n", "bad1.PDF").unwrap_err();
        assert_eq!(
            err,
            ExtractError::NotAPdf {
                detected: "text/plain"
            }
        );
        assert_eq!(
            err.to_string(),
            "named .pdf but the bytes are not a PDF (looks like text/plain)"
        );
        let html = sniff(b"<!doctype html><p>hi</p>", "page.pdf").unwrap_err();
        assert_eq!(
            html,
            ExtractError::NotAPdf {
                detected: "text/html"
            }
        );
        // The same bytes under a text name are fine.
        assert_eq!(sniff(b"oops\n", "bad1.txt").unwrap().kind, DocKind::Text);
    }

    #[test]
    fn png_jpeg_and_tiff_are_images_whatever_the_name() {
        for (bytes, mime) in [
            (&b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..], "image/png"),
            (b"\xff\xd8\xff\xe0\0\x10JFIF", "image/jpeg"),
            (b"II*\0\x08\0\0\0", "image/tiff"),
            (b"MM\0*\0\0\0\x08", "image/tiff"),
        ] {
            let sniffed = sniff(bytes, "scan.pdf").unwrap();
            assert_eq!(sniffed.kind, DocKind::Image);
            assert_eq!(sniffed.content_type, mime);
        }
        let gif = sniff(b"GIF89a\x01\0\x01\0", "photo.gif").unwrap_err();
        assert_eq!(
            gif,
            ExtractError::Unsupported {
                detected: "image/gif"
            }
        );
    }

    #[test]
    fn a_cut_zip_named_docx_is_stored_as_a_word_document_and_one_named_otherwise_is_refused() {
        let cut = b"PK\x03\x04\x14\0\x06\0rest";
        let sniffed = sniff(cut, "letter.docx").expect("kept, to fail in its step");
        assert_eq!(sniffed.kind, DocKind::Package(office::Package::Docx));
        let err = sniff(cut, "letter.bin").unwrap_err();
        assert_eq!(err.code(), "file_corrupt");
        assert!(
            err.to_string().starts_with("the zip archive is damaged"),
            "{err}"
        );
    }

    #[test]
    fn empty_and_blank_input_is_empty() {
        assert_eq!(sniff(b"", "a.txt"), Err(ExtractError::Empty));
        assert_eq!(sniff(b" \n\t\n", "a.txt"), Err(ExtractError::Empty));
    }

    #[test]
    fn control_heavy_bytes_are_octet_stream() {
        let junk: Vec<u8> = (0u8..=255).cycle().skip(1).take(4000).collect();
        let err = sniff(&junk, "data.txt").unwrap_err();
        assert_eq!(
            err,
            ExtractError::Unsupported {
                detected: "application/octet-stream"
            }
        );
    }

    #[test]
    fn markdown_needs_both_text_bytes_and_a_markdown_name() {
        assert_eq!(
            sniff(b"# Title\n", "README.MD").unwrap().kind,
            DocKind::Markdown
        );
        assert_eq!(sniff(b"# Title\n", "README").unwrap().kind, DocKind::Text);
    }

    #[test]
    fn utf16_with_bom_is_detected() {
        let mut bytes = vec![0xfe, 0xff];
        for unit in "Grüße, 世界".encode_utf16() {
            bytes.extend_from_slice(&unit.to_be_bytes());
        }
        let sniffed = sniff(&bytes, "a.txt").unwrap();
        assert_eq!(sniffed.encoding, Some(encoding_rs::UTF_16BE));
    }

    #[test]
    fn html_meta_charset_wins_over_the_guess() {
        let page = b"<!doctype html><html><head><meta charset=\"windows-1251\"></head>\
            <body><p>\xcf\xf0\xe8\xe2\xe5\xf2</p></body></html>";
        let sniffed = sniff(page, "page.txt").unwrap();
        assert_eq!(sniffed.kind, DocKind::Html);
        assert_eq!(sniffed.encoding, Some(encoding_rs::WINDOWS_1251));
    }
}
