//! E-mail messages (`.eml`, MIME): the headers a person reads (From, To, Date, Subject), then
//! the body, and the attached files for the caller to extract with their own readers.
//!
//! MIME is parsed by `mail-parser` (maintained, no unsafe code, used in production mail
//! servers): multipart trees, quoted-printable and base64, RFC 2047 encoded words and body
//! charsets (windows-1255, ISO-2022-JP, EUC-KR… through `encoding_rs`) are its job, and doing
//! them by hand is where home-grown readers go wrong. The body is the first text/plain part;
//! a message with only HTML has it converted by docket's own HTML reader ([`super::html`]).
//! Images referenced by `cid:` from the HTML (logos, signatures) are not attachments a person
//! searches; they are skipped, as are attachments past [`MAX_ATTACHMENTS`] or nested
//! messages deeper than [`MAX_DEPTH`].

use mail_parser::{Message, MessageParser, MessagePart, MimeHeaders};

use super::{DocKind, ExtractError, Location, Section, Sniffed, html};

/// The most attachments returned from one message.
pub const MAX_ATTACHMENTS: usize = 32;
/// How deep messages attached to messages are followed: a message at this depth gives its own
/// text but no attachments.
pub const MAX_DEPTH: usize = 3;

/// A message read: its text and the files attached to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Email {
    /// Headers and body, one section.
    pub sections: Vec<Section>,
    /// Attached files in order, for the caller to extract by their bytes; label their text
    /// with [`Location::Attachment`].
    pub attachments: Vec<Attachment>,
}

/// One attached file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The file name the sender gave it (or "attachment N").
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Reads a message; `depth` is 0 for an uploaded file and one more for each message it is
/// attached to.
pub fn extract_email(bytes: &[u8], depth: usize) -> Result<Email, ExtractError> {
    let message = MessageParser::default()
        .parse(bytes)
        .filter(|m| m.from().is_some() || m.subject().is_some() || m.date().is_some())
        .ok_or_else(|| ExtractError::Corrupt {
            format: "e-mail message",
            reason: "no message headers (From, Subject or Date) were found".into(),
        })?;
    let mut text = headers(&message);
    let body = body(&message)?;
    if !body.is_empty() {
        text.push_str("\n\n");
        text.push_str(&body);
    }
    let attachments = if depth < MAX_DEPTH {
        attachments(&message)
    } else {
        Vec::new()
    };
    Ok(Email {
        sections: vec![Section {
            location: Location::Section { path: Vec::new() },
            text,
        }],
        attachments,
    })
}

/// `From: Name <address>` and the others, one a line, those present.
fn headers(message: &Message<'_>) -> String {
    let addresses = |address: Option<&mail_parser::Address<'_>>| -> Option<String> {
        let list: Vec<String> = address?
            .iter()
            .map(|a| match (a.name.as_deref(), a.address.as_deref()) {
                (Some(name), Some(address)) => format!("{name} <{address}>"),
                (Some(only), None) | (None, Some(only)) => only.to_owned(),
                (None, None) => String::new(),
            })
            .filter(|a| !a.is_empty())
            .collect();
        (!list.is_empty()).then(|| list.join(", "))
    };
    let lines = [
        ("From", addresses(message.from())),
        ("To", addresses(message.to())),
        ("Date", message.date().map(|d| d.to_rfc3339())),
        ("Subject", message.subject().map(str::to_owned)),
    ];
    lines
        .into_iter()
        .filter_map(|(name, value)| Some(format!("{name}: {}", value?.trim())))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first text/plain body, or else the first HTML body as text.
fn body(message: &Message<'_>) -> Result<String, ExtractError> {
    let plain = message.text_bodies().find(|p| !p.is_text_html());
    if let Some(text) = plain.and_then(MessagePart::text_contents) {
        return Ok(text.trim().replace("\r\n", "\n"));
    }
    let Some(html) = message.html_bodies().find_map(MessagePart::text_contents) else {
        return Ok(String::new());
    };
    let sniffed = Sniffed {
        kind: DocKind::Html,
        encoding: Some(encoding_rs::UTF_8),
        content_type: "text/html",
    };
    let pages = html::extract_html(html.as_bytes(), &sniffed)?;
    Ok(pages
        .into_iter()
        .map(|p| p.text)
        .collect::<Vec<_>>()
        .join("\n\n"))
}

/// Attached files, without images the HTML body shows inline by `cid:`.
fn attachments(message: &Message<'_>) -> Vec<Attachment> {
    message
        .attachments()
        .filter(|part| !is_inline_image(part) && !part.is_empty())
        .take(MAX_ATTACHMENTS)
        .enumerate()
        .map(|(i, part)| Attachment {
            name: part
                .attachment_name()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("attachment {}", i + 1)),
            bytes: part.contents().to_vec(),
        })
        .collect()
}

fn is_inline_image(part: &MessagePart<'_>) -> bool {
    let image = part
        .content_type()
        .is_some_and(|t| t.ctype().eq_ignore_ascii_case("image"));
    image && (part.content_id().is_some() || part.attachment_name().is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/fixtures/office/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn a_windows_1255_message_reads_in_hebrew_with_its_encoded_subject() {
        let email = extract_email(&fixture("hebrew-windows-1255.eml"), 0).unwrap();
        let text = &email.sections[0].text;
        assert!(text.contains("הזמנתי את החוברת"), "{text}");
        let subject = text.lines().find(|l| l.starts_with("Subject: ")).unwrap();
        assert!(
            subject
                .chars()
                .any(|c| ('\u{5d0}'..='\u{5ea}').contains(&c)),
            "{subject}"
        );
        assert!(!text.contains("=?"), "an encoded word was left: {text}");
    }

    #[test]
    fn the_pdf_attachment_comes_back_as_bytes_with_its_name() {
        let email = extract_email(&fixture("pdf-attachment.eml"), 0).unwrap();
        let text = &email.sections[0].text;
        assert!(
            text.contains("container email with an embedded pdf"),
            "{text}"
        );
        assert!(text.starts_with("From: "), "{text}");
        assert_eq!(email.attachments.len(), 1);
        let attached = &email.attachments[0];
        assert_eq!(attached.name, "testPDF_incrementalUpdates.pdf");
        assert!(attached.bytes.starts_with(b"%PDF-"));
        // At the depth cap the message still reads, without its attachments.
        let deep = extract_email(&fixture("pdf-attachment.eml"), MAX_DEPTH).unwrap();
        assert!(deep.attachments.is_empty());
    }

    #[test]
    fn an_html_only_message_is_read_as_text_and_bytes_without_headers_are_refused() {
        let eml = b"From: a@example.org\r\nSubject: =?UTF-8?B?7ZWc6rWt7Ja0?=\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello <b>there</b></p><script>x()</script>";
        let email = extract_email(eml, 0).unwrap();
        assert_eq!(
            email.sections[0].text,
            "From: a@example.org\nSubject: 한국어\n\nHello there"
        );
        assert!(matches!(
            extract_email(b"just some words\n", 0),
            Err(ExtractError::Corrupt { .. })
        ));
    }
}
