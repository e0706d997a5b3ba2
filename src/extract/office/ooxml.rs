//! Office Open XML: Word (DOCX) and PowerPoint (PPTX) packages.
//!
//! DOCX: the body in order (paragraphs, tables linearised), headings from the paragraph styles
//! whose name is "heading N" or that carry an outline level; then headers and footers once
//! (the same footer on every page is one text), footnotes, endnotes and comments, each under a
//! heading of its own. PPTX: slides in show order (the presentation's slide list, not the file
//! names), each with its speaker notes.

use std::collections::{BTreeSet, HashMap};

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

use super::archive::Archive;
use super::outline::Outline;
use super::xml::{self, Vocabulary, attribute, local, plain, value};
use crate::extract::{ExtractError, Location, Section};

const WORD: Vocabulary = Vocabulary {
    paragraph: &["p"],
    text: &["t"],
    space: &["tab", "br", "cr"],
    skip: &["instrText", "delText", "Fallback"],
    table: "tbl",
    row: "tr",
    cell: "tc",
    part: None,
};

const SLIDE: Vocabulary = Vocabulary {
    paragraph: &["p"],
    text: &["t"],
    space: &["br", "tab"],
    skip: &["fld"],
    table: "tbl",
    row: "tr",
    cell: "tc",
    part: None,
};

const WORD_FORMAT: &str = "Word document";
const SLIDES_FORMAT: &str = "PowerPoint presentation";

/// The sections of a DOCX package.
pub(crate) fn read_docx(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let mut zip = Archive::open(bytes, WORD_FORMAT)?;
    let main = main_part(&mut zip, "word/document.xml")?;
    let levels = match zip.read_text("word/styles.xml")? {
        Some(styles) => heading_styles(&styles),
        None => HashMap::new(),
    };
    let heading = |start: &BytesStart| -> Option<u8> {
        match local(start).as_str() {
            "pStyle" => attribute(start, "val").and_then(|id| levels.get(&id).copied()),
            "outlineLvl" => outline_level(start),
            _ => None,
        }
    };
    let body = zip
        .read_text(&main)?
        .ok_or_else(|| missing(WORD_FORMAT, &main))?;
    let mut outline = Outline::default();
    outline.extend(xml::walk(&body, WORD_FORMAT, &WORD, &heading)?);

    let names = zip.names();
    let mut seen = BTreeSet::new();
    let mut margins = Vec::new();
    for name in names.iter().filter(|n| is_margin_part(n)) {
        let Some(part) = zip.read_text(name)? else {
            continue;
        };
        let text = plain(&xml::walk(&part, WORD_FORMAT, &WORD, &|_| None)?);
        if !text.is_empty() && seen.insert(text.clone()) {
            margins.push(text);
        }
    }
    outline.appendix("Headers and footers", margins.join("\n\n"));
    for (part, title) in [
        ("word/footnotes.xml", "Footnotes"),
        ("word/endnotes.xml", "Endnotes"),
        ("word/comments.xml", "Comments"),
    ] {
        if let Some(notes) = zip.read_text(part)? {
            outline.appendix(
                title,
                plain(&xml::walk(&notes, WORD_FORMAT, &WORD, &|_| None)?),
            );
        }
    }
    Ok(outline.finish())
}

/// The sections of a PPTX package: one per slide, speaker notes included.
pub(crate) fn read_pptx(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let mut zip = Archive::open(bytes, SLIDES_FORMAT)?;
    let main = main_part(&mut zip, "ppt/presentation.xml")?;
    let presentation = zip
        .read_text(&main)?
        .ok_or_else(|| missing(SLIDES_FORMAT, &main))?;
    let targets = relationships(&mut zip, &main)?;
    let mut sections = Vec::new();
    for (at, id) in slide_ids(&presentation)?.iter().enumerate() {
        let Some((_, slide_part)) = targets.get(id) else {
            continue;
        };
        let Some(slide) = zip.read_text(slide_part)? else {
            continue;
        };
        let mut text = plain(&xml::walk(&slide, SLIDES_FORMAT, &SLIDE, &|_| None)?);
        let notes_part = relationships(&mut zip, slide_part)?
            .into_values()
            .find(|(kind, _)| kind.ends_with("/notesSlide"));
        if let Some((_, notes_part)) = notes_part
            && let Some(notes) = zip.read_text(&notes_part)?
        {
            let notes = plain(&xml::walk(&notes, SLIDES_FORMAT, &SLIDE, &|_| None)?);
            if !notes.is_empty() {
                text.push_str("\n\nSpeaker notes: ");
                text.push_str(&notes);
            }
        }
        let number = u32::try_from(at + 1).unwrap_or(u32::MAX);
        sections.push(Section {
            location: Location::Slide { number },
            text,
        });
    }
    Ok(sections)
}

/// The main part named by the package's root relationships, or the usual name.
fn main_part(zip: &mut Archive, usual: &str) -> Result<String, ExtractError> {
    let root = relationships(zip, "")?;
    Ok(root
        .into_values()
        .find(|(kind, _)| kind.ends_with("/officeDocument"))
        .map_or_else(|| usual.to_owned(), |(_, target)| target))
}

/// A part's relationships: id → (type, target part name resolved against the part's folder).
fn relationships(
    zip: &mut Archive,
    part: &str,
) -> Result<HashMap<String, (String, String)>, ExtractError> {
    let (folder, file) = part.rsplit_once('/').unwrap_or(("", part));
    let rels = if folder.is_empty() {
        format!("_rels/{file}.rels")
    } else {
        format!("{folder}/_rels/{file}.rels")
    };
    let Some(xml) = zip.read_text(&rels)? else {
        return Ok(HashMap::new());
    };
    let mut found = HashMap::new();
    for start in elements(&xml, "Relationship")? {
        let (Some(id), Some(kind), Some(target)) = (
            attribute(&start, "Id"),
            attribute(&start, "Type"),
            attribute(&start, "Target"),
        ) else {
            continue;
        };
        found.insert(id, (kind, resolve(folder, &target)));
    }
    Ok(found)
}

/// `target` relative to `folder` (or absolute from the package root), `..` folded.
pub(crate) fn resolve(folder: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        folder.split('/').filter(|p| !p.is_empty()).collect()
    };
    for piece in target.split('/') {
        match piece {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Every start tag of local name `name` in `xml`, owned.
pub(crate) fn elements(xml: &str, name: &str) -> Result<Vec<BytesStart<'static>>, ExtractError> {
    let mut reader = Reader::from_str(xml);
    let mut found = Vec::new();
    loop {
        match reader.read_event() {
            Ok(Event::Start(start) | Event::Empty(start)) if local(&start) == name => {
                found.push(start.into_owned());
            }
            Ok(Event::DocType(_)) => {
                return Err(ExtractError::TooComplex {
                    reason: "an XML part declares a document type (DTD)".into(),
                });
            }
            Ok(Event::Eof) => return Ok(found),
            Ok(_) => {}
            Err(err) => {
                return Err(ExtractError::Corrupt {
                    format: "document",
                    reason: format!("its XML does not parse ({err})"),
                });
            }
        }
    }
}

/// The relationship ids of the slides, in show order.
fn slide_ids(presentation: &str) -> Result<Vec<String>, ExtractError> {
    Ok(elements(presentation, "sldId")?
        .iter()
        .filter_map(|start| {
            start.attributes().flatten().find_map(|attr| {
                // `r:id`, not the numeric `id` beside it.
                (attr.key.prefix().is_some() && attr.key.local_name().as_ref() == b"id")
                    .then(|| value(&attr))
            })
        })
        .collect())
}

/// Paragraph style id → heading level, from `word/styles.xml`: styles named "heading N" (the
/// built-in names, whatever the display language) or carrying an outline level.
fn heading_styles(styles: &str) -> HashMap<String, u8> {
    let mut levels = HashMap::new();
    let mut reader = Reader::from_str(styles);
    let mut current: Option<String> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(start)) if local(&start) == "style" => {
                current = attribute(&start, "styleId");
            }
            Ok(Event::Start(start) | Event::Empty(start)) => {
                let Some(id) = current.clone() else {
                    continue;
                };
                let level = match local(&start).as_str() {
                    "name" => attribute(&start, "val").and_then(|name| {
                        let lower = name.to_ascii_lowercase();
                        lower.strip_prefix("heading ")?.trim().parse::<u8>().ok()
                    }),
                    "outlineLvl" => outline_level(&start),
                    _ => None,
                };
                if let Some(level) = level.filter(|l| (1..=9).contains(l)) {
                    levels.entry(id).or_insert(level);
                }
            }
            Ok(Event::End(end)) if end.local_name().as_ref() == b"style" => current = None,
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    levels
}

/// `w:outlineLvl w:val="0"` is a level-1 heading; 9 means body text.
fn outline_level(start: &BytesStart) -> Option<u8> {
    let value: u8 = attribute(start, "val")?.parse().ok()?;
    (value < 9).then_some(value + 1)
}

fn is_margin_part(name: &str) -> bool {
    let Some(file) = name.strip_prefix("word/") else {
        return false;
    };
    (file.starts_with("header") || file.starts_with("footer")) && file.ends_with(".xml")
}

fn missing(format: &'static str, part: &str) -> ExtractError {
    ExtractError::Corrupt {
        format,
        reason: format!("the package has no {part}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_against_their_folder() {
        assert_eq!(resolve("ppt", "slides/slide1.xml"), "ppt/slides/slide1.xml");
        assert_eq!(
            resolve("ppt/slides", "../notesSlides/notesSlide1.xml"),
            "ppt/notesSlides/notesSlide1.xml"
        );
        assert_eq!(resolve("", "/word/document.xml"), "word/document.xml");
    }
}
