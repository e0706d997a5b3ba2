//! The one list of what docket reads, as a person names it: served by `/api/info`, used by the
//! page's drop zone and file picker, by upload refusals, and copied into the README.

use serde::Serialize;

/// A format docket reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Format {
    /// The format as a person knows it ("Word document").
    pub name: &'static str,
    /// File name extensions, with the dot, lower case.
    pub extensions: &'static [&'static str],
    /// The MIME types stored for it (the first is the usual one).
    pub mime: &'static [&'static str],
}

/// Every format read, the most common first.
pub const FORMATS: &[Format] = &[
    Format {
        name: "PDF",
        extensions: &[".pdf"],
        mime: &["application/pdf"],
    },
    Format {
        name: "Word document",
        extensions: &[".docx", ".docm", ".dotx"],
        mime: &["application/vnd.openxmlformats-officedocument.wordprocessingml.document"],
    },
    Format {
        name: "PowerPoint presentation",
        extensions: &[".pptx", ".ppsx", ".pptm"],
        mime: &["application/vnd.openxmlformats-officedocument.presentationml.presentation"],
    },
    Format {
        name: "Excel workbook",
        extensions: &[".xlsx", ".xlsm"],
        mime: &["application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"],
    },
    Format {
        name: "HWPX document",
        extensions: &[".hwpx"],
        mime: &["application/hwp+zip"],
    },
    Format {
        name: "HWP document",
        extensions: &[".hwp"],
        mime: &["application/x-hwp"],
    },
    Format {
        name: "Excel 97–2003 workbook",
        extensions: &[".xls"],
        mime: &["application/vnd.ms-excel"],
    },
    Format {
        name: "OpenDocument text",
        extensions: &[".odt"],
        mime: &["application/vnd.oasis.opendocument.text"],
    },
    Format {
        name: "OpenDocument presentation",
        extensions: &[".odp"],
        mime: &["application/vnd.oasis.opendocument.presentation"],
    },
    Format {
        name: "OpenDocument spreadsheet",
        extensions: &[".ods"],
        mime: &["application/vnd.oasis.opendocument.spreadsheet"],
    },
    Format {
        name: "EPUB e-book",
        extensions: &[".epub"],
        mime: &["application/epub+zip"],
    },
    Format {
        name: "RTF document",
        extensions: &[".rtf"],
        mime: &["application/rtf"],
    },
    Format {
        name: "e-mail message",
        extensions: &[".eml"],
        mime: &["message/rfc822"],
    },
    Format {
        name: "CSV or TSV table",
        extensions: &[".csv", ".tsv"],
        mime: &["text/csv", "text/tab-separated-values"],
    },
    Format {
        name: "HTML page",
        extensions: &[".html", ".htm", ".xhtml"],
        mime: &["text/html"],
    },
    Format {
        name: "Markdown",
        extensions: &[".md", ".markdown"],
        mime: &["text/markdown"],
    },
    Format {
        name: "plain text",
        extensions: &[".txt", ".text", ".log"],
        mime: &["text/plain"],
    },
    Format {
        name: "image (read by OCR)",
        extensions: &[".png", ".jpg", ".jpeg", ".tif", ".tiff"],
        mime: &["image/png", "image/jpeg", "image/tiff"],
    },
];

/// The format a file name suggests, for wording messages only (never for deciding a type).
pub fn named(filename: &str) -> Option<&'static str> {
    let lower = filename.to_ascii_lowercase();
    FORMATS
        .iter()
        .find(|format| format.extensions.iter().any(|ext| lower.ends_with(ext)))
        .map(|format| format.name)
}

/// "PDF, Word document, …": the list for a sentence.
pub fn names() -> String {
    let names: Vec<&str> = FORMATS.iter().map(|format| format.name).collect();
    names.join(", ")
}
