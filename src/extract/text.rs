//! Text, Markdown and HTML extraction: decoded bytes as one page.
//!
//! Plain text and Markdown are kept as written (Markdown markup included: it reads well enough
//! and embeds fine); only line endings and control characters are normalised. HTML goes through
//! the parser in [`super::html`].

use super::decode::{decode, normalize};
use super::{DocKind, ExtractError, Page, Sniffed, html};

/// Extracts the text of a non-PDF document as pages (always one page for these kinds).
pub fn extract_text(bytes: &[u8], sniffed: &Sniffed) -> Result<Vec<Page>, ExtractError> {
    if bytes.is_empty() {
        return Err(ExtractError::Empty);
    }
    match sniffed.kind {
        DocKind::Html => html::extract_html(bytes, sniffed),
        DocKind::Text | DocKind::Markdown => {
            let text = normalize(&decode(bytes, sniffed.encoding));
            if text.trim().is_empty() {
                return Err(ExtractError::NoText);
            }
            Ok(vec![Page { number: 1, text }])
        }
        // PDFs and images need the isolated extractor; reaching here is a caller's mistake.
        DocKind::Pdf
        | DocKind::Image
        | DocKind::Package(_)
        | DocKind::Ole(_)
        | DocKind::Rtf
        | DocKind::Email
        | DocKind::Csv => Err(ExtractError::Internal {
            reason: "a document with its own reader was passed to the text extractor".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::sniff;

    #[test]
    fn windows_1252_text_decodes_without_mojibake() {
        let bytes = b"Caf\xe9 cr\xe8me, na\xefve fa\xe7ade \x96 \x93quoted\x94 r\xe9sum\xe9.\r\n";
        let sniffed = sniff(bytes, "menu.txt").unwrap();
        let pages = extract_text(bytes, &sniffed).unwrap();
        assert_eq!(pages[0].text, "Café crème, naïve façade – “quoted” résumé.");
    }

    #[test]
    fn markdown_stays_as_written_on_page_one() {
        let bytes = "# Title\r\n\r\nSome *text*.\r\n".as_bytes();
        let sniffed = sniff(bytes, "notes.md").unwrap();
        let pages = extract_text(bytes, &sniffed).unwrap();
        assert_eq!(
            pages,
            vec![Page {
                number: 1,
                text: "# Title\n\nSome *text*.".into()
            }]
        );
    }
}
