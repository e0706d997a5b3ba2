//! Everything that starts with the OLE compound-file magic: HWP 5.0, legacy Office (Word,
//! PowerPoint, Excel 97–2003) and password-protected OOXML packages, which Office wraps in the
//! same container.
//!
//! What a file is follows from its stream names, never from its file name ([`classify`]): an
//! `EncryptedPackage` is an encrypted Word/Excel/PowerPoint file, a `FileHeader` that says
//! "HWP Document File" is HWP ([`hwp`]), `Workbook`/`Book` is an `.xls` read with calamine
//! ([`xls`]), and `WordDocument` / `PowerPoint Document` are refused with what to do instead.
//! HWP 3.x is not OLE but has its own magic ([`is_hwp3`]); it is refused the same way.
//!
//! The container is parsed by `cfb`, which validates sector chains (a cyclic chain is an error,
//! not a loop); every stream read is capped ([`Budget`]), and all file data is read through
//! checked accessors, so a hostile file ends in an [`ExtractError`], never a panic or an
//! unbounded allocation.

mod budget;
mod hwp;
mod hwp_body;
mod hwp_crypt;
mod hwp_records;
mod xls;

use std::io::{Cursor, Read};

use cfb::CompoundFile;

use super::{ExtractError, Section};
pub use budget::Budget;

/// The first eight bytes of every OLE compound file.
const OLE_MAGIC: &[u8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1";
/// The first bytes of an HWP 3.x file (not OLE).
const HWP3_MAGIC: &[u8] = b"HWP Document File V3";

/// The most directory entries a compound file may have; real HWP files have a few dozen, a
/// 1,000-page report a few hundred.
const MAX_ENTRIES: usize = 20_000;

/// What an OLE compound file holds, judged from its stream names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OleKind {
    /// A Hangul Word Processor 5.x document (`FileHeader` + `BodyText/Section*`).
    Hwp,
    /// An OOXML document (Word, Excel or PowerPoint) encrypted with a password.
    EncryptedOffice,
    /// A legacy Word 97–2003 document (`WordDocument`).
    Word97,
    /// A legacy PowerPoint 97–2003 presentation (`PowerPoint Document`).
    PowerPoint97,
    /// A legacy Excel workbook (`Workbook`, or `Book` for Excel 5/95).
    Excel97,
    /// Some other compound file (an Outlook message, an MSI package, a thumbnail cache…).
    Other,
}

impl OleKind {
    /// The format as a person knows it.
    pub fn name(self) -> &'static str {
        match self {
            OleKind::Hwp => "HWP document",
            OleKind::EncryptedOffice => "Office document",
            OleKind::Word97 => "legacy Word 97–2003 document",
            OleKind::PowerPoint97 => "legacy PowerPoint 97–2003 presentation",
            OleKind::Excel97 => "Excel 97–2003 workbook",
            OleKind::Other => "OLE compound file",
        }
    }

    /// The MIME type stored with such a document.
    pub fn content_type(self) -> &'static str {
        match self {
            OleKind::Hwp => "application/x-hwp",
            OleKind::EncryptedOffice => "application/x-ooxml-encrypted",
            OleKind::Word97 => "application/msword",
            OleKind::PowerPoint97 => "application/vnd.ms-powerpoint",
            OleKind::Excel97 => "application/vnd.ms-excel",
            OleKind::Other => "application/x-ole-storage",
        }
    }
}

/// Whether the bytes start with the OLE compound-file magic.
pub fn is_ole(bytes: &[u8]) -> bool {
    bytes.starts_with(OLE_MAGIC)
}

/// Whether the bytes are an HWP 3.x document (its own binary format, not OLE).
pub fn is_hwp3(bytes: &[u8]) -> bool {
    bytes.starts_with(HWP3_MAGIC)
}

/// What HWP 3.x files get: a refusal that says what to do.
pub fn hwp3_refusal() -> ExtractError {
    ExtractError::LegacyFormat {
        format: "HWP 3.x document",
        advice: "open it in Hangul and save it as .hwpx or .hwp (5.0)",
    }
}

/// Classifies a compound file by its stream names.
pub fn classify(bytes: &[u8]) -> Result<OleKind, ExtractError> {
    let file = open(bytes)?;
    Ok(kind_of(&file))
}

/// Extracts the text of any compound file docket reads (HWP 5.0, `.xls`), or the readable
/// refusal for the others.
pub fn extract_ole(bytes: &[u8]) -> Result<Vec<Section>, ExtractError> {
    if is_hwp3(bytes) {
        return Err(hwp3_refusal());
    }
    let mut file = open(bytes)?;
    match kind_of(&file) {
        OleKind::Hwp => hwp::extract(&mut file, &mut Budget::default()),
        OleKind::Excel97 => xls::extract(bytes),
        refused => Err(refusal(refused)),
    }
}

/// Why a compound file of `kind` is not read: encrypted, legacy with what to do instead, or not
/// a document. Sniffing refuses with it at upload without opening the file again; for the
/// kinds docket reads (HWP, `.xls`) it is only the generic refusal, and never asked.
pub fn refusal(kind: OleKind) -> ExtractError {
    match kind {
        OleKind::EncryptedOffice => ExtractError::Encrypted {
            format: kind.name(),
        },
        OleKind::Word97 => ExtractError::LegacyFormat {
            format: kind.name(),
            advice: "open it in Word or LibreOffice and save it as .docx",
        },
        OleKind::PowerPoint97 => ExtractError::LegacyFormat {
            format: kind.name(),
            advice: "open it in PowerPoint or LibreOffice and save it as .pptx",
        },
        OleKind::Hwp | OleKind::Excel97 | OleKind::Other => ExtractError::Unsupported {
            detected: kind.content_type(),
        },
    }
}

type Ole<'a> = CompoundFile<Cursor<&'a [u8]>>;

/// Opens the container; its directory must be sane and not absurdly large.
fn open(bytes: &[u8]) -> Result<Ole<'_>, ExtractError> {
    if !is_ole(bytes) {
        return Err(corrupt("not an OLE compound file"));
    }
    let file = CompoundFile::open(Cursor::new(bytes)).map_err(|e| corrupt(&e.to_string()))?;
    if file.walk().nth(MAX_ENTRIES).is_some() {
        return Err(ExtractError::TooComplex {
            reason: format!("the compound file has more than {MAX_ENTRIES} entries"),
        });
    }
    Ok(file)
}

fn kind_of(file: &Ole<'_>) -> OleKind {
    let stream = |path: &str| file.is_stream(path);
    if stream("/EncryptedPackage") {
        OleKind::EncryptedOffice
    } else if stream("/FileHeader") && stream("/DocInfo") {
        OleKind::Hwp
    } else if stream("/WordDocument") {
        OleKind::Word97
    } else if stream("/PowerPoint Document") {
        OleKind::PowerPoint97
    } else if stream("/Workbook") || stream("/Book") {
        OleKind::Excel97
    } else {
        OleKind::Other
    }
}

/// Reads a whole stream, within the budget.
fn read_stream(
    file: &mut Ole<'_>,
    path: &str,
    budget: &mut Budget,
) -> Result<Vec<u8>, ExtractError> {
    let stream = file
        .open_stream(path)
        .map_err(|e| corrupt(&format!("{path}: {e}")))?;
    let len = usize::try_from(stream.len()).unwrap_or(usize::MAX);
    budget.take_bytes(len)?;
    let mut out = Vec::with_capacity(len);
    stream
        .take(len as u64)
        .read_to_end(&mut out)
        .map_err(|e| corrupt(&format!("{path}: {e}")))?;
    Ok(out)
}

/// The error for a damaged container (cfb's errors: cyclic or out-of-range sector chains, a
/// directory that does not parse), before its kind is known.
fn corrupt(reason: &str) -> ExtractError {
    ExtractError::Corrupt {
        format: "Office or HWP file",
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests;
