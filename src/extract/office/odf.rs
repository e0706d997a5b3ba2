//! OpenDocument text (ODT) and presentations (ODP): `content.xml`, whose `text:h` elements
//! carry their outline level and whose `draw:page` elements are the slides (speaker notes
//! inside them).

use quick_xml::events::BytesStart;

use super::archive::Archive;
use super::outline::Outline;
use super::xml::{self, Block, Vocabulary, attribute, local, plain};
use crate::extract::{ExtractError, Location, Section};

const ODF: Vocabulary = Vocabulary {
    paragraph: &["p", "h"],
    text: &["p", "h", "span", "a", "list-item"],
    space: &["s", "tab", "line-break"],
    skip: &["tracked-changes"],
    table: "table",
    row: "table-row",
    cell: "table-cell",
    part: Some("page"),
};

/// The sections of an ODT: the headings' paths.
pub(crate) fn read_odt(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let format = "OpenDocument text";
    let blocks = content(bytes, format)?;
    let mut outline = Outline::default();
    outline.extend(blocks);
    Ok(outline.finish())
}

/// The sections of an ODP: one a slide.
pub(crate) fn read_odp(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    let format = "OpenDocument presentation";
    let blocks = content(bytes, format)?;
    let slides = blocks.split(|block| *block == Block::Break).skip(1);
    Ok(slides
        .enumerate()
        .map(|(at, slide)| Section {
            location: Location::Slide {
                number: u32::try_from(at + 1).unwrap_or(u32::MAX),
            },
            text: plain(slide),
        })
        .collect())
}

fn content(bytes: &[u8], format: &'static str) -> Result<Vec<Block>, ExtractError> {
    let mut zip = Archive::open(bytes, format)?;
    let content = zip
        .read_text("content.xml")?
        .ok_or_else(|| ExtractError::Corrupt {
            format,
            reason: "the package has no content.xml".into(),
        })?;
    xml::walk(&content, format, &ODF, &heading)
}

fn heading(start: &BytesStart) -> Option<u8> {
    if local(start) != "h" {
        return None;
    }
    let level = attribute(start, "outline-level").and_then(|l| l.parse::<u8>().ok());
    Some(level.unwrap_or(1).clamp(1, 9))
}
