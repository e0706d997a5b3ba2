//! HWP 5.0 documents (Hangul Word Processor, the format Korean government, schools and most
//! companies exchange).
//!
//! The `FileHeader` stream says whether the other streams are compressed (raw deflate), whether
//! a password protects the document (refused: [`ExtractError::Encrypted`]) and whether it is a
//! distribution (배포용) document, whose body sits AES-encrypted in `ViewText/` with its key in
//! the file ([`super::hwp_crypt`]). The body is `BodyText/Section0…N`, records turned into
//! paragraphs and tables by [`super::hwp_body`]. Paragraphs whose style is an outline level
//! ("개요 1", "Outline 1"…) are headings: the text under them gets their path as its
//! [`Location::Section`]. When a distribution document's body cannot be decrypted, the
//! `PrvText` preview (the first page, as plain UTF-16) is returned under a location that says so.

use std::io::Read;

use flate2::read::DeflateDecoder;

use super::budget::{Budget, MAX_STREAM_BYTES};
use super::hwp_body::{Block, blocks};
use super::hwp_records::{STYLE, damaged, records, style_names};
use super::{Ole, hwp_crypt, read_stream};
use crate::extract::csv::linearise;
use crate::extract::{ExtractError, Location, Section};

/// FileHeader property bits.
const COMPRESSED: u32 = 1;
const PASSWORD: u32 = 1 << 1;
const DISTRIBUTION: u32 = 1 << 2;
/// The most BodyText sections read (a 1,030-page report has 41).
const MAX_SECTIONS: usize = 10_000;
/// A heading is a short paragraph; a long one in an outline style is body text.
const MAX_HEADING_CHARS: usize = 200;
/// Where the preview of an undecryptable distribution document is said to come from.
pub const PREVIEW_LABEL: &str = "first-page preview (distribution document, body not readable)";

/// Extracts an HWP 5.0 document's text.
pub(super) fn extract(
    file: &mut Ole<'_>,
    budget: &mut Budget,
) -> Result<Vec<Section>, ExtractError> {
    let header = read_stream(file, "/FileHeader", budget)?;
    if !header.starts_with(b"HWP Document File") {
        return Err(damaged("its FileHeader has no HWP signature"));
    }
    let flags = header
        .get(36..40)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| damaged("its FileHeader is cut short"))?;
    if flags & PASSWORD != 0 {
        return Err(ExtractError::Encrypted {
            format: "HWP document",
        });
    }
    let compressed = flags & COMPRESSED != 0;
    let docinfo = read_stream(file, "/DocInfo", budget)?;
    let docinfo = inflate(docinfo, compressed, budget)?;
    let levels = heading_levels(&docinfo, budget)?;
    let distribution = flags & DISTRIBUTION != 0;
    let storage = if distribution { "ViewText" } else { "BodyText" };
    let mut document = Document::new(levels);
    for n in 0..MAX_SECTIONS {
        let path = format!("/{storage}/Section{n}");
        if !file.is_stream(&path) {
            break;
        }
        let raw = read_stream(file, &path, budget)?;
        let raw = if distribution {
            match hwp_crypt::decrypt_view_text(&raw) {
                Ok(plain) => plain,
                Err(_) => return preview(file, budget),
            }
        } else {
            raw
        };
        let data = inflate(raw, compressed, budget)?;
        document.add_section(&blocks(&records(&data, budget)?));
    }
    let sections = document.finish();
    if sections.is_empty() {
        return Err(ExtractError::NoText);
    }
    Ok(sections)
}

/// A compressed stream inflated (raw deflate, as HWP writes it), within the budget.
fn inflate(raw: Vec<u8>, compressed: bool, budget: &mut Budget) -> Result<Vec<u8>, ExtractError> {
    if !compressed {
        return Ok(raw);
    }
    let mut out = Vec::new();
    DeflateDecoder::new(raw.as_slice())
        .take(MAX_STREAM_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| damaged(&format!("a compressed stream does not inflate ({e})")))?;
    budget.take_bytes(out.len())?;
    Ok(out)
}

/// Each style's outline level (1 for "개요 1" / "Outline 1"…), by style id.
fn heading_levels(docinfo: &[u8], budget: &mut Budget) -> Result<Vec<Option<usize>>, ExtractError> {
    let levels = records(docinfo, budget)?
        .iter()
        .filter(|r| r.tag == STYLE)
        .map(|r| {
            let (local, english) = style_names(r)?;
            // "개요 1" in Hangul's own templates, "개요1" in some converted files.
            let number = local
                .strip_prefix("개요")
                .or_else(|| english.strip_prefix("Outline"))?;
            number
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=10).contains(n))
        })
        .collect();
    Ok(levels)
}

/// Sections being built: text accumulates under the current heading path.
struct Document {
    levels: Vec<Option<usize>>,
    path: Vec<(usize, String)>,
    text: Vec<String>,
    sections: Vec<Section>,
}

impl Document {
    fn new(levels: Vec<Option<usize>>) -> Self {
        Document {
            levels,
            path: Vec::new(),
            text: Vec::new(),
            sections: Vec::new(),
        }
    }

    fn add_section(&mut self, blocks: &[Block]) {
        for block in blocks {
            match block {
                Block::Paragraph { text, style } => {
                    let text = text.trim();
                    if text.is_empty() {
                        continue;
                    }
                    match self.heading_level(text, *style) {
                        Some(level) => self.heading(level, text),
                        None => self.text.push(text.to_owned()),
                    }
                }
                Block::Table(rows) => {
                    let lines = linearise(rows);
                    if !lines.is_empty() {
                        self.text.push(lines.join("\n"));
                    }
                }
            }
        }
        // Without headings, each BodyText section is a section of its own.
        if self.levels.iter().all(Option::is_none) {
            self.flush();
        }
    }

    fn heading_level(&self, text: &str, style: u8) -> Option<usize> {
        let level = (*self.levels.get(usize::from(style))?)?;
        let short = text.chars().count() <= MAX_HEADING_CHARS && !text.contains('\n');
        short.then_some(level)
    }

    fn heading(&mut self, level: usize, text: &str) {
        self.flush();
        self.path.retain(|(l, _)| *l < level);
        self.path.push((level, text.to_owned()));
        // The heading is text too: a search for its words finds the section.
        self.text.push(text.to_owned());
    }

    fn flush(&mut self) {
        if self.text.is_empty() {
            return;
        }
        let path = self.path.iter().map(|(_, t)| t.clone()).collect();
        self.sections.push(Section {
            location: Location::Section { path },
            text: std::mem::take(&mut self.text).join("\n\n"),
        });
    }

    fn finish(mut self) -> Vec<Section> {
        self.flush();
        self.sections
    }
}

/// The `PrvText` preview of a document whose body cannot be read, labelled as such.
fn preview(file: &mut Ole<'_>, budget: &mut Budget) -> Result<Vec<Section>, ExtractError> {
    let refused = ExtractError::Encrypted {
        format: "HWP distribution document",
    };
    if !file.is_stream("/PrvText") {
        return Err(refused);
    }
    let raw = read_stream(file, "/PrvText", budget)?;
    let units = raw
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]));
    let text: String = char::decode_utf16(units).filter_map(Result::ok).collect();
    let text = text.trim().replace('\r', "\n");
    if text.is_empty() {
        return Err(refused);
    }
    Ok(vec![Section {
        location: Location::Section {
            path: vec![PREVIEW_LABEL.to_owned()],
        },
        text,
    }])
}
