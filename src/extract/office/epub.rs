//! EPUB: the chapters in spine order (the reading order the package declares, not the file
//! names), each read as HTML by [`crate::extract::html`] and titled by its first heading (or
//! its `<title>`), which becomes the chapter's heading path.

use std::collections::HashMap;

use super::archive::Archive;
use super::ooxml::{elements, resolve};
use super::xml::{attribute, collapse};
use crate::extract::html::extract_html;
use crate::extract::{DocKind, ExtractError, Location, Section, Sniffed};

const FORMAT: &str = "EPUB e-book";

/// The sections of an EPUB: one a chapter of the spine.
pub(crate) fn read_epub(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let mut zip = Archive::open(bytes, FORMAT)?;
    let opf_path = package_path(&mut zip)?;
    let opf = zip
        .read_text(&opf_path)?
        .ok_or_else(|| corrupt(format!("the package file {opf_path} is missing")))?;
    let folder = opf_path.rsplit_once('/').map_or("", |(folder, _)| folder);
    let manifest: HashMap<String, String> = elements(&opf, "item")?
        .iter()
        .filter_map(|item| Some((attribute(item, "id")?, attribute(item, "href")?)))
        .collect();
    let html = Sniffed {
        kind: DocKind::Html,
        encoding: Some(encoding_rs::UTF_8),
        content_type: "text/html",
    };
    let mut sections = Vec::new();
    for itemref in elements(&opf, "itemref")? {
        let Some(href) = attribute(&itemref, "idref").and_then(|id| manifest.get(&id)) else {
            continue;
        };
        let part = resolve(folder, &percent_decoded(href));
        let Some(chapter) = zip.read(&part)? else {
            continue;
        };
        // A chapter of only images (a cover) has no text; the others still count.
        let text = match extract_html(&chapter, &html) {
            Ok(pages) => pages
                .into_iter()
                .map(|p| p.text)
                .collect::<Vec<_>>()
                .join("\n\n"),
            Err(ExtractError::NoText) => continue,
            Err(err) => return Err(err),
        };
        let path = title(&String::from_utf8_lossy(&chapter))
            .into_iter()
            .collect();
        sections.push(Section {
            location: Location::Section { path },
            text,
        });
    }
    Ok(sections)
}

/// Where `META-INF/container.xml` says the package file is, or the first `.opf` entry.
fn package_path(zip: &mut Archive) -> Result<String, ExtractError> {
    if let Some(container) = zip.read_text("META-INF/container.xml")?
        && let Some(path) = elements(&container, "rootfile")?
            .iter()
            .find_map(|root| attribute(root, "full-path"))
    {
        return Ok(path);
    }
    zip.names()
        .into_iter()
        .find(|name| name.to_ascii_lowercase().ends_with(".opf"))
        .ok_or_else(|| corrupt("no package (.opf) file".into()))
}

/// The chapter's first `h1`–`h3`, or its `<title>`.
fn title(xhtml: &str) -> Option<String> {
    let document = scraper::Html::parse_document(xhtml);
    for selector in ["h1, h2, h3", "title"] {
        let Ok(selector) = scraper::Selector::parse(selector) else {
            continue;
        };
        if let Some(found) = document.select(&selector).next() {
            let text = collapse(&found.text().collect::<String>());
            if !text.is_empty() {
                return Some(text);
            }
        }
    }
    None
}

/// `%20` and the like in a manifest href.
fn percent_decoded(href: &str) -> String {
    let bytes = href.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[at], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn corrupt(reason: String) -> ExtractError {
    ExtractError::Corrupt {
        format: FORMAT,
        reason,
    }
}
