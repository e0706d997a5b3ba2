//! The zip family: Word, PowerPoint and Excel packages (OOXML), OpenDocument text,
//! presentations and spreadsheets, EPUB and HWPX, told apart by what is inside the container
//! ([`detect`]): `[Content_Types].xml` names the main part of an OOXML package, a `mimetype`
//! entry names the others, and an HWPX or EPUB without one is still known by its parts.
//!
//! Each reader returns [`Section`]s: text with its [`Location`](crate::extract::Location) (a
//! heading path, a slide, a sheet's rows).
//!
//! **In-process, with explicit caps**, unlike PDFs: these readers are zip + quick-xml (and
//! calamine), safe Rust that neither loops nor corrupts memory on hostile input, so the only
//! danger is size, and every size is capped where it is read ([`archive`]: entries, bytes
//! inflated, inflation ratio; [`xml`]: nesting depth, no DTD, no entity expansion). They run
//! on a blocking thread under the extraction deadline. The child process would add a spawn
//! and a JSON round trip per document for no protection these caps do not already give.

mod archive;
mod epub;
mod hwpx;
mod odf;
mod ooxml;
mod outline;
mod sheet;
mod xml;

use super::{ExtractError, Section};
use archive::Archive;

/// A zip-family format docket reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Package {
    Docx,
    Pptx,
    Xlsx,
    Odt,
    Odp,
    Ods,
    Epub,
    Hwpx,
}

impl Package {
    /// Every package kind.
    pub const ALL: [Package; 8] = [
        Package::Docx,
        Package::Pptx,
        Package::Xlsx,
        Package::Odt,
        Package::Odp,
        Package::Ods,
        Package::Epub,
        Package::Hwpx,
    ];

    /// The package kind whose name is `name` (as [`super::formats::named`] gives it).
    pub fn by_name(name: &str) -> Option<Package> {
        Package::ALL
            .into_iter()
            .find(|package| package.name() == name)
    }

    /// The format as a person knows it.
    pub fn name(self) -> &'static str {
        match self {
            Package::Docx => "Word document",
            Package::Pptx => "PowerPoint presentation",
            Package::Xlsx => "Excel workbook",
            Package::Odt => "OpenDocument text",
            Package::Odp => "OpenDocument presentation",
            Package::Ods => "OpenDocument spreadsheet",
            Package::Epub => "EPUB e-book",
            Package::Hwpx => "HWPX document",
        }
    }

    /// The MIME type stored with the document.
    pub fn mime(self) -> &'static str {
        match self {
            Package::Docx => {
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            }
            Package::Pptx => {
                "application/vnd.openxmlformats-officedocument.presentationml.presentation"
            }
            Package::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Package::Odt => "application/vnd.oasis.opendocument.text",
            Package::Odp => "application/vnd.oasis.opendocument.presentation",
            Package::Ods => "application/vnd.oasis.opendocument.spreadsheet",
            Package::Epub => "application/epub+zip",
            Package::Hwpx => "application/hwp+zip",
        }
    }

    /// A short stable name, for the extractor label ("docx").
    pub fn short(self) -> &'static str {
        match self {
            Package::Docx => "docx",
            Package::Pptx => "pptx",
            Package::Xlsx => "xlsx",
            Package::Odt => "odt",
            Package::Odp => "odp",
            Package::Ods => "ods",
            Package::Epub => "epub",
            Package::Hwpx => "hwpx",
        }
    }
}

/// The sections of a package of kind `package`.
pub fn read(package: Package, bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    match package {
        Package::Docx => ooxml::read_docx(bytes),
        Package::Pptx => ooxml::read_pptx(bytes),
        Package::Xlsx => sheet::read_xlsx(bytes),
        Package::Odt => odf::read_odt(bytes),
        Package::Odp => odf::read_odp(bytes),
        Package::Ods => sheet::read_ods(bytes),
        Package::Epub => epub::read_epub(bytes),
        Package::Hwpx => hwpx::read_hwpx(bytes),
    }
}

/// What a zip container holds. `named` (the format its file name suggests) only words the
/// message when the container cannot be opened at all.
pub fn detect(bytes: &[u8], named: Option<&'static str>) -> Result<Package, ExtractError> {
    let format = named.unwrap_or("zip archive");
    let mut zip = Archive::open(bytes, format)?;
    if let Some(mimetype) = zip.read("mimetype")? {
        let mimetype = String::from_utf8_lossy(&mimetype);
        if let Some(package) = by_mimetype(mimetype.trim()) {
            return Ok(package);
        }
    }
    if let Some(types) = zip.read_text("[Content_Types].xml")?
        && let Some(package) = by_content_types(&types)
    {
        return Ok(package);
    }
    if zip.has("Contents/section0.xml") {
        return Ok(Package::Hwpx);
    }
    if zip.has("META-INF/container.xml") && zip.names().iter().any(|n| n.ends_with(".opf")) {
        return Ok(Package::Epub);
    }
    Err(ExtractError::Unsupported {
        detected: "zip archive",
    })
}

fn by_mimetype(mimetype: &str) -> Option<Package> {
    Some(match mimetype {
        "application/vnd.oasis.opendocument.text" => Package::Odt,
        "application/vnd.oasis.opendocument.presentation" => Package::Odp,
        "application/vnd.oasis.opendocument.spreadsheet" => Package::Ods,
        "application/epub+zip" => Package::Epub,
        "application/hwp+zip" => Package::Hwpx,
        _ => return None,
    })
}

/// The package whose main part `[Content_Types].xml` declares (macro-enabled and template
/// variants included; their text is read the same way).
fn by_content_types(types: &str) -> Option<Package> {
    const MAIN: &[(&str, Package)] = &[
        ("wordprocessingml.document.main", Package::Docx),
        ("wordprocessingml.template.main", Package::Docx),
        ("ms-word.document.macroenabled.main", Package::Docx),
        ("ms-word.template.macroenabledtemplate.main", Package::Docx),
        ("presentationml.presentation.main", Package::Pptx),
        ("presentationml.slideshow.main", Package::Pptx),
        ("presentationml.template.main", Package::Pptx),
        (
            "ms-powerpoint.presentation.macroenabled.main",
            Package::Pptx,
        ),
        ("ms-powerpoint.slideshow.macroenabled.main", Package::Pptx),
        ("spreadsheetml.sheet.main", Package::Xlsx),
        ("spreadsheetml.template.main", Package::Xlsx),
        ("ms-excel.sheet.macroenabled.main", Package::Xlsx),
    ];
    let lower = types.to_ascii_lowercase();
    MAIN.iter()
        .find(|(marker, _)| lower.contains(marker))
        .map(|(_, package)| *package)
}
