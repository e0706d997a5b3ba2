//! HWPX (OWPML, KS X 6101): Hangul documents as a zip of XML. The body is in
//! `Contents/section0.xml`, `section1.xml`, … read in number order from the container's own
//! listing, so a package without `META-INF/manifest.xml` (or with a damaged `content.hpf`) is
//! read all the same. Paragraphs are `hp:p` with their text in `hp:t`; tables (`hp:tbl`) sit
//! inside paragraphs and are linearised. Headings: paragraphs whose style is one of the outline
//! styles (`개요 N`, "Outline N") in `Contents/header.xml`. Text is kept whole as XML gives it
//! (UTF-8), so Korean syllables are never split.

use std::collections::HashMap;

use quick_xml::events::BytesStart;

use super::archive::Archive;
use super::ooxml::elements;
use super::outline::Outline;
use super::xml::{self, Vocabulary, attribute, local};
use crate::extract::{ExtractError, Section};

const FORMAT: &str = "HWPX document";

const OWPML: Vocabulary = Vocabulary {
    paragraph: &["p"],
    text: &["t"],
    space: &["tab", "lineBreak"],
    skip: &["secPr", "linesegarray"],
    table: "tbl",
    row: "tr",
    cell: "tc",
    part: None,
};

/// The sections of an HWPX document.
pub(crate) fn read_hwpx(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let mut zip = Archive::open(bytes, FORMAT)?;
    let mut parts: Vec<(u32, String)> = zip
        .names()
        .into_iter()
        .filter_map(|name| Some((section_number(&name)?, name)))
        .collect();
    parts.sort();
    if parts.is_empty() {
        return Err(ExtractError::Corrupt {
            format: FORMAT,
            reason: "the package has no Contents/section*.xml".into(),
        });
    }
    let levels = match zip.read_text("Contents/header.xml")? {
        Some(header) => outline_styles(&header)?,
        None => HashMap::new(),
    };
    let heading = |start: &BytesStart| -> Option<u8> {
        if local(start) != "p" {
            return None;
        }
        attribute(start, "styleIDRef").and_then(|id| levels.get(&id).copied())
    };
    let mut outline = Outline::default();
    for (_, name) in parts {
        if let Some(section) = zip.read_text(&name)? {
            outline.extend(xml::walk(&section, FORMAT, &OWPML, &heading)?);
        }
    }
    Ok(outline.finish())
}

/// `Contents/section12.xml` → 12.
fn section_number(name: &str) -> Option<u32> {
    name.strip_prefix("Contents/section")?
        .strip_suffix(".xml")?
        .parse()
        .ok()
}

/// Style id → outline level, for the outline styles (`개요 1`, engName "Outline 1").
fn outline_styles(header: &str) -> Result<HashMap<String, u8>, ExtractError> {
    let mut levels = HashMap::new();
    for style in elements(header, "style")? {
        let names = [attribute(&style, "name"), attribute(&style, "engName")];
        let level = names.iter().flatten().find_map(|name| {
            let number = name
                .strip_prefix("개요")
                .or_else(|| name.strip_prefix("Outline"))?;
            number.trim().parse::<u8>().ok()
        });
        if let (Some(id), Some(level)) = (attribute(&style, "id"), level) {
            levels.insert(id, level.clamp(1, 9));
        }
    }
    Ok(levels)
}
