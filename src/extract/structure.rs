//! Where text sits in a document, as a person names it: a page, a slide, a sheet's rows, a
//! heading path, an e-mail attachment. Readers of structured formats return [`Section`]s, each
//! a run of text with its [`Location`]; chunks keep the location of the text they start in, and
//! search hits show its [`Location::label`].

use serde::{Deserialize, Serialize};

/// Where a piece of text sits in its document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Location {
    /// A page of a paginated document (PDF, image), numbered from 1.
    Page { number: u32 },
    /// A slide of a presentation (PPTX, ODP), numbered from 1 in show order.
    Slide { number: u32 },
    /// Rows of a spreadsheet's sheet (XLSX, XLS, ODS, CSV), numbered from 1 as the program
    /// shows them.
    Sheet {
        name: String,
        first_row: u32,
        last_row: u32,
    },
    /// The headings above the text, outermost first (DOCX, ODT, HWP, HWPX, EPUB, Markdown,
    /// HTML); empty before the first heading.
    Section { path: Vec<String> },
    /// A file attached to an e-mail, and where in it (None: the attachment as a whole).
    Attachment {
        name: String,
        inner: Option<Box<Location>>,
    },
}

impl Location {
    /// The label a person reads next to a hit: "page 3", "slide 2", "Sheet1, rows 4–9",
    /// "2. Installation › 2.1 Requirements", "attachment report.pdf › page 2".
    pub fn label(&self) -> String {
        match self {
            Location::Page { number } => format!("page {number}"),
            Location::Slide { number } => format!("slide {number}"),
            Location::Sheet {
                name,
                first_row,
                last_row,
            } if first_row == last_row => format!("{name}, row {first_row}"),
            Location::Sheet {
                name,
                first_row,
                last_row,
            } => format!("{name}, rows {first_row}–{last_row}"),
            Location::Section { path } => path.join(" › "),
            Location::Attachment { name, inner: None } => format!("attachment {name}"),
            Location::Attachment {
                name,
                inner: Some(inner),
            } => {
                let inner = inner.label();
                if inner.is_empty() {
                    format!("attachment {name}")
                } else {
                    format!("attachment {name} › {inner}")
                }
            }
        }
    }
}

/// A run of a document's text with its location: paragraphs separated by blank lines; a table
/// is linearised one row a line (`header: value; header: value`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub location: Location,
    pub text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_as_a_person_names_the_place() {
        assert_eq!(Location::Slide { number: 2 }.label(), "slide 2");
        let rows = Location::Sheet {
            name: "Q1".into(),
            first_row: 4,
            last_row: 9,
        };
        assert_eq!(rows.label(), "Q1, rows 4–9");
        let path = Location::Section {
            path: vec!["2. Installation".into(), "2.1 Requirements".into()],
        };
        assert_eq!(path.label(), "2. Installation › 2.1 Requirements");
        let attached = Location::Attachment {
            name: "report.pdf".into(),
            inner: Some(Box::new(Location::Page { number: 2 })),
        };
        assert_eq!(attached.label(), "attachment report.pdf › page 2");
    }
}
