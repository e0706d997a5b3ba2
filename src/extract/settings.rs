//! The settings of extraction, for every format: where the isolated child is, its time and
//! memory limits, OCR, and paragraph rebuilding. One value, built once by `app` from the
//! configuration and handed to every reader, so a new format needs no settings type of its own.

use std::path::PathBuf;
use std::time::Duration;

use super::ocr::OcrSettings;

/// Limits and helper programs for extraction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractSettings {
    /// The docket binary, re-run as `docket __extract-pdf` for isolation.
    pub child_exe: PathBuf,
    /// Wall-clock limit for each extractor in the chain.
    pub timeout: Duration,
    /// Address-space limit (RLIMIT_AS) for each extractor process. It counts mappings, not
    /// resident memory: keep it at 256 MiB or more (the parser thread alone reserves a 64 MiB
    /// stack, and `pdftotext` maps its shared libraries).
    pub memory_bytes: u64,
    /// Poppler's `pdftotext`, a path or a name looked up on `PATH`.
    pub pdftotext: PathBuf,
    /// OCR of pages without a usable text layer and of images (same time and memory limits,
    /// per helper call).
    pub ocr: OcrSettings,
    /// Rebuild paragraphs from the extractors' lines (on; off only to measure the difference).
    pub paragraphs: bool,
}

impl ExtractSettings {
    /// Settings fit for a worker: 60 s and 1 GiB per extractor, `pdftotext` from `PATH`.
    pub fn new(child_exe: PathBuf) -> Self {
        ExtractSettings {
            child_exe,
            timeout: Duration::from_secs(60),
            memory_bytes: 1 << 30,
            pdftotext: PathBuf::from("pdftotext"),
            ocr: OcrSettings::default(),
            paragraphs: true,
        }
    }
}
